"""The bot's listeners, by kind; each module registers its own on the app."""

from __future__ import annotations

from slack_bolt import App

from bot.listeners import actions, alerts, commands, events, views
from bot.messenger import Messenger
from bot.services import BotServices


def register(app: App, services: BotServices, messenger: Messenger) -> None:
    """Attach every listener paika has to `app`."""
    commands.register(app, services, messenger)
    actions.register(app, services, messenger)
    views.register(app, services, messenger)
    events.register(app, services, messenger)
    alerts.register(app, services, messenger)
