"""Events API: the App Home, drawn when its owner opens it."""

from __future__ import annotations

from typing import Any

from slack_bolt import App

from bot.messenger import Messenger
from bot.services import BotServices


def register(app: App, services: BotServices, messenger: Messenger) -> None:
    @app.event("app_home_opened")
    def home_opened(event: dict[str, Any]) -> None:
        if event.get("tab", "home") == "home":
            messenger.publish_home(event["user"])
