"""The submit modal: inline errors under each wrong field, or the job queued and a DM."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App

from bot.blocks import ids
from bot.blocks.submit_modal import block_for_key, read_submission
from bot.messenger import Messenger
from bot.replying import message_for
from bot.services import BotServices
from scheduler.grammar.errors import ParseError

# Slack shows at most this many characters of an inline error.
ERROR_LIMIT = 150


def register(app: App, services: BotServices, messenger: Messenger) -> None:
    @app.view(ids.SUBMIT_CALLBACK)
    def submitted(ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        user = body["user"]["id"]
        lang = services.language(user)
        args, errors = read_submission(view["state"]["values"], lang)
        if errors:
            ack(response_action="errors", errors=errors)
            return
        # Submitting is quick (one transaction), so the modal waits for it and can show
        # the service's objection under the field at fault.
        outcome = services.perform(("submit",), args, user)
        if not outcome.ok:
            problem = outcome.error
            key = problem.key if isinstance(problem, ParseError) else None
            text = problem.message if problem is not None else outcome.text
            ack(response_action="errors", errors={block_for_key(key): _fit(text)})
            return
        ack()
        # The modal closes when this returns; the DM and the fresh Home follow in the background.
        message = message_for(outcome, lang, services.zone, services.now())
        messenger.later(messenger.dm, user, message)
        messenger.later(messenger.follow_up, outcome, user)


def _fit(text: str) -> str:
    return text if len(text) <= ERROR_LIMIT else text[: ERROR_LIMIT - 1] + "…"
