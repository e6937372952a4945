"""The submit modal: inline errors under each wrong field, or the job queued and a DM."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App

from bot.blocks import ids
from bot.blocks.submit_modal import block_for_key, read_submission
from bot.messenger import Messenger
from bot.replying import message_for
from bot.said import problem as problem_words
from bot.said import problem_sentence
from bot.services import BotServices
from scheduler.door import Answer
from scheduler.grammar.errors import ParseError

# Slack shows at most this many characters of an inline error.
ERROR_LIMIT = 150


def register(app: App, services: BotServices, messenger: Messenger) -> None:
    def tell_owner(read: Answer, user: str) -> None:
        """The DM that confirms a submission, with the job's reason and ETA, and the fresh
        Home (after the ack: it may ask Slack the locale, and the ETA needs the policy)."""
        outcome = read()
        message = message_for(outcome, services.language(user), services.zone, services.now())
        messenger.dm(user, message)
        messenger.follow_up(outcome, user)

    @app.view(ids.SUBMIT_CALLBACK)
    def submitted(ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        user = body["user"]["id"]
        # Slack waits for this listener's answer, so nothing before the ack may call the
        # Web API: the errors are in the language known already (chosen, or the locale
        # learned when the modal was opened), never one asked of users.info now.
        lang = services.language(user, ask_slack=False)
        args, errors = read_submission(view["state"]["values"], lang)
        if errors:
            ack(response_action="errors", errors=errors)
            return
        # Submitting is quick (one transaction), so the modal waits for it and can show
        # the service's objection under the field at fault; the job's reason and ETA are
        # read after the ack.
        read = services.begin(("submit",), args, user)
        refused = read.refused
        if refused is not None:
            problem = refused.error
            key = problem.key if isinstance(problem, ParseError) else None
            if isinstance(problem, ParseError):
                text = problem_sentence(lang, problem)
            else:
                text = problem_words(lang, problem) if problem is not None else refused.text
            ack(response_action="errors", errors={block_for_key(key): _fit(text)})
            return
        ack()
        # The modal closes when this returns; the DM and the fresh Home follow in the background.
        messenger.later(tell_owner, read, user)


def _fit(text: str) -> str:
    return text if len(text) <= ERROR_LIMIT else text[: ERROR_LIMIT - 1] + "…"
