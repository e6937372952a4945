"""What the Slack listeners ask of paika: one method per question, each one transaction.

The listeners stay thin (ack, one call here, render); everything that reads or changes
state goes through the same service layer as the `/gpu` text commands and the CLI.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from bot.locales import SlackLocales
from scheduler.app import Answer, Paika, Reply
from scheduler.errors import UserError
from scheduler.service import estimates, jobs, quotas, slack, templates
from scheduler.service.board import BoardResult, board
from scheduler.service.context import Context
from scheduler.service.jobs import JobView
from scheduler.service.lookup import submit_team_names
from scheduler.service.quotas import QuotaView
from scheduler.service.slack import ApprovalRequest
from scheduler.snapshots import EstimateRecord

T = TypeVar("T")

# Sightings of Slack requests between two purges of the old ones, in each process: often
# enough to keep the table small, rare enough to cost nothing per request.
PURGE_EVERY = 200


@dataclass(frozen=True)
class HomeData:
    """What one user's App Home shows."""

    my_jobs: Sequence[JobView]
    board: BoardResult
    quotas: Sequence[QuotaView]
    estimates: EstimateRecord | None = None  # how the user's runs compared with their estimates


@dataclass(frozen=True)
class SubmitChoices:
    """The options the submit modal offers this user."""

    gpu_types: Sequence[str]
    teams: Sequence[str]
    templates: Sequence[str]


class BotServices:
    """The paika core as the bot sees it."""

    def __init__(self, paika: Paika) -> None:
        self.paika = paika
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
        chosen = slack.chosen_language(self.paika.engine, user_id)
        locales = self.locales
        spoken = locales.lookup(user_id) if ask_slack else locales.known(user_id)
        return chosen or spoken or self.paika.policy.slack.default_language

    def home(self, user_id: str) -> HomeData:
        """The user's jobs, the board and the user's team's quotas."""

        def read(ctx: Context) -> HomeData:
            with jobs.reusing_waits(ctx):  # the user's jobs and the board: one policy run
                mine = jobs.queue(ctx, "mine")
                drawn = board(ctx)
            try:
                team_quotas: Sequence[QuotaView] = quotas.show(ctx, None)
            except UserError:  # not in a team yet: no quotas to show
                team_quotas = ()
            mine_all = [*mine.running, *mine.waiting]
            return HomeData(mine_all, drawn, team_quotas, estimates.own(ctx))

        return self._in_context(user_id, read)

    def submit_choices(self, user_id: str) -> SubmitChoices:
        """Card types, the teams the user may submit for and the user's team's templates,
        for the modal's menus."""

        def read(ctx: Context) -> SubmitChoices:
            types = [card.name for card in jobs.catalog(ctx)]
            return SubmitChoices(types, submit_team_names(ctx), templates.names(ctx))

        return self._in_context(user_id, read)

    def approval(self, request_id: int) -> ApprovalRequest | None:
        """A bump request with its job and where its approvers are asked; None if gone."""
        admins = self.paika.admins
        return self._in_context("", lambda ctx: slack.approval(ctx, request_id, admins))

    def remember_approval_message(self, request_id: int, channel: str, ts: str) -> None:
        """Where the request's buttons were posted, so a later decision updates that message."""
        slack.remember_approval_message(self.paika.engine, request_id, channel, ts)

    def decide(self, request_id: int, approve: bool, user_id: str, reason: str | None) -> Reply:
        """An approver's click on Approve or Deny (roles are checked by the service)."""
        path = ("approve",) if approve else ("deny",)
        args: dict[str, Any] = {"request": request_id}
        if reason:
            args["reason"] = reason
        return self.perform(path, args, user_id)

    def first_delivery(self, event_id: str) -> bool:
        """True the first time an Events API delivery is seen, by any paika instance."""
        return slack.first_delivery(self.paika.engine, event_id, self.now())

    def first_sighting(self, request: str) -> bool:
        """True the first time a Slack request (its signature, or an envelope id) is seen,
        by any paika instance; every PURGE_EVERY sightings, old ones are forgotten."""
        first = slack.first_sighting(self.paika.engine, request, self.now())
        if next(self._sightings) % PURGE_EVERY == 0:
            slack.purge_sightings(self.paika.engine, self.now())
        return first

    def _in_context(self, user_id: str, work: Callable[[Context], T]) -> T:
        with self.paika.context(user_id) as ctx:
            return work(ctx)


__all__ = ["ApprovalRequest", "BotServices", "HomeData", "SubmitChoices"]
