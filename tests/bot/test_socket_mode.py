"""Socket Mode: the bot as `paika up` starts it with SLACK_APP_TOKEN, one command round trip."""

from __future__ import annotations

import dataclasses

from conftest import MEMBER, text_of
from fakes import APP_TOKEN, BOT_TOKEN, signing
from fakes.slack_server import FakeSlack
from pydantic import SecretStr

from bot.runtime import start_bot
from scheduler.app import Paika


def test_a_command_over_socket_mode_is_acked_and_answered(paika: Paika, slack: FakeSlack) -> None:
    settings = paika.settings.model_copy(
        update={
            "slack_bot_token": SecretStr(BOT_TOKEN),
            "slack_app_token": SecretStr(APP_TOKEN),
            "slack_signing_secret": None,  # Socket Mode needs no signing secret
            "slack_api_url": slack.api_url,
        }
    )
    bot = start_bot(dataclasses.replace(paika, settings=settings))
    try:
        assert bot.mode == "socket"
        server = slack.socket_mode
        assert server is not None
        server.wait_connected()
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
    finally:
        bot.stop()
