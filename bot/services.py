"""What the Slack listeners ask of paika: one method per question, each one transaction.

The listeners stay thin (ack, one call here, render); everything that reads or changes
state goes through the same service layer as the `/gpu` text commands and the CLI.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from sqlalchemy.exc import OperationalError

from bot.locales import SlackLocales
from scheduler.app import Answer, Paika, Reply
from scheduler.errors import UserError
from scheduler.service import jobs, quotas, templates
from scheduler.service.board import BoardResult, board
from scheduler.service.context import Context
from scheduler.service.jobs import JobView
from scheduler.service.prefs import language_of
from scheduler.service.quotas import QuotaView
from storage.db import session_scope
from storage.models import BumpRequest, Role
from storage.queries import jobs as job_queries
from storage.queries import org as org_queries
from storage.queries import requests as request_queries
from storage.queries import slack as slack_queries

T = TypeVar("T")
log = logging.getLogger(__name__)

# Sightings of Slack requests between two purges of the old ones, in each process: often
# enough to keep the table small, rare enough to cost nothing per request.
PURGE_EVERY = 200


@dataclass(frozen=True)
class HomeData:
    """What one user's App Home shows."""

    my_jobs: Sequence[JobView]
    board: BoardResult
    quotas: Sequence[QuotaView]


@dataclass(frozen=True)
class SubmitChoices:
    """The options the submit modal offers this user."""

    gpu_types: Sequence[str]
    teams: Sequence[str]
    templates: Sequence[str]


@dataclass(frozen=True)
class ApprovalRequest:
    """A pending bump request with the job it is about, and where to ask for a decision."""

    request: BumpRequest
    view: JobView
    targets: Sequence[str]  # channel ids/names, or user ids to DM
    approvers: Sequence[str]  # who may decide: DMed when no channel takes the request


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
        with session_scope(self.paika.engine) as session:
            chosen = language_of(session, user_id, "")
        locales = self.locales
        slack = locales.lookup(user_id) if ask_slack else locales.known(user_id)
        return chosen or slack or self.paika.policy.slack.default_language

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
            return HomeData([*mine.running, *mine.waiting], drawn, team_quotas)

        return self._in_context(user_id, read)

    def submit_choices(self, user_id: str) -> SubmitChoices:
        """Card types, teams and the user's team's templates, for the modal's menus."""

        def read(ctx: Context) -> SubmitChoices:
            types = [card.name for card in jobs.catalog(ctx)]
            teams = [team.name for team in org_queries.all_teams(session=ctx.session)]
            saved = [t.name for t in templates.listing(ctx)] if ctx.actor.team_id else []
            return SubmitChoices(types, teams, saved)

        return self._in_context(user_id, read)

    def approval(self, request_id: int) -> ApprovalRequest | None:
        """A bump request with its job and where its approvers are asked; None if gone."""

        def read(ctx: Context) -> ApprovalRequest | None:
            request = job_queries.get_bump(session=ctx.session, request_id=request_id)
            if request is None:
                return None
            job = job_queries.get_job(session=ctx.session, job_id=request.job_id)
            if job is None:
                return None
            approvers = self._approvers(ctx, job.team_id)
            return ApprovalRequest(
                request, jobs.view_of(ctx, job), self._targets(ctx, job.team_id), approvers
            )

        return self._in_context("", read)

    def _targets(self, ctx: Context, team_id: int) -> list[str]:
        """The approvals channel, else the team's channel, else each approver by DM."""
        if self.paika.policy.slack.approvals_channel:
            return [self.paika.policy.slack.approvals_channel]
        team = org_queries.team_by_id(session=ctx.session, team_id=team_id)
        if team is not None and team.channel:
            return [team.channel]
        return self._approvers(ctx, team_id)

    def _approvers(self, ctx: Context, team_id: int) -> list[str]:
        """The team's approvers and every admin."""
        approvers = [
            m.slack_user_id
            for m in org_queries.members(session=ctx.session)
            if m.role == Role.ADMIN or (m.role == Role.APPROVER and m.team_id == team_id)
        ]
        return sorted(set(approvers) | set(self.paika.admins))

    def remember_approval_message(self, request_id: int, channel: str, ts: str) -> None:
        """Where the request's buttons were posted, so a later decision updates that message."""
        with session_scope(self.paika.engine) as session:
            slack_queries.set_bump_message(
                session=session, request_id=request_id, channel=channel, ts=ts
            )

    def decide(self, request_id: int, approve: bool, user_id: str, reason: str | None) -> Reply:
        """An approver's click on Approve or Deny (roles are checked by the service)."""
        path = ("approve",) if approve else ("deny",)
        args: dict[str, Any] = {"request": request_id}
        if reason:
            args["reason"] = reason
        return self.perform(path, args, user_id)

    def first_delivery(self, event_id: str) -> bool:
        """True the first time an Events API delivery is seen, by any paika instance."""
        with session_scope(self.paika.engine) as session:
            return slack_queries.claim_delivery(
                session=session, event_id=event_id, now=self.paika.clock.now()
            )

    def first_sighting(self, request: str) -> bool:
        """True the first time a Slack request (its signature, or an envelope id) is seen,
        by any paika instance; every PURGE_EVERY sightings, old ones are forgotten."""
        key = hashlib.sha256(request.encode()).hexdigest()
        now = self.now()
        with session_scope(self.paika.engine) as session:
            first = request_queries.first_sighting(session=session, key=key, at=now)
        if next(self._sightings) % PURGE_EVERY == 0:
            self._purge_sightings()
        return first

    def _purge_sightings(self) -> None:
        try:
            with session_scope(self.paika.engine) as session:
                request_queries.purge_sightings(session=session, at=self.now())
        except OperationalError as exc:  # a lock lost to another instance's purge
            # The request itself is already recorded; the next purge takes these rows.
            log.warning("could not purge old Slack request ids: %s", exc)

    def _in_context(self, user_id: str, work: Callable[[Context], T]) -> T:
        with self.paika.context(user_id) as ctx:
            return work(ctx)


__all__ = ["ApprovalRequest", "BotServices", "HomeData", "SubmitChoices"]
