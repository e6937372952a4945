"""Starting the bot beside the scheduler: Socket Mode when SLACK_APP_TOKEN is set, else HTTP mode."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import uvicorn
from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk import WebClient
from slack_sdk.socket_mode.builtin import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from starlette.routing import BaseRoute

from bot.announcer import SlackAnnouncer
from bot.app import build_app
from bot.http import EVENTS_PATH, Acked, http_app
from bot.services import BotServices
from scheduler.app import Paika
from scheduler.serving import bounds_for, serve_in_thread, stop_server

log = logging.getLogger(__name__)
# Socket Mode's envelope types, named as HTTP mode names its requests (bot.http.request_kind).
SOCKET_KINDS = {"slash_commands": "command", "interactive": "interactive", "events_api": "event"}


@dataclass
class SlackBot:
    """A running bot: how it listens, and its announcer for the outbox's notices."""

    mode: str  # "socket" or "http"
    where: str  # where it listens, for the operator
    announcer: SlackAnnouncer  # every notice: job and host events, alerts, the digest
    _socket: SocketModeHandler | None = None
    _server: tuple[uvicorn.Server, threading.Thread] | None = field(default=None)

    def stop(self) -> None:
        """Stop listening, then let the bot's pools finish what they hold and end."""
        if self._socket is not None:
            self._socket.close()  # type: ignore[no-untyped-call]
        if self._server is not None:
            stop_server(*self._server)
        self.announcer.messenger.close()


def start_bot(
    paika: Paika,
    *,
    port: int | None = None,
    acked: Acked | None = None,
    more_routes: Sequence[BaseRoute] = (),
) -> SlackBot:
    """Build the Bolt app and start listening; raises ConfigError on missing Slack settings.

    `acked` hears how long each request took to ack. `more_routes` are served beside
    Slack's in HTTP mode; in Socket Mode there is no server here, so the caller serves them."""
    settings = paika.settings
    services = BotServices(paika)
    app, messenger = build_app(settings, services)
    announcer = SlackAnnouncer(messenger, services)
    # Every channel the policy names, looked up once now: what it resolved to, or why not.
    policy = paika.policy
    named = [policy.slack.channel, policy.slack.approvals_channel]
    named += [team.channel for team in policy.teams.values()]
    messenger.later(messenger.channels.check, [name for name in named if name])
    if settings.slack_app_token is not None:
        # apps.connections.open is called with the app token, on the same API base URL.
        opener = WebClient(base_url=settings.slack_api_url or WebClient.BASE_URL)
        handler = OncePerEnvelope(
            app,
            services,
            settings.slack_app_token.get_secret_value(),
            web_client=opener,
            acked=acked,
        )
        handler.connect()  # type: ignore[no-untyped-call]
        return SlackBot("socket", "Socket Mode", announcer, _socket=handler)
    host = settings.http_host
    server, thread, bound = serve_in_thread(
        http_app(app, messenger.pacing, acked=acked, more_routes=more_routes),
        host,
        settings.http_port if port is None else port,
        bounds=bounds_for(settings),
    )
    return SlackBot(
        "http",
        f"http://{host}:{bound}{EVENTS_PATH}",
        announcer,
        _server=(server, thread),
    )


class OncePerEnvelope(SocketModeHandler):
    """Socket Mode where an envelope delivered again (the same envelope_id, e.g. when its ack
    was lost with a connection) is acknowledged and does nothing, on any paika instance.

    Events that Slack retries come in new envelopes with the same event_id; the app's
    once-per-delivery middleware takes care of those.
    """

    def __init__(
        self,
        app: App,
        services: BotServices,
        app_token: str,
        web_client: WebClient,
        acked: Acked | None = None,
    ) -> None:
        super().__init__(app, app_token, web_client=web_client)
        self.services = services
        self.acked = acked

    def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        arrived = time.perf_counter()
        envelope = req.envelope_id
        if envelope and not self.services.first_sighting(f"envelope:{envelope}"):
            client.send_socket_mode_response(SocketModeResponse(envelope_id=envelope))
            return
        super().handle(client, req)  # returns once the ack is sent
        if self.acked is not None:
            self.acked(SOCKET_KINDS.get(req.type, req.type), time.perf_counter() - arrived)
