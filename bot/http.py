"""HTTP mode: Slack posts commands, interactions and events to `POST /slack/events`.

Bolt's dispatch returns as soon as a listener has acked (the work after the ack runs on
Bolt's threads), and acking a command, a button or an event is quick, so those are
dispatched right on the event loop: handing each to a thread would cost more than the
ack itself when a burst arrives. A modal submission is acked only after its fields are
checked and the job is queued, so it goes to a worker thread.

A body larger than Slack ever sends is refused (413) before it is read: by its declared
Content-Length, or, when it comes chunked, as soon as it grows past the limit.

The door is checked here, before Bolt parses a byte: a request without Slack's valid
signature is refused (401), and a signed body that is not what Slack sends (not UTF-8,
not a form or a JSON object, a `payload=` that is not a JSON object) is refused (400), each
with a short plain-text reason, so no stranger's junk ever reaches a parser that could fail
with a 500.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from slack_bolt import App, BoltRequest
from slack_sdk.signature import SignatureVerifier
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from bot.pacing import AcksFirst

EVENTS_PATH = "/slack/events"
HEALTH_PATH = "/health"
# Slack's payloads are well under this (a full modal's state is a few KiB); anything
# larger is not Slack, and is not read.
MAX_BODY_BYTES = 1024 * 1024  # 1 MiB
# Hears, for each request, its kind (command, interactive, event) and seconds to its ack.
Acked = Callable[[str, float], None]


def http_app(
    bolt: App,
    pacing: AcksFirst | None = None,
    *,
    acked: Acked | None = None,
    more_routes: Sequence[BaseRoute] = (),
    signing_secret: str | None = None,
) -> Starlette:
    """The ASGI app serving Slack's requests and a health check; `pacing` hears of each
    request so the work after acks waits out a burst (bot.pacing); `acked` hears how long
    each took to ack; `more_routes` are served beside them (the service's /metrics).

    `signing_secret`: the app's Slack signing secret, checked at the door; None takes the
    one the Bolt app was built with."""
    # Bolt keeps the secret it was given (SLACK_SIGNING_SECRET when it was given none).
    verifier = SignatureVerifier(signing_secret or bolt._signing_secret)

    async def events(request: Request) -> Response:
        arrived = time.perf_counter()
        if pacing is not None:
            pacing.arrived()
        body = await body_within(request, MAX_BODY_BYTES)
        if body is None:
            return too_large()
        if not signed_by_slack(verifier, body, request):
            return refused(401, "the request does not carry Slack's valid signature")
        bolt_request, problem = slack_request(body, request)
        if bolt_request is None:
            return refused(400, problem)
        if b"view_submission" in body:
            answer = await run_in_threadpool(bolt.dispatch, bolt_request)
        else:
            answer = bolt.dispatch(bolt_request)
        if acked is not None:
            acked(request_kind(body), time.perf_counter() - arrived)
        return Response(
            content=answer.body,
            status_code=answer.status,
            headers=answer.first_headers_without_set_cookie(),
        )

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route(EVENTS_PATH, events, methods=["POST"]),
            Route(HEALTH_PATH, health, methods=["GET"]),
            *more_routes,
        ]
    )


def request_kind(body: bytes) -> str:
    """What Slack sent, by the shape of its body: a slash command and an interaction come
    form-encoded (`command=…`, `payload=…`), an event as JSON."""
    if body.startswith(b"{"):
        return "event"
    if body.startswith(b"payload=") or b"&payload=" in body:
        return "interactive"
    return "command"


async def body_within(request: Request, limit: int) -> bytes | None:
    """The request's body, or None as soon as it is known to exceed `limit` bytes: from
    its Content-Length before a byte is read, else while it streams in."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


def signed_by_slack(verifier: SignatureVerifier, body: bytes, request: Request) -> bool:
    """Whether the body carries Slack's signature, made within the last five minutes."""
    timestamp = request.headers.get("x-slack-request-timestamp")
    signature = request.headers.get("x-slack-signature")
    try:
        return verifier.is_valid(body, timestamp, signature)
    except (ValueError, TypeError):  # a timestamp that is no number, a signature not ASCII
        return False


def slack_request(body: bytes, request: Request) -> tuple[BoltRequest | None, str]:
    """The body as Bolt's request, parsed as Bolt parses it; or None and what is wrong with it.

    Only a body that parses to a JSON object (an event, or an interaction's `payload`) or
    a form (a command) goes on: Bolt would fail on anything else with a 500."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None, "the body is not UTF-8 text"
    try:
        bolt_request = BoltRequest(
            body=text,
            query=str(request.url.query),
            headers={key: [value] for key, value in request.headers.items()},
        )
    except (ValueError, RecursionError):
        return None, "the body is neither a form nor JSON as Slack sends them"
    except Exception:  # parsed, but fields of shapes Slack never sends (a list, a number…)
        return None, "the body (or its payload) is not shaped as Slack sends it"
    if not isinstance(bolt_request.body, dict):
        return None, "the body (or its payload) is not a JSON object"
    return bolt_request, ""


def refused(status: int, reason: str) -> Response:
    """A short plain-text refusal; Slack shows it nowhere, a person testing the URL reads it."""
    return Response(f"{reason}\n", status_code=status, media_type="text/plain")


def too_large() -> Response:
    """413, closing the connection: the rest of the body is never read, so it cannot be reused."""
    return Response("request too large", status_code=413, headers={"Connection": "close"})
