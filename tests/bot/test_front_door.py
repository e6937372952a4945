"""Odd bodies at Slack's door get a 4xx with a short reason, never a 500 or a traceback."""

from __future__ import annotations

import contextlib
import json
import socket
from urllib.parse import urlencode, urlsplit

from conftest import MEMBER, Bot
from fake_slack import BOT_TOKEN, SIGNING_SECRET, signing
from fake_slack.slack_server import FakeSlack
from pydantic import SecretStr

from bot.blocks import ids
from bot.runtime import start_bot
from scheduler.app import Paika


def _plain(response_text: str) -> None:
    assert "Traceback" not in response_text and "Internal Server Error" not in response_text


def test_unsigned_junk_is_refused_with_401_not_500(bot: Bot) -> None:
    for body, content_type in (
        ("junk", "application/x-www-form-urlencoded"),
        ("{not json", "application/json"),
        ("payload=%7Bnot-json", "application/x-www-form-urlencoded"),
        ("\xff\xfe", "text/plain"),
        ("", "application/json"),
    ):
        response = signing.post(bot.url, body, {"Content-Type": content_type})
        assert response.status_code == 401, (body, response.status_code, response.text)
        _plain(response.text)


def test_a_forged_signature_on_junk_is_refused_with_401(bot: Bot) -> None:
    headers = signing.sign("not-the-secret", "{not json", content_type="application/json")
    response = signing.post(bot.url, "{not json", headers)
    assert response.status_code == 401
    _plain(response.text)


def test_signed_junk_is_a_400_that_says_what_was_wrong(bot: Bot) -> None:
    for body, content_type in (
        ("{not json", "application/json"),
        ("[1, 2]", "application/json"),
        ("payload=%7Bnot-json", "application/x-www-form-urlencoded"),
        ("payload=%5B1%5D", "application/x-www-form-urlencoded"),
        ("\xff", "application/x-www-form-urlencoded"),
    ):
        headers = signing.sign(SIGNING_SECRET, body, content_type=content_type)
        response = signing.post(bot.url, body, headers)
        assert 400 <= response.status_code < 500, (body, response.status_code, response.text)
        _plain(response.text)


def test_a_signed_submission_with_a_bogus_choice_gets_slacks_error_answer(bot: Bot) -> None:
    values: dict[str, object] = {
        ids.SUBMIT_NAME: "resnet",
        ids.SUBMIT_GPUS: "2",
        ids.SUBMIT_HOURS: "6",
        ids.SUBMIT_PRIORITY: signing.static_select("urgent-now"),
        ids.SUBMIT_DATA: signing.radio_buttons("maybe-later"),
        ids.SUBMIT_CMD: "python train.py",
    }
    state = {block: {block: value} for block, value in values.items()}
    signed = signing.view_submission(SIGNING_SECRET, MEMBER, ids.SUBMIT_CALLBACK, state)
    response = bot.send(signed)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["response_action"] == "errors"
    assert set(answer["errors"]) == {ids.SUBMIT_PRIORITY, ids.SUBMIT_DATA}
    _plain(response.text)


def test_a_submission_whose_listener_fails_keeps_the_modal_open_with_plain_words(bot: Bot) -> None:
    """A signed submission the listener cannot read (no user) gets Slack's error answer, not a 500."""
    state = {ids.SUBMIT_NAME: {ids.SUBMIT_NAME: "resnet"}}
    payload = signing.view_submission_payload(MEMBER, ids.SUBMIT_CALLBACK, state)
    del payload["user"]
    body = urlencode({"payload": json.dumps(payload)})
    response = signing.post(bot.url, body, signing.sign(SIGNING_SECRET, body))
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["response_action"] == "errors"
    assert list(answer["errors"]) == [ids.SUBMIT_NAME]
    assert "went wrong inside paika" in answer["errors"][ids.SUBMIT_NAME]
    _plain(response.text)


def test_http_mode_answers_slack_through_a_flood_of_idle_sockets(
    paika: Paika, slack: FakeSlack
) -> None:
    """`paika up` in HTTP mode (bot.runtime) serves Slack with the PAIKA_HTTP_* bounds: a
    flood of half-sent requests past its cap leaves signed commands answered."""
    cap, head_s = 10, 2.0
    paika.settings = paika.settings.model_copy(
        update={
            "slack_bot_token": SecretStr(BOT_TOKEN),
            "slack_signing_secret": SecretStr(SIGNING_SECRET),
            "slack_app_token": None,
            "slack_api_url": slack.api_url,
            "http_port": 0,
            "http_head_timeout_s": head_s,
            "http_max_connections": cap,
        }
    )
    running = start_bot(paika)
    flood: list[socket.socket] = []
    try:
        where = urlsplit(running.where)
        assert where.port is not None
        for _ in range(cap + 20):
            sock = socket.create_connection(("127.0.0.1", where.port), timeout=10)
            sock.sendall(b"POST /slack/ev")
            flood.append(sock)
        signed = signing.slash_command(
            SIGNING_SECRET, "queue", user_id=MEMBER, response_url=slack.response_url("r")
        )
        response = signing.post(running.where, *signed)
        assert (response.status_code, response.text) == (200, "")
        assert slack.wait_for_response("r")
        # And the idle ones are closed by the server once their head is late.
        for sock in flood:
            sock.settimeout(head_s + 15)
            with contextlib.suppress(ConnectionResetError):
                while sock.recv(4096):
                    pass
    finally:
        for sock in flood:
            sock.close()
        running.stop()
