"""A reason, a match's choice or a verdict in the reader's language, from its code and values.

The scheduler keeps each as a code with the values it names (scheduler.policy.reasons) beside its
English text. A reason with no code — typed by a person, or stored before codes, or a code
this version does not know — is said as stored.
"""

from __future__ import annotations

from typing import Any

from bot.i18n import has, refusal_words, t, term
from scheduler.door import Reason


def reason_words(lang: str, why: Reason | None, stored: str | None) -> str:
    """`why` in `lang`; the stored text where there is no code."""
    if why is None:
        return stored or ""
    try:
        return _said(lang, why)
    except (KeyError, ValueError, TypeError):
        # Values another version of paika stored under the same code (one missing, or of
        # another kind): its stored text says it, rather than the reply failing.
        return stored if stored is not None else why.code.value


def _said(lang: str, why: Reason) -> str:
    values = {name: _value(lang, name, value, why) for name, value in why.values.items()}
    return t(lang, f"reason.{why.code.value}", **values)


def _value(lang: str, name: str, value: Any, why: Reason) -> Any:
    """One value as the sentence names it: a reason inside said in turn, a stop or a job's
    state by its word, a start's problem in paika's words where its code has some (the host's own otherwise)."""
    if isinstance(value, Reason):
        return _said(lang, value)
    if name == "stop":
        key = f"reason.stop.{value}"
        return t(lang, key) if has(key) else str(value)
    if name == "state":
        return term(lang, "state", str(value))
    if name == "problem":
        return _problem(lang, why) or value
    return value


def _problem(lang: str, why: Reason) -> str | None:
    """Why a host would not start a job, in paika's words: its refusal's, or its executor's
    (the first line: the rest tells an admin what to fix)."""
    refusal = why.values.get("refusal")
    if refusal is not None and has(f"notice.event.refusal.{refusal}"):
        return refusal_words(lang, refusal, why.values.get("host"), why.values)
    dispatch = why.values.get("dispatch")
    if dispatch is not None and has(f"notice.event.dispatch.{dispatch}"):
        return t(lang, f"notice.event.dispatch.{dispatch}").split("\n")[0]
    return None
