"""What the Slack listeners ask of paika: one method per question, each one transaction.

The listeners stay thin (ack, one call here, render); everything that reads or changes
state goes through the core's one door (scheduler.door: `Paika` for commands, `SlackDoor`
for what only Slack asks), as the `/gpu` text commands and the console do.
"""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot.locales import SlackLocales
from scheduler.door import (
    Answer,
    ApprovalRequest,
    HomeData,
    Paika,
    Reply,
    SlackDoor,
    SubmitChoices,
)

# Sightings of Slack requests between two purges of the old ones, in each process: often
# enough to keep the table small, rare enough to cost nothing per request.
PURGE_EVERY = 200


class BotServices:
    """The paika core as the bot sees it."""

    def __init__(self, paika: Paika) -> None:
        self.paika = paika
        self.door = SlackDoor(paika)
        # The language of a user's Slack locale, for users who never chose one (set by the app).
        self.locales = SlackLocales()
        self._sightings = itertools.count()

    @property
    def zone(self) -> ZoneInfo:
        return self.paika.policy.zone

    def now(self) -> datetime:
        return self.paika.clock.now()

    def run(self, text: str, user_id: str) -> Reply:
        """A `/gpu` command typed by `user_id`."""
        return self.paika.run(text, user_id)

    def begin_run(self, text: str, user_id: str) -> Answer:
        """A `/gpu` command's change, made now; the call returned reads its answer."""
        return self.paika.begin_run(text, user_id)

    def perform(self, path: tuple[str, ...], args: dict[str, Any], user_id: str) -> Reply:
        """An already parsed command (the buttons)."""
        return self.paika.perform(path, args, user_id)

    def begin(self, path: tuple[str, ...], args: dict[str, Any], user_id: str) -> Answer:
        """An already parsed command's change (the submit modal), made now; the call
        returned reads its answer."""
        return self.paika.begin(path, args, user_id)

    def language(self, user_id: str, *, ask_slack: bool = True) -> str:
        """The user's choice (`/gpu lang`), else their Slack locale's, else the policy's default.

        With `ask_slack=False` only a locale already learned counts: no Web API call, so
        the answer is safe to compute before an ack.
        """
        chosen = self.door.chosen_language(user_id)
        locales = self.locales
        spoken = locales.lookup(user_id) if ask_slack else locales.known(user_id)
        return chosen or spoken or self.paika.policy.slack.default_language

    def home(self, user_id: str) -> HomeData:
        """The user's jobs, the board and the user's team's quotas."""
        return self.door.home(user_id)

    def submit_choices(self, user_id: str) -> SubmitChoices:
        """Card types, the teams the user may submit for and the user's team's templates,
        for the modal's menus."""
        return self.door.submit_choices(user_id)

    def approval(self, request_id: int) -> ApprovalRequest | None:
        """A bump request with its job and where its approvers are asked; None if gone."""
        return self.door.approval(request_id)

    def remember_approval_message(self, request_id: int, channel: str, ts: str) -> None:
        """Where the request's buttons were posted, so a later decision updates that message."""
        self.door.remember_approval_message(request_id, channel, ts)

    def decide(self, request_id: int, approve: bool, user_id: str, reason: str | None) -> Reply:
        """An approver's click on Approve or Deny (roles are checked by the service)."""
        path = ("approve",) if approve else ("deny",)
        args: dict[str, Any] = {"request": request_id}
        if reason:
            args["reason"] = reason
        return self.perform(path, args, user_id)

    def first_delivery(self, event_id: str) -> bool:
        """True the first time an Events API delivery is seen, by any paika instance."""
        return self.door.first_delivery(event_id)

    def first_sighting(self, request: str) -> bool:
        """True the first time a Slack request (its signature, or an envelope id) is seen,
        by any paika instance; every PURGE_EVERY sightings, old ones are forgotten."""
        first = self.door.first_sighting(request)
        if next(self._sightings) % PURGE_EVERY == 0:
            self.door.purge_sightings()
        return first


__all__ = ["ApprovalRequest", "BotServices", "HomeData", "SubmitChoices"]
