"""Quota alerts: the owner (and the channel) hears as a quota's expiry nears and as its
hours run out, with the jobs that would be cut off.

Each threshold crossed is one occasion, claimed once in the `alerts` table:

    quota-expiry:<quota id>:<expires_on>:<N>d    N days or fewer left (policy time zone)
    quota-used:<quota id>:<gpu_hours>:<pct>      pct % or more of the GPU-hours used

The expiry date and the granted hours are part of the key, so a renewal or a top-up starts
fresh occasions. When several thresholds of one kind are crossed at once (paika was down for
a week, a quota was granted late), every one of them is claimed in the same transaction but
only the most urgent is announced; the others are recorded as sent, covered by it. So an
alert is neither repeated nor skipped, and nobody gets four messages for one week.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from scheduler.config import PolicyConfig
from scheduler.ledger import quota_use
from scheduler.notices.kinds import NoticeKind
from scheduler.notices.outbox import Announcement, claim, from_row
from scheduler.policy.capacity import OVERRUN_SHARE
from scheduler.policy.matching import fitting_types
from scheduler.policy.plan import Wait
from scheduler.policy.quota import QuotaState
from scheduler.policy.scheduler import schedule
from scheduler.policy.snapshot import Pending, Running, Snapshot
from scheduler.service.context import resolve_actor
from scheduler.snapshots import build_snapshot, expiry_moment
from storage.db import session_scope
from storage.models import ACTIVE_STATES, Job, Quota
from storage.queries import accounting, audit
from storage.queries import jobs as job_queries
from storage.queries import notices as notice_queries
from storage.queries import org as org_queries

EXPIRY_KIND = NoticeKind.QUOTA_EXPIRY
USED_KIND = NoticeKind.QUOTA_USED
KINDS = (EXPIRY_KIND, USED_KIND)
ACKNOWLEDGED = "acknowledged"
# The jobs an alert names; more are counted, not listed (a message has room for so many).
JOBS_LISTED = 20
_ACTIVE = tuple(ACTIVE_STATES)


@dataclass(frozen=True)
class _Occasion:
    """One threshold of one quota: its key and how urgent it is."""

    key: str
    kind: str
    threshold: float  # days left (expiry) or percent used


@dataclass(frozen=True)
class _Jobs:
    """The queue and the cluster as the policy sees them, to tell which jobs a quota cuts off."""

    snapshot: Snapshot
    waits: dict[int, Wait]
    rows: dict[int, Job]
    teams: dict[int, str]


def raise_quota_alerts(engine: Engine, policy: PolicyConfig, now: datetime) -> list[Announcement]:
    """Claim every quota threshold crossed and not yet claimed; the announcements to deliver."""
    today = now.astimezone(policy.zone).date()
    with session_scope(engine) as session:
        rows = accounting.quotas(session=session)
        # What running jobs have used so far counts: a run can pass a threshold (or use a
        # quota up) long before it ends and is charged.
        pairs = zip(rows, quota_use(session, rows, now), strict=True)
        groups = [
            (row, state, group)
            for row, state in pairs
            for group in _crossed(row, state, policy, today)
        ]
        keys = [occasion.key for _, _, group in groups for occasion in group]
        claimed = notice_queries.claimed_keys(session=session, keys=keys)
        crossed = [g for g in groups if any(o.key not in claimed for o in g[2])]
        if not crossed:
            return []  # the usual case: no snapshot, no policy pass
        jobs = _jobs(session, policy, now)
        announced: list[Announcement] = []
        for row, state, group in crossed:
            announced += _claim_group(session, policy, now, row, state, group, jobs)
        return announced


def _crossed(
    row: Quota, state: QuotaState, policy: PolicyConfig, today: date
) -> list[list[_Occasion]]:
    """The thresholds this quota has crossed, one list per kind, least urgent first."""
    days_left = (row.expires_on - today).days
    if days_left < 0:
        return []  # expired: it pays for nothing any more, so there is nothing to warn about
    expiry = [
        _Occasion(f"quota-expiry:{row.id}:{row.expires_on.isoformat()}:{days}d", EXPIRY_KIND, days)
        for days in sorted(policy.alerts.quota_days_before, reverse=True)
        if days_left <= days
    ]
    used = [
        _Occasion(f"quota-used:{row.id}:{row.gpu_hours:g}:{pct:g}", USED_KIND, pct)
        for pct in used_thresholds_passed(row.gpu_hours, state.used_hours, policy)
    ]
    return [group for group in (expiry, used) if group]


def used_thresholds_passed(
    gpu_hours: float, used_hours: float, policy: PolicyConfig
) -> list[float]:
    """The used-% alerts (alerts.quota_used_pct) a quota's use has reached, lowest first: what
    the alerts announce and the digest's quota warnings list."""
    if gpu_hours <= 0:
        return []
    # A small tolerance: usage is a sum of floats, and 80 of 100 hours is 80 %.
    return [
        pct
        for pct in sorted(policy.alerts.quota_used_pct)
        if used_hours >= pct / 100 * gpu_hours - 1e-9
    ]


def _claim_group(
    session: Session,
    policy: PolicyConfig,
    now: datetime,
    row: Quota,
    state: QuotaState,
    group: Sequence[_Occasion],
    jobs: _Jobs,
) -> list[Announcement]:
    """Claim each threshold (least urgent first, the same order on every instance, so two
    instances wait on each other instead of deadlocking); announce only the most urgent."""
    urgent = group[-1]
    main = _announcement(policy, now, row, state, urgent, jobs)
    claimed_main = False
    covered = []
    for occasion in group:
        if occasion is urgent:
            claimed_main = claim(session, main)
        elif claim(session, _covered(occasion, urgent, row, now)):
            covered.append(occasion.key)
    for key in covered:  # said by the most urgent one, now or earlier
        notice_queries.mark_sent(session=session, key=key, at=now)
    return [main] if claimed_main else []


def _covered(occasion: _Occasion, by: _Occasion, row: Quota, now: datetime) -> Announcement:
    return Announcement(
        key=occasion.key,
        kind=occasion.kind,
        at=now,
        detail={"subject": str(row.id), "quota_id": row.id, "covered_by": by.key},
    )


def _announcement(
    policy: PolicyConfig,
    now: datetime,
    row: Quota,
    state: QuotaState,
    occasion: _Occasion,
    jobs: _Jobs,
) -> Announcement:
    team = jobs.teams.get(row.team_id, "?")
    ends = expiry_moment(row.expires_on, policy)
    cut = _cut_off(jobs, row, state, team, ends)
    days_left = (row.expires_on - now.astimezone(policy.zone).date()).days
    used_pct = 100 * state.used_hours / row.gpu_hours if row.gpu_hours > 0 else 0.0
    detail: dict[str, Any] = {
        "subject": str(row.id),
        "quota_id": row.id,
        "team": team,
        "gpu_type": row.gpu_type,
        "owner": row.owner,
        "gpu_hours": row.gpu_hours,
        "used_hours": round(state.used_hours, 3),
        "left_hours": round(state.left_hours, 3),
        "used_pct": round(used_pct, 1),
        "expires_on": row.expires_on.isoformat(),
        "days_left": days_left,
        "threshold": occasion.threshold,
        "jobs": cut[:JOBS_LISTED],
        "jobs_more": max(0, len(cut) - JOBS_LISTED),
    }
    return Announcement(
        key=occasion.key,
        kind=occasion.kind,
        at=now,
        to_users=(row.owner,),
        to_channel=True,
        detail=detail,
    )


def _jobs(session: Session, policy: PolicyConfig, now: datetime) -> _Jobs:
    snapshot = build_snapshot(session, policy, now)
    plan = schedule(snapshot, explain=True)
    rows = {job.id or 0: job for job in job_queries.jobs_in_states(session=session, states=_ACTIVE)}
    teams = {team.id or 0: team.name for team in org_queries.all_teams(session=session)}
    return _Jobs(snapshot, dict(plan.waits), rows, teams)


def _cut_off(
    jobs: _Jobs, row: Quota, state: QuotaState, team: str, ends: float
) -> list[dict[str, Any]]:
    """The team's jobs on this quota's type that it would not carry to their end: running
    jobs expected to end after the expiry, and waiting jobs that need more hours than are
    left or that, starting at their ETA, would end after it (the policy's own estimates)."""
    snapshot = jobs.snapshot
    cut = []
    for running in snapshot.running:
        if running.team != team or row.gpu_type not in (None, running.gpu_type):
            continue
        end = _expected_end(running, snapshot.now)
        if end > ends:
            cut.append(_entry(jobs, running.id, end, "ends_after_expiry"))
    for pending in snapshot.pending:
        if pending.team != team or not _may_use(snapshot, pending, row.gpu_type):
            continue
        wait = jobs.waits.get(pending.id)
        start = max(snapshot.now, wait.eta) if wait is not None and wait.eta else snapshot.now
        end = start + pending.run_seconds
        if pending.est_gpu_hours > state.left_hours:
            cut.append(_entry(jobs, pending.id, end, "needs_more_than_left"))
        elif end > ends:
            cut.append(_entry(jobs, pending.id, end, "ends_after_expiry"))
    return cut


def _expected_end(running: Running, now: float) -> float:
    """As the policy reckons it: by the estimate, or, past it, half as long again as it has run."""
    if running.expected_end > now:
        return running.expected_end
    return now + max(60.0, OVERRUN_SHARE * (now - running.started_at))


def _may_use(snapshot: Snapshot, job: Pending, gpu_type: str | None) -> bool:
    if gpu_type is None:
        return True
    return any(card.name == gpu_type for card in fitting_types(snapshot.catalog, job.needs))


def _entry(jobs: _Jobs, job_id: int, end: float, why: str) -> dict[str, Any]:
    row = jobs.rows.get(job_id)
    return {
        "id": job_id,
        "name": row.name if row else "?",
        "owner": row.owner if row else None,
        "state": row.state if row else "?",
        "est_gpu_hours": row.est_gpu_hours if row else None,
        "ends_at": datetime.fromtimestamp(end, UTC).isoformat(),
        "why": why,
    }


# ---------------------------------------------------------------- acknowledging


@dataclass(frozen=True)
class QuotaAck:
    """What a click on Acknowledge did, and the alert to redraw."""

    known: bool  # the key names a quota alert
    allowed: bool = False  # the clicker is the quota's owner or an admin
    changed: bool = False  # this click recorded the acknowledgement (first wins)
    answered_by: str | None = None
    answered_at: datetime | None = None
    alert: Announcement | None = None


def acknowledge(
    engine: Engine, admins: Collection[str], key: str, user_id: str, now: datetime
) -> QuotaAck:
    """The quota's owner or an admin acknowledges a quota alert; a second click changes nothing."""
    with session_scope(engine) as session:
        row = notice_queries.lock_notice(session=session, key=key)
        if row is None or row.kind not in KINDS:
            return QuotaAck(known=False)
        alert = from_row(row)
        actor = resolve_actor(session, user_id, admins)
        if user_id != alert.detail.get("owner") and not actor.is_admin:
            return QuotaAck(True, alert=alert)
        if row.answered_at is not None:
            return QuotaAck(True, True, False, row.answered_by, row.answered_at, alert)
        changed = notice_queries.answer_notice(
            session=session, key=key, answer=ACKNOWLEDGED, by=user_id, at=now
        )
        if changed:
            audit.record(
                session=session,
                at=now,
                actor=user_id,
                action="quota.alert_acknowledged",
                target_kind="quota",
                target_id=alert.detail.get("quota_id"),
                detail={"alert": key},
            )
        return QuotaAck(True, True, changed, user_id, now, alert)
