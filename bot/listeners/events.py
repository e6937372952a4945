"""Events API: the App Home, drawn when its owner opens it."""

from __future__ import annotations

from typing import Any

from slack_bolt import App

from bot.failures import reported
from bot.listeners.commands import acknowledge
from bot.messenger import Messenger
from bot.services import BotServices


def register(app: App, services: BotServices, messenger: Messenger) -> None:
    def home_opened(body: dict[str, Any], event: dict[str, Any]) -> None:
        with reported(services, body, None):
            if event.get("tab", "home") == "home":
                messenger.publish_home(event["user"])

    app.event("app_home_opened")(ack=acknowledge, lazy=[home_opened])
