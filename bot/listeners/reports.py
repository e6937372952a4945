"""The ledger report's Slack parts: the Previous/Next page buttons, and the CSV file that
`/gpu report … file=csv` posts to the channel it was asked in."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt import Ack, App, Respond
from slack_sdk.errors import SlackClientError

from bot.blocks import ids
from bot.blocks.replies import error
from bot.blocks.report import export_command
from bot.failures import reported
from bot.i18n import t
from bot.messenger import Messenger
from bot.replays import once
from bot.replying import message_for
from bot.report_export import report_csv
from bot.services import BotServices
from scheduler.door import Reply, ReportResult

log = logging.getLogger(__name__)
# What a page button may run: a report (a forged value is refused, never run).
_REPORT = "report"


def acknowledge(ack: Ack) -> None:
    """A click is acknowledged at once; the page follows through its response_url."""
    ack()


def register(app: App, services: BotServices, messenger: Messenger) -> None:
    def turn(body: dict[str, Any], respond: Respond) -> None:
        with reported(services, body, respond):
            user = body["user"]["id"]
            lang = services.language(user)
            actions = body.get("actions") or [{}]
            words = str(actions[0].get("value") or "")
            if words.split(" ", 1)[0] != _REPORT:
                message = error(t(lang, "error.bad_button"), lang, None)
                respond(text=message.text, blocks=message.blocks, replace_original=False)
                return
            outcome = services.run(words, user)
            message = message_for(outcome, lang, services.zone, services.now())
            # The page replaces the one shown; a refusal (a page gone since) is said apart.
            respond(text=message.text, blocks=message.blocks, replace_original=outcome.ok)

    app.action(ids.REPORT_PREVIOUS)(ack=acknowledge, lazy=[once(services, turn)])
    app.action(ids.REPORT_NEXT)(ack=acknowledge, lazy=[once(services, turn)])


def post_file(
    messenger: Messenger, outcome: Reply, body: dict[str, Any], respond: Respond, lang: str
) -> None:
    """After a `/gpu report … file=csv` answer: the whole report as a CSV file in the
    channel it was asked in; if Slack refuses it, the asker is told how to get it instead."""
    result = outcome.result
    if not outcome.ok or not isinstance(result, ReportResult) or not result.ask.file:
        return
    day = result.end.date().isoformat()
    try:
        messenger.client.files_upload_v2(
            channel=str(body.get("channel_id") or ""),
            content=report_csv(result),
            filename=f"paika-report-{day}.csv",
            title=t(lang, "report.header", start=result.start.date(), end=result.end.date()),
        )
    except SlackClientError as exc:
        log.warning("could not post the report's file: %s", exc)
        command = export_command(result.ask)
        message = error(
            t(lang, "report.file_failed", why=type(exc).__name__, command=command), lang, None
        )
        respond(text=message.text, blocks=message.blocks, replace_original=False)
