"""What the Slack face remembers and asks beyond the `/gpu` commands: which requests it has
already seen (Slack retries and replays them), where it posted an approval request, who is
asked to decide one, and the language each person chose.

The face calls these instead of reading the tables itself; each runs in its own short unit
of work, since several are asked before Slack's request is acknowledged.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from scheduler.service.context import Context
from scheduler.service.jobs import JobView, view_of
from scheduler.service.prefs import language_of
from scheduler.service.records import BumpRecord, Role
from storage.db import session_scope
from storage.queries import jobs as job_queries
from storage.queries import org as org_queries
from storage.queries import requests as request_queries
from storage.queries import slack as slack_queries

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ApprovalRequest:
    """A bump request with the job it is about, and where to ask for a decision."""

    request: BumpRecord
    view: JobView
    targets: Sequence[str]  # channel ids/names, or user ids to DM
    approvers: Sequence[str]  # who may decide: DMed when no channel takes the request


def first_delivery(engine: Engine, event_id: str, now: datetime) -> bool:
    """True the first time an Events API delivery is seen, by any paika instance."""
    with session_scope(engine) as session:
        return slack_queries.claim_delivery(session=session, event_id=event_id, now=now)


def first_sighting(engine: Engine, request: str, now: datetime) -> bool:
    """True the first time a Slack request (its signature, or an envelope id) is seen, by
    any paika instance. Only its digest is kept: the key has one length whatever Slack sent."""
    key = hashlib.sha256(request.encode()).hexdigest()
    with session_scope(engine) as session:
        return request_queries.first_sighting(session=session, key=key, at=now)


def purge_sightings(engine: Engine, now: datetime) -> None:
    """Forget sightings too old for Slack to replay; a purge that loses a lock to another
    instance's leaves its rows to the next one."""
    try:
        with session_scope(engine) as session:
            request_queries.purge_sightings(session=session, at=now)
    except OperationalError as exc:
        # The request itself is already recorded; the next purge takes these rows.
        log.warning("could not purge old Slack request ids: %s", exc)


def remember_approval_message(engine: Engine, request_id: int, channel: str, ts: str) -> None:
    """Where the request's buttons were posted, so a later decision updates that message."""
    with session_scope(engine) as session:
        slack_queries.set_bump_message(
            session=session, request_id=request_id, channel=channel, ts=ts
        )


def chosen_language(engine: Engine, user_id: str) -> str:
    """The language `user_id` chose with `/gpu lang`, or "" if they never chose."""
    with session_scope(engine) as session:
        return language_of(session, user_id, "")


def approval(ctx: Context, request_id: int, admins: Collection[str]) -> ApprovalRequest | None:
    """A bump request with its job and where its approvers are asked; None if gone."""
    request = job_queries.get_bump(session=ctx.session, request_id=request_id)
    if request is None:
        return None
    job = job_queries.get_job(session=ctx.session, job_id=request.job_id)
    if job is None:
        return None
    approvers = _approvers(ctx, job.team_id, admins)
    return ApprovalRequest(
        BumpRecord.of(request), view_of(ctx, job), _targets(ctx, job.team_id, approvers), approvers
    )


def _targets(ctx: Context, team_id: int, approvers: list[str]) -> list[str]:
    """The approvals channel, else the team's channel, else each approver by DM."""
    if ctx.policy.slack.approvals_channel:
        return [ctx.policy.slack.approvals_channel]
    team = org_queries.team_by_id(session=ctx.session, team_id=team_id)
    if team is not None and team.channel:
        return [team.channel]
    return approvers


def _approvers(ctx: Context, team_id: int, admins: Collection[str]) -> list[str]:
    """The team's approvers and every admin."""
    approvers = [
        m.slack_user_id
        for m in org_queries.members(session=ctx.session)
        if m.role == Role.ADMIN or (m.role == Role.APPROVER and m.team_id == team_id)
    ]
    return sorted(set(approvers) | set(admins))
