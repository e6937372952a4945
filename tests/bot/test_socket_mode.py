"""Socket Mode: the bot as `paika up` starts it with SLACK_APP_TOKEN, command round trips."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from conftest import MEMBER, settled, text_of
from fake_slack import APP_TOKEN, BOT_TOKEN, signing
from fake_slack.slack_server import FakeSlack
from fake_slack.socket_mode import SocketModeServer
from pydantic import SecretStr

from bot.runtime import SlackBot, start_bot
from scheduler.app import Paika


@pytest.fixture
def socket_bot(paika: Paika, slack: FakeSlack) -> Iterator[SlackBot]:
    settings = paika.settings.model_copy(
        update={
            "slack_bot_token": SecretStr(BOT_TOKEN),
            "slack_app_token": SecretStr(APP_TOKEN),
            "slack_signing_secret": None,  # Socket Mode needs no signing secret
            "slack_api_url": slack.api_url,
        }
    )
    bot = start_bot(dataclasses.replace(paika, settings=settings))
    yield bot
    bot.stop()


def _connected(slack: FakeSlack) -> SocketModeServer:
    server = slack.socket_mode
    assert server is not None
    server.wait_connected()
    return server


def test_a_command_over_socket_mode_is_acked_and_answered(
    socket_bot: SlackBot, slack: FakeSlack
) -> None:
    assert socket_bot.mode == "socket"
    server = _connected(slack)
    fields = signing.slash_command_fields(
        "queue", user_id=MEMBER, response_url=slack.response_url("sock")
    )
    ack = server.wait_for_ack(server.push_slash_command(fields))
    assert ack["envelope_id"]
    answer = slack.wait_for_response("sock")[0]
    assert "Nothing is waiting" in text_of(answer)
    # apps.connections.open was asked with the app token, not the bot token.
    opened = slack.last("apps.connections.open")
    assert opened.headers["authorization"] == f"Bearer {APP_TOKEN}"
    slack.assert_nothing_invalid()


def test_an_envelope_delivered_twice_is_acked_twice_and_handled_once(
    socket_bot: SlackBot, slack: FakeSlack
) -> None:
    server = _connected(slack)
    fields = signing.slash_command_fields(
        "queue", user_id=MEMBER, response_url=slack.response_url("twice")
    )
    envelope = {
        "envelope_id": "d1e2c3b4-0000-4000-8000-paika0000001",
        "type": "slash_commands",
        "accepts_response_payload": True,
        "payload": fields,
    }
    server.push(envelope)
    server.push(envelope)  # as after a lost ack: the same envelope once more
    assert settled(
        lambda: sum(a["envelope_id"] == envelope["envelope_id"] for a in server.acks()) == 2
    )
    # Answered after whatever the second delivery could have set off (one worker, in order).
    later = signing.slash_command_fields(
        "queue", user_id=MEMBER, response_url=slack.response_url("after")
    )
    server.wait_for_ack(server.push_slash_command(later))
    slack.wait_for_response("after")
    assert len(slack.responses("twice")) == 1
    slack.assert_nothing_invalid()
