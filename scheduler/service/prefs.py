"""Each person's preferences: for now, the language of the bot's replies."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session

from scheduler.errors import Problem, UserError
from scheduler.service.context import Context
from storage.queries import org as org_queries

LANGUAGES = ("en", "zh")


@dataclass(frozen=True)
class LanguageChoice:
    """What `lang` tells the user: the language saved. The faces confirm it in both
    languages, so the person can read it whichever they chose."""

    user_id: str
    language: str


def set_language(ctx: Context, language: str) -> LanguageChoice:
    """Save the actor's reply language; anyone may choose, member or not."""
    if language not in LANGUAGES:  # the grammar refuses others; this guards other callers
        raise UserError(Problem.UNKNOWN_LANGUAGE, language=language, languages=LANGUAGES)
    org_queries.set_language(
        session=ctx.session, user_id=ctx.actor.user_id, language=language, at=ctx.now
    )
    ctx.audit("prefs.language", "user", ctx.actor.user_id, language=language)
    return LanguageChoice(ctx.actor.user_id, language)


def language_of(session: Session, user_id: str, default: str) -> str:
    """The language `user_id` chose for replies, or `default` if they never chose."""
    pref = org_queries.user_pref(session=session, user_id=user_id)
    return pref.language if pref is not None and pref.language in LANGUAGES else default
