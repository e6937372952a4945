"""A replayed Slack request does nothing: each signed request is taken on once, by any instance.

Slack signs every HTTP request (X-Slack-Signature covers the timestamp and the body) and
accepts no timestamp older than 5 minutes, so within that window a captured request could be
sent again as it is. The SHA-256 of its signature is recorded (storage.queries.requests);
a request seen before is acknowledged like any other and does nothing.

Where the check runs matters for the acks. A database write before every ack would hold up
the acks of a burst, one after the other, on the event loop (bench/slack_ack.py), and for
work that follows an empty ack Slack gets the same answer either way. So the middleware
only notes the request, and that work checks as it starts, off the ack path (`once`). A
view submission acts before it acks, so it is checked in the middleware (HTTP mode runs it
on a worker thread already). Socket Mode has no signatures: its envelopes are checked by
bot.runtime.OncePerEnvelope.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slack_bolt import BoltContext, BoltRequest, BoltResponse, Respond

from bot.failures import reported
from bot.services import BotServices

# Where the middleware leaves the request's signature for the work that follows its ack.
REQUEST_KEY = "paika_request_signature"
# Request kinds whose listener acts before acknowledging: checked before they run.
ACTS_BEFORE_ACK = frozenset({"view_submission"})

Work = Callable[[dict[str, Any], Respond], None]


def note_requests(services: BotServices) -> Callable[..., Any]:
    """The app's middleware (after Bolt's signature check): notes each signed request, and
    answers a replayed view submission at once."""

    def middleware(
        request: BoltRequest,
        body: dict[str, Any],
        context: BoltContext,
        next: Callable[[], BoltResponse],
    ) -> BoltResponse | None:
        signature = (request.headers.get("x-slack-signature") or [""])[0]
        if not signature:
            return next()  # Socket Mode
        if body.get("type") in ACTS_BEFORE_ACK:
            if not services.first_sighting(signature):
                return BoltResponse(status=200, body="")
        else:
            context[REQUEST_KEY] = signature
        return next()

    return middleware


def first_time(services: BotServices, context: BoltContext) -> bool:
    """Whether the request behind this work is seen for the first time (True if unsigned)."""
    signature = context.get(REQUEST_KEY)
    return not isinstance(signature, str) or services.first_sighting(signature)


def once(services: BotServices, work: Work) -> Callable[..., None]:
    """`work` as a lazy listener that does nothing for a replayed request."""

    def lazy(body: dict[str, Any], respond: Respond, context: BoltContext) -> None:
        with reported(services, body, respond):  # the check itself may fail (the database)
            if first_time(services, context):
                work(body, respond)

    lazy.__name__ = lazy.__qualname__ = work.__name__  # Bolt tells lazy listeners by name
    return lazy
