"""Odd bodies at Slack's door get a 4xx with a short reason, never a 500 or a traceback."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from conftest import MEMBER, Bot
from fake_slack import SIGNING_SECRET, signing

from bot.blocks import ids


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
