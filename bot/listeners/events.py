"""Events API: the App Home, drawn when its owner opens it."""

from __future__ import annotations

from typing import Any

from slack_bolt import App, Respond

from bot.listeners.commands import acknowledge
from bot.messenger import Messenger
from bot.replays import once
from bot.services import BotServices


def register(app: App, services: BotServices, messenger: Messenger) -> None:
    def home_opened(body: dict[str, Any], respond: Respond) -> None:
        event = body["event"]
        if event.get("tab", "home") == "home":
            messenger.publish_home(event["user"])

    app.event("app_home_opened")(ack=acknowledge, lazy=[once(services, home_opened)])
