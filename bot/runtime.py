"""Starting the bot beside the scheduler: Socket Mode when SLACK_APP_TOKEN is set, else HTTP mode."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import uvicorn
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk import WebClient

from bot.announcer import SlackAnnouncer
from bot.app import build_app
from bot.http import EVENTS_PATH, http_app
from bot.notifier import SlackNotifier
from bot.services import BotServices
from scheduler.app import Paika
from scheduler.serving import serve_in_thread, stop_server

log = logging.getLogger(__name__)


@dataclass
class SlackBot:
    """A running bot: how it listens, and its notifier for the scheduler's events."""

    mode: str  # "socket" or "http"
    where: str  # where it listens, for the operator
    notifier: SlackNotifier
    announcer: SlackAnnouncer  # alerts and the digest, through the outbox
    _socket: SocketModeHandler | None = None
    _server: tuple[uvicorn.Server, threading.Thread] | None = field(default=None)

    def stop(self) -> None:
        if self._socket is not None:
            self._socket.close()  # type: ignore[no-untyped-call]
        if self._server is not None:
            stop_server(*self._server)
        self.notifier.close()


def start_bot(paika: Paika, *, port: int | None = None) -> SlackBot:
    """Build the Bolt app and start listening; raises ConfigError on missing Slack settings."""
    settings = paika.settings
    services = BotServices(paika)
    app, messenger = build_app(settings, services)
    notifier = SlackNotifier(messenger)
    announcer = SlackAnnouncer(messenger, services)
    if settings.slack_app_token is not None:
        # apps.connections.open is called with the app token, on the same API base URL.
        opener = WebClient(base_url=settings.slack_api_url or WebClient.BASE_URL)
        handler = SocketModeHandler(
            app, settings.slack_app_token.get_secret_value(), web_client=opener
        )
        handler.connect()  # type: ignore[no-untyped-call]
        return SlackBot("socket", "Socket Mode", notifier, announcer, _socket=handler)
    host = settings.http_host
    server, thread, bound = serve_in_thread(
        http_app(app, messenger.pacing), host, settings.http_port if port is None else port
    )
    return SlackBot(
        "http",
        f"http://{host}:{bound}{EVENTS_PATH}",
        notifier,
        announcer,
        _server=(server, thread),
    )
