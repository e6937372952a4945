"""The Bolt app, built by one factory: settings and services in, listeners registered."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from slack_bolt import App, BoltResponse
from slack_bolt.authorization import AuthorizeResult
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
)

from bot.failures import error_handler
from bot.i18n import t
from bot.listeners import register
from bot.locales import SlackLocales
from bot.messenger import Messenger
from bot.pacing import AcksFirst, PacedExecutor
from bot.replays import note_requests
from bot.services import BotServices
from scheduler.door import Settings
from scheduler.errors import ConfigError

log = logging.getLogger(__name__)

# Threads answering commands after their ack: one, since that work holds the GIL anyway
# and each extra thread would delay acks (measured with bench/slack_ack.py).
WORKERS = 1
# Threads opening modals: a modal's trigger_id expires 3 s after the command or click, so
# opening one never waits behind queued answers, nor for a burst of requests to end.
MODAL_WORKERS = 2


def web_client(settings: Settings) -> WebClient:
    """The Web API client: the bot token, Slack's URL (or PAIKA_SLACK_API_URL), retries on 429."""
    if settings.slack_bot_token is None:
        raise ConfigError(
            "environment", "SLACK_BOT_TOKEN", "set it to the app's bot token (xoxb-…)"
        )
    client = WebClient(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=settings.slack_api_url or WebClient.BASE_URL,
        timeout=10,
    )
    client.retry_handlers.extend(
        [
            RateLimitErrorRetryHandler(max_retry_count=3),
            ConnectionErrorRetryHandler(max_retry_count=2),
        ]
    )
    return client


def build_app(
    settings: Settings, services: BotServices, client: WebClient | None = None
) -> tuple[App, Messenger]:
    """The Bolt app with every listener, and the messenger that posts for it."""
    client = client or web_client(settings)
    socket_mode = settings.slack_app_token is not None
    secret = settings.slack_signing_secret
    if secret is None and not socket_mode:
        raise ConfigError(
            "environment", "SLACK_SIGNING_SECRET", "HTTP mode needs the app's signing secret"
        )
    pacing = AcksFirst()
    answers = PacedExecutor(pacing, WORKERS, "paika-slack")
    identity = BotIdentity(client)
    identity.learn_in_background()
    app = App(
        client=client,
        signing_secret=secret.get_secret_value() if secret else None,
        # One workspace, one bot token: no per-request auth.test that could block an ack
        # while Slack is slow or away (BotIdentity learns who the bot is, once, aside).
        authorize=identity.authorize,
        # Socket Mode traffic is authenticated by the app token; HTTP traffic by signature.
        request_verification_enabled=not socket_mode,
        # Acks are sent from the request's own thread and the work after them runs as lazy
        # listeners, so a burst of slow commands never delays another command's ack.
        process_before_response=True,
        # The work after an ack is mostly Python holding the GIL: more threads would not
        # make it faster, only slow down the acks of the requests arriving meanwhile.
        listener_executor=answers,
        logger=log,
    )
    messenger = Messenger(client, services, pacing)
    services.locales = SlackLocales(client)
    # Bolt runs these after its own, so only requests with a valid signature get here.
    app.middleware(note_requests(services))
    app.middleware(once_per_delivery(services))
    modals = ThreadPoolExecutor(max_workers=MODAL_WORKERS, thread_name_prefix="paika-slack-modal")
    messenger.feeding += [answers, modals]  # shut down with the bot (SlackBot.stop)
    register(app, services, messenger, modals, answers)
    app.error(answered_failures(error_handler(services), services))
    return app, messenger


def answered_failures(
    tell: Callable[..., None], services: BotServices
) -> Callable[..., BoltResponse | None]:
    """`tell` (the log gets the trace, the user plain words), then Slack an answer it expects
    instead of Bolt's 500: a modal keeps open with the failure under its first field, and
    a command, a button or an event is acknowledged (Slack would retry an event, and show
    its own "failed" under a command besides paika's words)."""

    def handler(
        error: Exception,
        body: dict[str, Any],
        response: BoltResponse | None = None,
        respond: Any = None,
    ) -> BoltResponse | None:
        tell(error=error, body=body, respond=respond)
        if response is None:  # already acknowledged: Slack has its answer
            return None
        return failure_answer(body, services)

    return handler


def failure_answer(body: dict[str, Any], services: BotServices) -> BoltResponse:
    """What Slack is told when a listener failed before it acknowledged."""
    if body.get("type") != "view_submission":
        return BoltResponse(status=200, body="")
    values = _dig(body, "view", "state", "values")
    first = next(iter(values), None) if isinstance(values, dict) else None
    if not isinstance(first, str):
        return BoltResponse(status=200, body="")  # nothing to show an error under: it closes
    user = _dig(body, "user", "id")
    try:
        lang = services.language(user, ask_slack=False) if isinstance(user, str) else "en"
    except Exception:  # the database may be what failed
        lang = "en"
    return BoltResponse(
        status=200,
        body=json.dumps({"response_action": "errors", "errors": {first: t(lang, "modal.failed")}}),
        headers={"content-type": "application/json"},
    )


def _dig(node: Any, *keys: str) -> Any:
    """node[k1][k2]…, or None where a level is missing or not a JSON object."""
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


class BotIdentity:
    """Who the bot is in its workspace (auth.test), learned once in the background."""

    def __init__(self, client: WebClient) -> None:
        self.client = client
        self.known: dict[str, Any] = {}

    def learn_in_background(self) -> None:
        threading.Thread(target=self.learn, name="paika-slack-auth", daemon=True).start()

    def learn(self) -> None:
        try:
            self.known = dict(self.client.auth_test().data)  # type: ignore[arg-type]
        except SlackApiError as exc:
            log.error(
                "Slack refused SLACK_BOT_TOKEN (%s): replies and DMs will fail until it is fixed",
                exc.response.get("error"),
            )
        except SlackClientError as exc:
            log.warning("could not reach Slack to check the bot token: %s", exc)

    @property
    def authorize(self) -> Callable[[str | None, str | None], AuthorizeResult]:
        """Bolt's `authorize` (a plain function: Bolt passes arguments by their names)."""

        def authorize(enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
            return AuthorizeResult(
                enterprise_id=enterprise_id,
                team_id=team_id,
                bot_token=self.client.token,
                bot_id=self.known.get("bot_id"),
                bot_user_id=self.known.get("user_id"),
            )

        return authorize


def once_per_delivery(services: BotServices) -> Callable[..., Any]:
    """Events API deliveries are retried by Slack; each event_id is handled once, by one instance."""

    def middleware(body: dict[str, Any], next: Callable[[], BoltResponse]) -> BoltResponse | None:
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if isinstance(event_id, str) and event_id and not services.first_delivery(event_id):
            return BoltResponse(status=200, body="")
        return next()

    return middleware
