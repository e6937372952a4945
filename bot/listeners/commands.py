"""`/gpu …`: acknowledged at once; the answer follows through the command's response_url."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient

from bot.blocks.submit_modal import submit_modal
from bot.failures import reported
from bot.messenger import Messenger
from bot.replying import message_for, split_share
from bot.services import BotServices

COMMAND = "/gpu"


def acknowledge(ack: Ack) -> None:
    """Slack gives three seconds; every answer comes after this, so nothing waits for it."""
    ack()


def register(app: App, services: BotServices, messenger: Messenger) -> None:
    def answer(body: dict[str, Any], respond: Respond, client: WebClient) -> None:
        with reported(services, body, respond):
            user = body["user_id"]
            text = (body.get("text") or "").strip()
            if text.lower() == "submit":
                open_submit_modal(client, services, user, body["trigger_id"])
                return
            text, share = split_share(text)
            outcome = services.run(text or "help", user)
            # Read after the command, so `/gpu lang zh` already answers in Chinese.
            lang = services.language(user)
            message = message_for(outcome, lang, services.zone, services.now())
            visible = "in_channel" if share and outcome.ok else "ephemeral"
            respond(text=message.text, blocks=message.blocks, response_type=visible)
            messenger.follow_up(outcome, user)

    app.command(COMMAND)(ack=acknowledge, lazy=[answer])


def open_submit_modal(client: WebClient, services: BotServices, user: str, trigger_id: str) -> None:
    """The submit form, with this user's card types, teams and templates to choose from."""
    choices = services.submit_choices(user)
    view = submit_modal(
        services.language(user), choices.gpu_types, choices.teams, choices.templates
    )
    client.views_open(trigger_id=trigger_id, view=view)
