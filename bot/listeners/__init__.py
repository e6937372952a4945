"""The bot's listeners, by kind; each module registers its own on the app."""

from __future__ import annotations

from concurrent.futures import Executor

from slack_bolt import App

from bot.listeners import actions, alerts, commands, events, reports, views
from bot.messenger import Messenger
from bot.services import BotServices


def register(
    app: App, services: BotServices, messenger: Messenger, modals: Executor, answers: Executor
) -> None:
    """Attach every listener paika has to `app`; `modals` opens modals, ahead of answers;
    `answers` is the worker that runs the listeners' work after the ack."""
    commands.register(app, services, messenger, modals, answers)
    actions.register(app, services, messenger, modals)
    views.register(app, services, messenger)
    events.register(app, services, messenger)
    alerts.register(app, services, messenger)
    reports.register(app, services, messenger)
