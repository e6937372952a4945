"""The bot as `paika up` serves it in HTTP mode, for tests in any folder: the real Bolt app
over HTTP on loopback, its Web API on a fake Slack, a courier delivering the outbox's
notices; signed requests in, what the fake Slack was sent out."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from fake_slack import BOT_TOKEN, SIGNING_SECRET, USER_ID, signing
from fake_slack.slack_server import FakeSlack
from pydantic import SecretStr
from slack_bolt import App

from bot.announcer import SlackAnnouncer
from bot.app import build_app
from bot.http import EVENTS_PATH, http_app
from bot.messenger import Messenger
from bot.services import BotServices
from bot.up import quick_acks
from scheduler.app import Paika
from scheduler.notices.outbox import Courier
from scheduler.serving import serve_in_thread, stop_server

MEMBER = USER_ID


@dataclass
class Bot:
    """The running bot and what a test does with it."""

    app: App
    services: BotServices
    messenger: Messenger
    url: str
    slack: FakeSlack
    paika: Paika

    def send(self, signed: tuple[str, dict[str, str]]) -> httpx.Response:
        body, headers = signed
        return signing.post(self.url, body, headers)

    def command(self, text: str, user: str = MEMBER, name: str = "r") -> httpx.Response:
        """A signed `/gpu text` whose answer the fake keeps under `name`."""
        return self.send(
            signing.slash_command(
                SIGNING_SECRET,
                text,
                user_id=user,
                response_url=self.slack.response_url(name),
                trigger_id=f"trig.{name}",
            )
        )

    def answer(self, text: str, user: str = MEMBER, name: str = "r") -> dict[str, Any]:
        """Send a command and wait for the answer posted to its response_url."""
        before = len(self.slack.responses(name))
        response = self.command(text, user, name)
        assert response.status_code == 200, response.text
        return self.slack.wait_for_response(name, count=before + 1)[before]


def click(
    bot: Bot, user: str, action_id: str, value: str, posted: Any, name: str, block_id: str
) -> None:
    """`user` clicks a button of the message `posted` (a chat.postMessage call of the fake),
    signed through the real Bolt app; what the bot answers is kept under the response URL
    `name`."""
    channel, ts = posted.response["channel"], posted.response["ts"]
    signed = signing.block_action(
        SIGNING_SECRET,
        user,
        action_id,
        value,
        block_id=block_id,
        channel_id=channel,
        response_url=bot.slack.response_url(name),
        container={
            "type": "message",
            "message_ts": ts,
            "channel_id": channel,
            "is_ephemeral": False,
        },
    )
    assert bot.send(signed).status_code == 200


def settled(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Wait for work the bot does after acknowledging (it runs on Bolt's threads)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def text_of(message: dict[str, Any]) -> str:
    """Everything a person would read in a message: its text and every text in its blocks."""
    parts = [str(message.get("text") or "")]

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "text" and isinstance(value, str):
                    parts.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(message.get("blocks") or [])
    return "\n".join(parts)


@contextmanager
def running_bot(
    paika: Paika, slack: FakeSlack, kinds: Sequence[str] | None = None
) -> Iterator[Bot]:
    """The bot on `paika`, served over HTTP, talking to `slack`. Its courier delivers the
    notices of `kinds` at once (None: every kind, as in `paika up`)."""
    settings = paika.settings.model_copy(
        update={
            "slack_bot_token": SecretStr(BOT_TOKEN),
            "slack_signing_secret": SecretStr(SIGNING_SECRET),
            "slack_api_url": slack.api_url,
        }
    )
    services = BotServices(paika)
    app, messenger = build_app(settings, services)
    courier = Courier(
        paika.engine, SlackAnnouncer(messenger, services), paika.clock, every_s=0.5, kinds=kinds
    )
    paika.on_change = courier.wake
    courier.start()
    quick_acks()  # as paika up does
    server, thread, port = serve_in_thread(http_app(app, messenger.pacing))
    try:
        yield Bot(app, services, messenger, f"http://127.0.0.1:{port}{EVENTS_PATH}", slack, paika)
    finally:
        stop_server(server, thread)
        courier.stop()
