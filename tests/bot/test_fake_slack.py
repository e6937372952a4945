"""Tests of the offline Slack kit itself (tests/fake_slack), so the bot's tests can trust it.

Each check is one Slack would make: a kit that let through what Slack refuses, or refused
what Slack takes, would make the bot's tests lie.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
from fake_slack import (
    APP_ID,
    APP_TOKEN,
    BOT_TOKEN,
    BOT_USER_ID,
    CHANNEL_ID,
    SIGNING_SECRET,
    TEAM_ID,
    USER_ID,
    signing,
)
from fake_slack.slack_server import RESPONSE_URLS, FakeSlack, validate_blocks, validate_view
from fake_slack.socket_mode import SocketModeServer
from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.builtin import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.webhook import WebhookClient


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """slack_sdk sends even loopback traffic through a proxy named in the environment."""
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    yield from FakeSlack.serve(socket_mode=True)


@pytest.fixture
def client(fake: FakeSlack) -> WebClient:
    return WebClient(base_url=fake.api_url, token=BOT_TOKEN)


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def modal(
    title: str = "Submit a job", blocks: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": "submit",
        "title": {"type": "plain_text", "text": title},
        "submit": {"type": "plain_text", "text": "Submit"},
        "blocks": blocks or [section("hello")],
    }


# -- the Web API ---------------------------------------------------------------------------


def test_a_valid_message_is_answered_like_slack_and_recorded(
    fake: FakeSlack, client: WebClient
) -> None:
    first = client.chat_postMessage(
        channel=CHANNEL_ID, text="queued", blocks=[section("*bert-ft*")]
    )
    second = client.chat_postMessage(channel=CHANNEL_ID, text="again")

    assert first["ok"] and first["channel"] == CHANNEL_ID
    assert first["ts"] == "1700000000.000100"
    assert float(second["ts"]) > float(first["ts"])
    assert first["message"]["blocks"] == [section("*bert-ft*")]
    call = fake.last("chat.postMessage")
    assert call.args["text"] == "again" and call.ok
    assert fake.calls("chat.postMessage")[0].args["blocks"] == [section("*bert-ft*")]
    assert fake.calls("chat.postMessage")[0].headers["authorization"] == f"Bearer {BOT_TOKEN}"
    assert [m["text"] for m in fake.messages(CHANNEL_ID)] == ["queued", "again"]
    assert fake.invalid == []


def test_51_blocks_are_refused_and_recorded_as_invalid(fake: FakeSlack, client: WebClient) -> None:
    client.chat_postMessage(channel=CHANNEL_ID, text="fifty", blocks=[section("x")] * 50)
    with pytest.raises(SlackApiError) as err:
        client.chat_postMessage(channel=CHANNEL_ID, text="too many", blocks=[section("x")] * 51)

    assert err.value.response["error"] == "invalid_blocks"
    assert [(i.method, i.error) for i in fake.invalid] == [("chat.postMessage", "invalid_blocks")]
    assert "51" in fake.invalid[0].detail[0]
    with pytest.raises(AssertionError, match="invalid_blocks"):
        fake.assert_nothing_invalid()


@pytest.mark.parametrize(
    ("blocks", "fragment"),
    [
        ([section("x" * 3001)], "3000"),
        ([{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}], "150"),
        (
            [
                {
                    "type": "actions",
                    "elements": [
                        {
                            "type": "button",
                            "action_id": f"b{i}",
                            "text": {"type": "plain_text", "text": "ok"},
                        }
                        for i in range(26)
                    ],
                }
            ],
            "25",
        ),
        ([{"type": "no_such_block"}], "unknown block type"),
        ([{**section("a"), "block_id": "same"}, {**section("b"), "block_id": "same"}], "duplicate"),
        ([section("")], "more than 0 characters"),
        ("not a list", "array"),
    ],
)
def test_block_kit_limits_slack_enforces(blocks: Any, fragment: str) -> None:
    problems = validate_blocks(blocks)
    assert problems and fragment in " ".join(problems)


def test_limits_just_inside_pass() -> None:
    header = {"type": "header", "text": {"type": "plain_text", "text": "h" * 150}}
    assert validate_blocks([section("x" * 3000), header] + [section("y")] * 48) == []
    assert validate_view(modal(title="t" * 24, blocks=[section("z")] * 100)) == []


def test_views_are_validated(fake: FakeSlack, client: WebClient) -> None:
    opened = client.views_open(trigger_id="1.2.abc", view=modal())
    view_id = opened["view"]["id"]
    assert opened["view"]["callback_id"] == "submit" and view_id.startswith("V")
    client.views_update(view_id=view_id, view=modal(title="Updated"))
    assert fake.views()[view_id]["title"]["text"] == "Updated"

    with pytest.raises(SlackApiError) as err:
        client.views_open(trigger_id="1.2.abc", view=modal(title="t" * 25))
    assert err.value.response["error"] == "invalid_blocks"
    with pytest.raises(SlackApiError) as err:
        client.views_open(trigger_id="1.2.abc", view=modal(blocks=[section("v")] * 101))
    assert err.value.response["error"] == "invalid_blocks"
    with pytest.raises(SlackApiError) as err:
        client.views_publish(user_id=USER_ID, view=modal())  # a modal is not a Home tab
    assert err.value.response["error"] == "invalid_blocks"
    assert len(fake.invalid) == 3

    home = client.views_publish(user_id=USER_ID, view={"type": "home", "blocks": [section("h")]})
    assert home["view"]["type"] == "home"


def test_message_without_text_or_blocks_is_no_text(fake: FakeSlack, client: WebClient) -> None:
    with pytest.raises(SlackApiError) as err:  # api_call: chat_postMessage would warn first
        client.api_call("chat.postMessage", json={"channel": CHANNEL_ID, "text": ""})
    assert err.value.response["error"] == "no_text"
    assert fake.invalid[0].error == "no_text"


def test_rate_limit_then_success_with_the_sdk_retry_handler(fake: FakeSlack) -> None:
    client = WebClient(
        base_url=fake.api_url,
        token=BOT_TOKEN,
        retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=1)],
    )
    fake.rate_limit_next("chat.postMessage", retry_after=0)

    assert client.chat_postMessage(channel=CHANNEL_ID, text="after a wait")["ok"]
    attempts = fake.calls("chat.postMessage")
    assert [c.status for c in attempts] == [429, 200]
    assert attempts[0].response == {"ok": False, "error": "ratelimited"}


def test_rate_limit_without_a_retry_handler_raises_with_retry_after(
    fake: FakeSlack, client: WebClient
) -> None:
    fake.rate_limit_next("chat.postMessage", retry_after=7)
    with pytest.raises(SlackApiError) as err:
        client.chat_postMessage(channel=CHANNEL_ID, text="x")
    assert err.value.response.status_code == 429
    assert err.value.response["error"] == "ratelimited"
    assert err.value.response.headers["Retry-After"] == "7"


def test_fail_next_fails_exactly_that_many_calls(fake: FakeSlack, client: WebClient) -> None:
    fake.fail_next("chat.postMessage", times=2)
    fake.fail_next("chat.update", error="message_not_found")
    for _ in range(2):
        with pytest.raises(SlackApiError) as err:
            client.chat_postMessage(channel=CHANNEL_ID, text="x")
        assert err.value.response["error"] == "channel_not_found"
    assert client.chat_postMessage(channel=CHANNEL_ID, text="x")["ok"]
    with pytest.raises(SlackApiError, match="message_not_found"):
        client.chat_update(channel=CHANNEL_ID, ts="1.2", text="y")


def test_tokens_are_checked(fake: FakeSlack) -> None:
    wrong = WebClient(base_url=fake.api_url, token="xoxb-not-the-bot")
    with pytest.raises(SlackApiError) as err:
        wrong.chat_postMessage(channel=CHANNEL_ID, text="x")
    assert err.value.response["error"] == "invalid_auth"
    app_token = WebClient(base_url=fake.api_url, token=APP_TOKEN)
    with pytest.raises(SlackApiError) as err:
        app_token.chat_postMessage(channel=CHANNEL_ID, text="x")
    assert err.value.response["error"] == "not_allowed_token_type"
    with pytest.raises(SlackApiError) as err:
        WebClient(base_url=fake.api_url).auth_test()
    assert err.value.response["error"] == "not_authed"
    with pytest.raises(SlackApiError) as err:
        WebClient(base_url=fake.api_url, token=BOT_TOKEN).apps_connections_open(app_token=BOT_TOKEN)
    assert err.value.response["error"] == "not_allowed_token_type"


def test_the_other_methods_the_bot_uses(fake: FakeSlack, client: WebClient) -> None:
    auth = client.auth_test()
    assert (auth["user_id"], auth["team_id"]) == (BOT_USER_ID, TEAM_ID)

    dm = client.conversations_open(users=USER_ID)["channel"]["id"]
    assert dm == "D" + USER_ID
    posted = client.chat_postMessage(channel=USER_ID, text="your quota expires")
    assert posted["channel"] == dm  # posting to a user id lands in the DM, as in Slack
    updated = client.chat_update(channel=dm, ts=posted["ts"], text="renewed")
    assert updated["ok"] and fake.messages(dm)[0]["text"] == "renewed"
    assert client.chat_postEphemeral(channel=CHANNEL_ID, user=USER_ID, text="only you")["ok"]

    fake.set_user(USER_ID, tz="Europe/Berlin", profile={"display_name": "alice"})
    user = client.users_info(user=USER_ID)["user"]
    assert user["tz"] == "Europe/Berlin" and user["profile"]["display_name"] == "alice"
    assert client.users_info(user="U0OTHER")["user"]["tz"] == "Asia/Shanghai"
    with pytest.raises(SlackApiError, match="user_not_found"):
        client.users_info(user="nobody")

    with pytest.raises(SlackApiError, match="unknown_method"):
        client.api_call("no.such.method")


def test_files_upload_v2_goes_through_the_three_steps(fake: FakeSlack, client: WebClient) -> None:
    done = client.files_upload_v2(
        channel=CHANNEL_ID, filename="board.png", content=b"\x89PNG-bytes", title="Board"
    )
    assert done["file"]["title"] == "Board"
    (upload,) = fake.uploads()
    assert upload.content == b"\x89PNG-bytes" and upload.completed
    assert [c.method for c in fake.calls()] == [
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
    ]


def test_response_urls_take_what_respond_sends(fake: FakeSlack) -> None:
    hook = WebhookClient(fake.response_url("cmd-1"))
    assert hook.send(text="queued", response_type="ephemeral").status_code == 200
    assert hook.send(text="", blocks=[section("")]).status_code == 400

    assert fake.responses("cmd-1") == [{"text": "queued", "response_type": "ephemeral"}]
    assert fake.responses("other") == []
    assert fake.invalid[0].method == "response_url/cmd-1"


def test_wait_for_sees_calls_from_other_threads_and_times_out_clearly(
    fake: FakeSlack, client: WebClient
) -> None:
    threading.Timer(0.1, lambda: client.chat_postMessage(channel=CHANNEL_ID, text="x")).start()
    assert len(fake.wait_for("chat.postMessage", timeout=5)) == 1
    with pytest.raises(AssertionError, match=r"expected 1 views.open"):
        fake.wait_for("views.open", timeout=0.1)
    fake.clear()
    assert fake.calls() == []


def test_a_hold_keeps_calls_waiting_until_released_and_records_when_they_came(
    fake: FakeSlack, client: WebClient
) -> None:
    answered: list[bool] = []
    with fake.hold("users.info") as held, fake.hold(RESPONSE_URLS) as responses:
        asking = threading.Thread(
            target=lambda: answered.append(client.users_info(user=USER_ID)["ok"])
        )
        hook = WebhookClient(fake.response_url("held"))
        posting = threading.Thread(target=lambda: hook.send(text="later"))
        asking.start()
        posting.start()
        held.wait_arrived()
        responses.wait_arrived()
        # Other methods go on while those wait.
        assert client.chat_postMessage(channel=CHANNEL_ID, text="x")["ok"]
        assert answered == [] and fake.calls("users.info") == [] and fake.responses() == []
    asking.join(timeout=10)
    posting.join(timeout=10)
    assert answered == [True] and fake.responses("held") == [{"text": "later"}]
    posted, asked = fake.last("chat.postMessage"), fake.last("users.info")
    assert asked.received < posted.received  # arrival times, not answer times
    with pytest.raises(AssertionError, match=r"expected 2 users.info request"):
        held.wait_arrived(2, timeout=0.1)


# -- signed requests -----------------------------------------------------------------------


def _all_builders(secret: str, **kw: Any) -> list[tuple[str, dict[str, str]]]:
    return [
        signing.slash_command(secret, "queue", **kw),
        signing.block_action(secret, USER_ID, "approve_bump", "job-7", **kw),
        signing.view_submission(secret, USER_ID, "submit", {"name": {"value": "bert"}}, **kw),
        signing.event_callback(secret, {"type": "app_home_opened", "user": USER_ID}, **kw),
    ]


def test_signed_requests_verify_and_forged_ones_do_not() -> None:
    verifier = SignatureVerifier(SIGNING_SECRET)
    for body, headers in _all_builders(SIGNING_SECRET):
        assert verifier.is_valid_request(body, headers)
        assert not verifier.is_valid_request(body + "&x=1", headers)  # tampered body
        assert not verifier.is_valid_request(body, signing.without_signature(headers))
    for body, headers in _all_builders("not-the-secret"):
        assert not verifier.is_valid_request(body, headers)
    for body, headers in _all_builders(SIGNING_SECRET, timestamp=int(time.time()) - 600):
        assert not verifier.is_valid_request(body, headers)


def test_payloads_are_shaped_like_slacks() -> None:
    body, headers = signing.slash_command(
        SIGNING_SECRET, "submit name=a gpus=2", response_url="http://r", trigger_id="1.2.t"
    )
    form = {k: v[0] for k, v in parse_qs(body).items()}
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert form["command"] == "/gpu" and form["text"] == "submit name=a gpus=2"
    assert {"token", "team_id", "team_domain", "channel_id", "channel_name", "user_id"} <= set(form)
    assert (form["api_app_id"], form["response_url"], form["trigger_id"]) == (
        APP_ID,
        "http://r",
        "1.2.t",
    )

    body, _ = signing.block_action(SIGNING_SECRET, USER_ID, "approve_bump", "job-7")
    action = json.loads(parse_qs(body)["payload"][0])
    assert action["type"] == "block_actions" and action["user"]["id"] == USER_ID
    assert action["actions"][0]["value"] == "job-7"
    assert action["container"]["message_ts"] == action["message"]["ts"]
    assert {"team", "api_app_id", "trigger_id", "channel", "response_url"} <= set(action)

    values: dict[str, dict[str, Any]] = {
        "name": {"value": "bert"},
        "prio": {"value": signing.static_select("core")},
        "data": {"value": signing.radio_buttons("ready")},
    }
    body, _ = signing.view_submission(SIGNING_SECRET, USER_ID, "submit", values, "meta")
    view = json.loads(parse_qs(body)["payload"][0])["view"]
    assert view["callback_id"] == "submit" and view["private_metadata"] == "meta"
    state = view["state"]["values"]
    assert state["name"]["value"] == {"type": "plain_text_input", "value": "bert"}
    assert state["prio"]["value"]["selected_option"]["value"] == "core"

    body, headers = signing.event_callback(
        SIGNING_SECRET, {"type": "app_mention"}, event_id="Ev1", retry_num=1
    )
    envelope = json.loads(body)
    assert (envelope["type"], envelope["event_id"], envelope["team_id"]) == (
        "event_callback",
        "Ev1",
        TEAM_ID,
    )
    assert envelope["authorizations"][0]["user_id"] == BOT_USER_ID
    assert headers["X-Slack-Retry-Num"] == "1" and headers["X-Slack-Retry-Reason"]


def _bolt_app(fake: FakeSlack) -> App:
    app = App(
        token=BOT_TOKEN,
        signing_secret=SIGNING_SECRET,
        client=WebClient(base_url=fake.api_url, token=BOT_TOKEN),
    )

    @app.command("/gpu")
    def gpu(ack: Any, command: dict[str, Any], respond: Any) -> None:
        ack(f"got {command['text']}")
        respond(text=f"done: {command['text']}")

    @app.action("approve_bump")
    def approve(ack: Any, body: dict[str, Any], client: WebClient) -> None:
        ack()
        client.chat_postMessage(
            channel=body["channel"]["id"], text=f"approved {body['actions'][0]['value']}"
        )

    @app.view("submit")
    def submitted(ack: Any, view: dict[str, Any]) -> None:
        name = view["state"]["values"]["name"]["value"]["value"]
        ack(response_action="errors", errors={"name": f"{name} is taken"})

    return app


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_signed_requests_into_a_real_bolt_app_over_http(fake: FakeSlack) -> None:
    app = _bolt_app(fake)
    server: WSGIServer = make_server(
        "127.0.0.1", 0, SlackRequestHandler(app), handler_class=_QuietHandler
    )
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/slack/events"
    try:
        body, headers = signing.slash_command(
            SIGNING_SECRET, "queue", response_url=fake.response_url("q")
        )
        reply = signing.post(url, body, headers)
        assert (reply.status_code, reply.text) == (200, "got queue")
        assert fake.wait_for_response("q") == [{"text": "done: queue"}]
        assert signing.post(url, body, signing.without_signature(headers)).status_code == 401
        stale = signing.slash_command(SIGNING_SECRET, "queue", timestamp=int(time.time()) - 600)
        assert signing.post(url, *stale).status_code == 401

        assert (
            signing.post(
                url, *signing.block_action(SIGNING_SECRET, USER_ID, "approve_bump", "job-7")
            ).status_code
            == 200
        )
        assert fake.wait_for("chat.postMessage")[0].args["text"] == "approved job-7"

        sub = signing.view_submission(
            SIGNING_SECRET, USER_ID, "submit", {"name": {"value": "bert"}}
        )
        assert signing.post(url, *sub).json() == {
            "response_action": "errors",
            "errors": {"name": "bert is taken"},
        }
        assert signing.post(url, *signing.url_verification(SIGNING_SECRET, "abc")).json() == {
            "challenge": "abc"
        }
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    fake.assert_nothing_invalid()


# -- Socket Mode ---------------------------------------------------------------------------


def test_socket_mode_client_round_trip(fake: FakeSlack) -> None:
    assert fake.socket_mode is not None
    sm = fake.socket_mode
    seen: list[SocketModeRequest] = []
    raw_messages: list[str] = []

    def on_request(client: Any, req: SocketModeRequest) -> None:
        seen.append(req)
        client.send_socket_mode_response(SocketModeResponse(req.envelope_id, {"text": "ok"}))

    client = SocketModeClient(
        app_token=APP_TOKEN,
        web_client=WebClient(base_url=fake.api_url, token=BOT_TOKEN),
        on_message_listeners=[raw_messages.append],
    )
    client.socket_mode_request_listeners.append(on_request)
    try:
        client.connect()
        conn = sm.wait_connected()
        assert conn.path == "/link/" and conn.query["app_id"] == APP_ID
        assert fake.last("apps.connections.open").headers["authorization"] == f"Bearer {APP_TOKEN}"

        fields = signing.slash_command_fields("queue")
        envelope_id = sm.push_slash_command(fields)
        ack = sm.wait_for_ack(envelope_id)

        assert ack == {"envelope_id": envelope_id, "payload": {"text": "ok"}}
        assert seen[0].type == "slash_commands" and seen[0].payload == fields
        assert json.loads(raw_messages[0])["type"] == "hello"
        # The client pings on connect and marks the connection alive when the pong comes
        # back; the server's own pings are answered too.
        session = client.current_session
        assert session is not None
        deadline = time.monotonic() + 5
        while (session.last_ping_pong_time is None or conn.pongs == 0) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.01)
        assert conn.pings >= 1 and session.last_ping_pong_time is not None and conn.pongs >= 1
    finally:
        client.close()


def test_socket_mode_refuses_a_url_without_a_ticket(fake: FakeSlack) -> None:
    # A raw handshake: slack_sdk's client leaves its socket open after a refused upgrade.
    assert fake.socket_mode is not None
    sm = fake.socket_mode
    request = (
        "GET /link/?app_id=A1 HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", sm.port), timeout=5) as sock:
        sock.sendall(request.encode())
        assert sock.recv(1024).startswith(b"HTTP/1.1 401")
    assert "401" in sm.rejected[0]

    url = sm.issue_url()
    with socket.create_connection(("127.0.0.1", sm.port), timeout=5) as sock:
        sock.sendall(request.replace("/link/?app_id=A1", url[url.index("/link/") :]).encode())
        answer = sock.recv(1024)
    assert answer.startswith(b"HTTP/1.1 101")
    assert b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in answer  # RFC 6455's own example key


def test_bolt_socket_mode_handler_acks_with_the_reply_and_reconnects(fake: FakeSlack) -> None:
    assert fake.socket_mode is not None
    sm = fake.socket_mode
    handler = SocketModeHandler(_bolt_app(fake), APP_TOKEN)
    try:
        handler.connect()  # type: ignore[no-untyped-call]
        sm.wait_connected()
        fields = signing.slash_command_fields("queue", response_url=fake.response_url("sm"))
        ack = sm.wait_for_ack(sm.push_slash_command(fields))
        assert ack["payload"] == {"text": "got queue"}
        assert fake.wait_for_response("sm") == [{"text": "done: queue"}]

        sm.request_reconnect()
        sm.wait_connected(count=2)
        assert len(fake.calls("apps.connections.open")) == 2
        payload = signing.block_action_payload(USER_ID, "approve_bump", "job-9")
        sm.wait_for_ack(sm.push_interactive(payload))
        assert fake.wait_for("chat.postMessage")[0].args["text"] == "approved job-9"
    finally:
        handler.close()  # type: ignore[no-untyped-call]
    fake.assert_nothing_invalid()


def test_socket_mode_server_alone_needs_a_client_to_push() -> None:
    with SocketModeServer() as sm, pytest.raises(AssertionError, match="no Socket Mode client"):
        sm.push({"type": "events_api", "payload": {}})
