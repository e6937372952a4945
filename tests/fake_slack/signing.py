"""Requests exactly as Slack sends them to an app over HTTP, signed with a signing secret.

Each ``*_payload`` / ``*_fields`` function builds the dict Slack delivers (the same dict a
Socket Mode envelope carries); the function without the suffix wraps it into the body and
headers of a signed HTTP request, returning ``(body, headers)``. Pass a wrong secret, an old
``timestamp`` or strip the signature with :func:`without_signature` to forge a request.
Slack signs ``v0:<timestamp>:<body>`` with HMAC-SHA256 and sends ``X-Slack-Signature:
v0=<hex>`` and ``X-Slack-Request-Timestamp``.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

import httpx

from fake_slack import (
    APP_ID,
    BOT_ID,
    BOT_USER_ID,
    CHANNEL_ID,
    CHANNEL_NAME,
    TEAM_DOMAIN,
    TEAM_ID,
    USER_ID,
    USER_NAME,
    VERIFICATION_TOKEN,
)

FORM = "application/x-www-form-urlencoded"
JSON = "application/json"
USER_AGENT = "Slackbot 1.0 (+https://api.slack.com/robots)"
# Where respond() goes when a test does not care: a loopback port nothing listens on, so a
# stray respond() fails at once instead of reaching out. Pass fake.response_url(name) to
# capture what the app says.
UNSET_RESPONSE_URL = "http://127.0.0.1:9/response_url/unset"
DEFAULT_MESSAGE_TS = "1700000000.000100"

_counter = itertools.count(1)


def _next() -> int:
    return next(_counter)


def new_trigger_id() -> str:
    """A fresh trigger id shaped like Slack's (``<digits>.<digits>.<hex>``)."""
    n = _next()
    return f"{1_300_000_000 + n}.{700_000_000 + n}.{hashlib.sha1(str(n).encode()).hexdigest()[:32]}"


def new_event_id() -> str:
    """A fresh Events API event id (``Ev`` + 9 characters)."""
    return f"Ev0PAIKA{_next():04d}"


# -- signing -------------------------------------------------------------------------------


def signature(secret: str, body: str, timestamp: int | str) -> str:
    """The ``X-Slack-Signature`` value Slack would send for this body and timestamp."""
    base = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def sign(
    secret: str, body: str, *, content_type: str = FORM, timestamp: int | None = None
) -> dict[str, str]:
    """Headers Slack sends with ``body``: content type, timestamp and signature.

    ``timestamp`` defaults to now; pass ``int(time.time()) - 600`` to forge a stale request.
    """
    ts = int(time.time()) if timestamp is None else timestamp
    return {
        "Content-Type": content_type,
        "User-Agent": USER_AGENT,
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": signature(secret, body, ts),
    }


def without_signature(headers: Mapping[str, str]) -> dict[str, str]:
    """The same headers with the signature removed (a forged or misrouted request)."""
    return {k: v for k, v in headers.items() if k.lower() != "x-slack-signature"}


def _user(user_id: str, user_name: str) -> dict[str, Any]:
    return {"id": user_id, "username": user_name, "name": user_name, "team_id": TEAM_ID}


def _team() -> dict[str, Any]:
    return {"id": TEAM_ID, "domain": TEAM_DOMAIN}


def _interactive(
    secret: str, payload: Mapping[str, Any], timestamp: int | None
) -> tuple[str, dict[str, str]]:
    body = urlencode({"payload": json.dumps(payload, separators=(",", ":"))})
    return body, sign(secret, body, timestamp=timestamp)


# -- slash commands ------------------------------------------------------------------------


def slash_command_fields(
    text: str,
    *,
    user_id: str = USER_ID,
    user_name: str = USER_NAME,
    command: str = "/gpu",
    response_url: str = UNSET_RESPONSE_URL,
    trigger_id: str | None = None,
    team_id: str = TEAM_ID,
    channel_id: str = CHANNEL_ID,
    channel_name: str = CHANNEL_NAME,
) -> dict[str, str]:
    """The form fields of a slash command, in Slack's order (also a Socket Mode payload)."""
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": team_id,
        "team_domain": TEAM_DOMAIN,
        "channel_id": channel_id,
        "channel_name": channel_name,
        "user_id": user_id,
        "user_name": user_name,
        "command": command,
        "text": text,
        "api_app_id": APP_ID,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id or new_trigger_id(),
    }


def slash_command(
    secret: str,
    text: str,
    user_id: str = USER_ID,
    command: str = "/gpu",
    response_url: str = UNSET_RESPONSE_URL,
    trigger_id: str | None = None,
    team_id: str = TEAM_ID,
    channel_id: str = CHANNEL_ID,
    timestamp: int | None = None,
    *,
    user_name: str = USER_NAME,
    channel_name: str = CHANNEL_NAME,
) -> tuple[str, dict[str, str]]:
    """A signed, form-encoded slash command as Slack POSTs it to the app."""
    fields = slash_command_fields(
        text,
        user_id=user_id,
        user_name=user_name,
        command=command,
        response_url=response_url,
        trigger_id=trigger_id,
        team_id=team_id,
        channel_id=channel_id,
        channel_name=channel_name,
    )
    body = urlencode(fields)
    return body, sign(secret, body, timestamp=timestamp)


# -- block actions -------------------------------------------------------------------------


def block_action_payload(
    user_id: str,
    action_id: str,
    value: str | None,
    *,
    block_id: str = "actions",
    message: Mapping[str, Any] | None = None,
    channel_id: str = CHANNEL_ID,
    response_url: str = UNSET_RESPONSE_URL,
    container: Mapping[str, Any] | None = None,
    view: Mapping[str, Any] | None = None,
    action_type: str = "button",
    action: Mapping[str, Any] | None = None,
    user_name: str = USER_NAME,
    trigger_id: str | None = None,
) -> dict[str, Any]:
    """The ``block_actions`` payload Slack sends when someone clicks an element.

    A click in a message (the default) carries ``channel``, ``message`` and ``response_url``;
    pass ``view`` for a click inside a modal or the Home tab instead. ``action`` is merged
    into the action object, e.g. ``{"selected_option": {...}}`` for a static select.
    """
    action_ts = f"{int(time.time())}.{_next():06d}"
    act: dict[str, Any] = {
        "type": action_type,
        "action_id": action_id,
        "block_id": block_id,
        "action_ts": action_ts,
    }
    if action_type == "button":
        act["text"] = {"type": "plain_text", "text": action_id, "emoji": True}
    if value is not None:
        act["value"] = value
    act.update(action or {})
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": _user(user_id, user_name),
        "api_app_id": APP_ID,
        "token": VERIFICATION_TOKEN,
        "trigger_id": trigger_id or new_trigger_id(),
        "team": _team(),
        "enterprise": None,
        "is_enterprise_install": False,
        "state": {"values": {}},
        "actions": [act],
    }
    if view is not None:
        payload["container"] = dict(
            container or {"type": "view", "view_id": view.get("id", "V0PAIKA0001")}
        )
        payload["view"] = dict(view)
        return payload
    msg: dict[str, Any] = dict(
        message
        or {
            "type": "message",
            "subtype": "bot_message",
            "text": "",
            "ts": DEFAULT_MESSAGE_TS,
            "bot_id": BOT_ID,
            "user": BOT_USER_ID,
            "blocks": [],
        }
    )
    msg_ts = str(msg.get("ts", DEFAULT_MESSAGE_TS))
    payload["container"] = dict(
        container
        or {
            "type": "message",
            "message_ts": msg_ts,
            "channel_id": channel_id,
            "is_ephemeral": False,
        }
    )
    payload["channel"] = {"id": channel_id, "name": CHANNEL_NAME}
    payload["message"] = msg
    payload["response_url"] = response_url
    return payload


def block_action(
    secret: str,
    user_id: str,
    action_id: str,
    value: str | None,
    block_id: str = "actions",
    message: Mapping[str, Any] | None = None,
    channel_id: str = CHANNEL_ID,
    response_url: str = UNSET_RESPONSE_URL,
    container: Mapping[str, Any] | None = None,
    *,
    view: Mapping[str, Any] | None = None,
    action_type: str = "button",
    action: Mapping[str, Any] | None = None,
    trigger_id: str | None = None,
    timestamp: int | None = None,
) -> tuple[str, dict[str, str]]:
    """A signed ``block_actions`` request: form body ``payload=<json>``."""
    payload = block_action_payload(
        user_id,
        action_id,
        value,
        block_id=block_id,
        message=message,
        channel_id=channel_id,
        response_url=response_url,
        container=container,
        view=view,
        action_type=action_type,
        action=action,
        trigger_id=trigger_id,
    )
    return _interactive(secret, payload, timestamp)


# -- view submissions ----------------------------------------------------------------------


def text_input(value: str | None) -> dict[str, Any]:
    """The state of a ``plain_text_input`` (``None`` when left empty)."""
    return {"type": "plain_text_input", "value": value}


def number_input(value: str | None) -> dict[str, Any]:
    """The state of a ``number_input``; Slack sends the number as a string."""
    return {"type": "number_input", "value": value}


def _option(value: str, text: str | None) -> dict[str, Any]:
    return {"text": {"type": "plain_text", "text": text or value, "emoji": True}, "value": value}


def static_select(value: str | None, text: str | None = None) -> dict[str, Any]:
    """The state of a ``static_select`` (``selected_option`` is ``None`` when unset)."""
    return {
        "type": "static_select",
        "selected_option": None if value is None else _option(value, text),
    }


def radio_buttons(value: str | None, text: str | None = None) -> dict[str, Any]:
    """The state of a ``radio_buttons`` group."""
    return {
        "type": "radio_buttons",
        "selected_option": None if value is None else _option(value, text),
    }


def checkboxes(values: Sequence[str]) -> dict[str, Any]:
    """The state of a ``checkboxes`` group: every ticked option."""
    return {"type": "checkboxes", "selected_options": [_option(v, None) for v in values]}


def users_select(user_id: str | None) -> dict[str, Any]:
    """The state of a ``users_select``."""
    return {"type": "users_select", "selected_user": user_id}


def datepicker(date: str | None) -> dict[str, Any]:
    """The state of a ``datepicker`` (``YYYY-MM-DD``)."""
    return {"type": "datepicker", "selected_date": date}


def state(values: Mapping[str, Mapping[str, str | Mapping[str, Any] | None]]) -> dict[str, Any]:
    """``view.state.values`` from ``{block_id: {action_id: element_state}}``.

    A plain string (or ``None``) stands for a ``plain_text_input``; a dict is taken as the
    raw element state (see :func:`static_select`, :func:`checkboxes` and friends).
    """
    out: dict[str, Any] = {}
    for block_id, actions in values.items():
        out[block_id] = {
            action_id: (text_input(v) if v is None or isinstance(v, str) else dict(v))
            for action_id, v in actions.items()
        }
    return out


def view_submission_payload(
    user_id: str,
    callback_id: str,
    state_values: Mapping[str, Mapping[str, str | Mapping[str, Any] | None]],
    private_metadata: str = "",
    view_id: str = "V0PAIKA0001",
    *,
    blocks: Sequence[Mapping[str, Any]] = (),
    title: str = "paika",
    submit: str = "Submit",
    user_name: str = USER_NAME,
    trigger_id: str | None = None,
) -> dict[str, Any]:
    """The ``view_submission`` payload Slack sends when a modal is submitted."""
    return {
        "type": "view_submission",
        "team": _team(),
        "user": _user(user_id, user_name),
        "api_app_id": APP_ID,
        "token": VERIFICATION_TOKEN,
        "trigger_id": trigger_id or new_trigger_id(),
        "view": {
            "id": view_id,
            "team_id": TEAM_ID,
            "type": "modal",
            "blocks": [dict(b) for b in blocks],
            "private_metadata": private_metadata,
            "callback_id": callback_id,
            "state": {"values": state(state_values)},
            "hash": f"{int(time.time())}.{_next():08d}",
            "title": {"type": "plain_text", "text": title, "emoji": True},
            "clear_on_close": False,
            "notify_on_close": False,
            "close": {"type": "plain_text", "text": "Cancel", "emoji": True},
            "submit": {"type": "plain_text", "text": submit, "emoji": True},
            "previous_view_id": None,
            "root_view_id": view_id,
            "app_id": APP_ID,
            "external_id": "",
            "app_installed_team_id": TEAM_ID,
            "bot_id": BOT_ID,
        },
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }


def view_submission(
    secret: str,
    user_id: str,
    callback_id: str,
    state_values: Mapping[str, Mapping[str, str | Mapping[str, Any] | None]],
    private_metadata: str = "",
    view_id: str = "V0PAIKA0001",
    *,
    blocks: Sequence[Mapping[str, Any]] = (),
    timestamp: int | None = None,
) -> tuple[str, dict[str, str]]:
    """A signed ``view_submission`` request: form body ``payload=<json>``."""
    payload = view_submission_payload(
        user_id, callback_id, state_values, private_metadata, view_id, blocks=blocks
    )
    return _interactive(secret, payload, timestamp)


# -- Events API ----------------------------------------------------------------------------


def event_envelope(
    event: Mapping[str, Any], *, event_id: str | None = None, event_time: int | None = None
) -> dict[str, Any]:
    """The ``event_callback`` envelope around one event (also a Socket Mode payload)."""
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": TEAM_ID,
        "context_team_id": TEAM_ID,
        "context_enterprise_id": None,
        "api_app_id": APP_ID,
        "event": dict(event),
        "type": "event_callback",
        "event_id": event_id or new_event_id(),
        "event_time": int(time.time()) if event_time is None else event_time,
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": TEAM_ID,
                "user_id": BOT_USER_ID,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": f"4-paika-{_next()}",
    }


def event_callback(
    secret: str,
    event: Mapping[str, Any],
    event_id: str | None = None,
    retry_num: int | None = None,
    retry_reason: str | None = None,
    *,
    timestamp: int | None = None,
) -> tuple[str, dict[str, str]]:
    """A signed Events API request (JSON body); a redelivery carries the retry headers."""
    body = json.dumps(event_envelope(event, event_id=event_id))
    headers = sign(secret, body, content_type=JSON, timestamp=timestamp)
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
        headers["X-Slack-Retry-Reason"] = retry_reason or "http_timeout"
    return body, headers


def url_verification(
    secret: str, challenge: str = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
) -> tuple[str, dict[str, str]]:
    """The signed handshake Slack sends when the Events request URL is saved."""
    body = json.dumps(
        {"token": VERIFICATION_TOKEN, "challenge": challenge, "type": "url_verification"}
    )
    return body, sign(secret, body, content_type=JSON)


# -- sending -------------------------------------------------------------------------------


def post(url: str, body: str, headers: Mapping[str, str], timeout: float = 10.0) -> httpx.Response:
    """Send a built request over real HTTP, as Slack would, and return the response.

    Proxy variables are ignored: the app under test listens on loopback.
    """
    with httpx.Client(trust_env=False, timeout=timeout) as client:
        return client.post(url, content=body.encode(), headers=dict(headers))
