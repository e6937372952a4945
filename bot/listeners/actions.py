"""Buttons: Approve / Deny on bump requests, refresh on the App Home."""

from __future__ import annotations

import re
from typing import Any

from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient

from bot.blocks import ids
from bot.blocks.replies import error
from bot.i18n import t
from bot.listeners.commands import open_submit_modal
from bot.messenger import Messenger
from bot.replying import message_for
from bot.services import BotServices
from scheduler.service.bumps import DecisionResult


def register(app: App, services: BotServices, messenger: Messenger) -> None:
    def decide(
        approve: bool, ack: Ack, body: dict[str, Any], action: dict[str, Any], respond: Respond
    ) -> None:
        ack()
        user = body["user"]["id"]
        lang = services.language(user)
        request_id = _request_id(action.get("value"))
        if request_id is None:
            message = error(t(lang, "error.bad_button"), lang, None)
            respond(
                text=message.text,
                blocks=message.blocks,
                response_type="ephemeral",
                replace_original=False,
            )
            return
        outcome = services.decide(request_id, approve, user, None)
        result = outcome.result
        if not outcome.ok or not isinstance(result, DecisionResult) or not result.changed:
            # A refusal, or a second click / replayed payload: only the clicker hears about it.
            message = message_for(outcome, lang, services.zone, services.now())
            respond(
                text=message.text,
                blocks=message.blocks,
                response_type="ephemeral",
                replace_original=False,
            )
            return
        messenger.follow_up(outcome, user)

    @app.action(ids.BUMP_APPROVE)
    def approve(ack: Ack, body: dict[str, Any], action: dict[str, Any], respond: Respond) -> None:
        decide(True, ack, body, action, respond)

    @app.action(ids.BUMP_DENY)
    def deny(ack: Ack, body: dict[str, Any], action: dict[str, Any], respond: Respond) -> None:
        decide(False, ack, body, action, respond)

    @app.action(ids.HOME_SUBMIT)
    def submit_from_home(ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        ack()
        open_submit_modal(client, services, body["user"]["id"], body["trigger_id"])

    @app.action(ids.HOME_REFRESH)
    def refresh(ack: Ack, body: dict[str, Any]) -> None:
        ack()
        messenger.publish_home(body["user"]["id"])


def _request_id(value: object) -> int | None:
    """The request id a button carries; anything else is a forged or stale payload."""
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,12}", value):
        return int(value)
    return None
