"""`/gpu …`: acknowledged at once; the answer follows through the command's response_url."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from slack_bolt import Ack, App, BoltContext, Respond
from slack_sdk import WebClient

from bot.blocks.submit_modal import submit_modal
from bot.failures import reported
from bot.listeners import reports
from bot.messenger import Messenger
from bot.replays import first_time, once
from bot.replying import message_for, split_share
from bot.services import BotServices
from scheduler.door import Answer

COMMAND = "/gpu"


def acknowledge(ack: Ack) -> None:
    """Slack gives three seconds; every answer comes after this, so nothing waits for it."""
    ack()


def register(
    app: App, services: BotServices, messenger: Messenger, modals: Executor, answers: Executor
) -> None:
    def answer(body: dict[str, Any], respond: Respond) -> None:
        with reported(services, body, respond):
            user = body["user_id"]
            text, share = split_share((body.get("text") or "").strip())
            read = services.begin_run(text or "help", user)
            # The answer is read once the commands already queued behind this one have made
            # their changes too: in a burst, the answers then share one run of the policy
            # for their reasons and ETAs, instead of one run each (Paika.begin_run).
            answers.submit(finish, body, respond, user, read, share)

    def finish(
        body: dict[str, Any], respond: Respond, user: str, read: Answer, share: bool
    ) -> None:
        with reported(services, body, respond):
            outcome = read()
            # Read after the command, so `/gpu lang zh` already answers in Chinese.
            lang = services.language(user)
            message = message_for(outcome, lang, services.zone, services.now())
            visible = "in_channel" if share and outcome.ok else "ephemeral"
            respond(text=message.text, blocks=message.blocks, response_type=visible)
            messenger.follow_up(outcome, user)
            reports.post_file(messenger, outcome, body, respond, lang)

    # Bolt takes the first listener that matches: `/gpu submit` alone opens the form.
    app.command(COMMAND, matchers=[opens_modal])(modal_opener(services, modals))
    app.command(COMMAND)(ack=acknowledge, lazy=[once(services, answer)])


def opens_modal(body: dict[str, Any]) -> bool:
    """`/gpu submit` with nothing after it asks for the submit form."""
    return str(body.get("text") or "").strip().lower() == "submit"


def modal_opener(services: BotServices, modals: Executor) -> Callable[..., None]:
    """A listener that acks, then opens the submit modal on `modals` (a command or a button)."""

    def open_modal(
        ack: Ack, body: dict[str, Any], respond: Respond, client: WebClient, context: BoltContext
    ) -> None:
        ack()
        # The trigger_id expires 3 s after the command: the modal goes out on its own
        # threads, not behind the answers queued for the bot's worker (bot.pacing).
        modals.submit(_open_once, services, client, body, respond, context)

    return open_modal


def _open_once(
    services: BotServices,
    client: WebClient,
    body: dict[str, Any],
    respond: Respond,
    context: BoltContext,
) -> None:
    with reported(services, body, respond):
        if first_time(services, context):  # a replay opens nothing (bot.replays)
            user = body.get("user_id") or body["user"]["id"]
            open_submit_modal(client, services, str(user), body["trigger_id"])


def open_submit_modal(client: WebClient, services: BotServices, user: str, trigger_id: str) -> None:
    """The submit form, with this user's card types, teams and templates to choose from."""
    choices = services.submit_choices(user)
    view = submit_modal(
        services.language(user), choices.gpu_types, choices.teams, choices.templates
    )
    client.views_open(trigger_id=trigger_id, view=view)
