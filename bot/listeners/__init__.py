"""The bot's listeners, by kind; each module registers its own on the app."""

from __future__ import annotations

from concurrent.futures import Executor

from slack_bolt import App

from bot.listeners import actions, alerts, commands, events, views
from bot.messenger import Messenger
from bot.services import BotServices


def register(app: App, services: BotServices, messenger: Messenger, modals: Executor) -> None:
    """Attach every listener paika has to `app`; `modals` opens modals, ahead of answers."""
    commands.register(app, services, messenger, modals)
    actions.register(app, services, messenger, modals)
    views.register(app, services, messenger)
    events.register(app, services, messenger)
    alerts.register(app, services, messenger)
