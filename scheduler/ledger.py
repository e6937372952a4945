"""The ledger: closing a job's allocations and charging the time to its team's quota.

It sits below everything that charges or reads GPU time (the commands, reconciling, the
snapshot, the digest, the quota alerts), so none of them imports another for it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from sqlmodel import Session

from scheduler.config import PolicyConfig
from scheduler.policy.quota import QuotaState, charge_to
from storage.models import Gpu, Job, LedgerEntry, Quota
from storage.models.cluster import WHOLE_CARD
from storage.queries import accounting, job_reports
from storage.queries import cluster as cluster_queries
from storage.queries import reclaim as reclaim_queries
from storage.queries.accounting import JobFilter


def quota_states(session: Session, quotas: Sequence[Quota]) -> list[QuotaState]:
    """Quotas with what has been used of them (charged here, and carried over by a restore)."""
    used = accounting.used_hours_by_quota(session=session, quota_ids=[q.id or 0 for q in quotas])
    return [
        QuotaState(
            q.id or 0,
            q.gpu_type,
            q.gpu_hours,
            used.get(q.id or 0, 0.0) + (q.carried_hours or 0.0),
            q.expires_on,
        )
        for q in quotas
    ]


def quota_use(session: Session, quotas: Sequence[Quota], now: datetime) -> list[QuotaState]:
    """Quotas with what has been used of them by `now`: what was charged (`quota_states`) and
    what running jobs have used so far, as the ledger report counts them. Each open allocation
    counts on the quota its end would be charged to, the team's every quota weighed as
    `close_allocations_at` weighs them. Every face that says a quota's use (`/gpu quota`, the
    digest, the quota alerts) reads it here, so they agree."""
    states = quota_states(session, quotas)
    today = now.date()  # as the charge at the end picks its quota
    running: dict[int, float] = defaultdict(float)
    known = {state.id: state for state in states}
    for team_id in sorted({quota.team_id for quota in quotas}):
        # The team's every quota; those already read above are not read again (the policy's
        # snapshot passes them all, each cycle).
        team_quotas = accounting.quotas(session=session, team_id=team_id)
        unread = [q for q in team_quotas if (q.id or 0) not in known]
        read = {state.id: state for state in quota_states(session, unread)} if unread else {}
        every = [known.get(q.id or 0) or read[q.id or 0] for q in team_quotas]
        open_charges = cluster_queries.open_charges_between(
            session=session, end=now, jobs=JobFilter(team_id=team_id)
        )
        for charge in open_charges:
            charged = charge_to(every, charge.gpu_type, today)
            if charged is not None:
                hours = max(0.0, (now - charge.started_at).total_seconds() / 3600)
                running[charged.id] += hours * charge.part
    return [
        replace(state, used_hours=state.used_hours + running[state.id])
        if state.id in running
        else state
        for state in states
    ]


def close_allocations_at(
    session: Session,
    policy: PolicyConfig,
    job: Job,
    now: datetime,
    *,
    until: datetime | None = None,
) -> list[LedgerEntry]:
    """End the job's open allocations and write their ledger entries, recorded at `now`.

    The GPUs are charged until `until` when the run is known to have ended earlier (its host
    was silent, or says how long it ran), never before an allocation began or after `now`.
    """
    entries = []
    quotas = quota_states(session, accounting.quotas(session=session, team_id=job.team_id))
    for allocation in cluster_queries.open_allocations(session=session, job_id=job.id):
        end = now if until is None else max(allocation.started_at, min(until, now))
        cluster_queries.end_allocation(session=session, allocation=allocation, at=end)
        gpu = session.get(Gpu, allocation.gpu_id)
        gpu_type = gpu.gpu_type if gpu else "unknown"
        # A job on a shared card is charged its part of it: GPU-hours × its share.
        part = allocation.share_milli / WHOLE_CARD
        hours = max(0.0, (end - allocation.started_at).total_seconds() / 3600) * part
        idle = reclaim_queries.idle_samples(
            session=session,
            gpu_id=allocation.gpu_id,
            start=allocation.started_at,
            end=end,
            below_pct=policy.reclaim.idle_utilization_pct,
        )
        # Each sample stands for one sampling period; a gap in the samples counts as busy.
        idle_hours = min(hours, idle * policy.sample_period_seconds() / 3600 * part)
        spec = policy.gpu_type(gpu_type)
        quota = charge_to(quotas, gpu_type, now.date())
        entry = LedgerEntry(
            job_id=job.id or 0,
            allocation_id=allocation.id,
            team_id=job.team_id,
            quota_id=quota.id if quota else None,
            gpu_type=gpu_type,
            gpu_hours=hours,
            idle_gpu_hours=idle_hours,
            cost=hours * (spec.price_per_gpu_hour if spec else 0.0),
            started_at=allocation.started_at,
            ended_at=end,
            recorded_at=now,
        )
        session.add(entry)
        entries.append(entry)
    session.flush()
    return entries


# The label a job reports its checkpoint under (`paika report checkpoint=<path>`;
# scheduler/outputs.py says the same).
CHECKPOINT = "checkpoint"


def charge_lost(session: Session, job: Job, entries: Sequence[LedgerEntry]) -> float:
    """Mark what a preempted stretch lost: on each of its ledger entries, the GPU-hours
    since the last checkpoint the run reported (all of the stretch when it reported none).
    Returns the GPU-hours lost in all."""
    reported = job_reports.last_artefact_at(
        session=session, job_id=job.id or 0, attempt=job.attempts, name=CHECKPOINT
    )
    if reported is not None and reported.tzinfo is None:  # SQLite hands back naive UTC
        reported = reported.replace(tzinfo=UTC)
    lost_in_all = 0.0
    for entry in entries:
        since = entry.started_at if reported is None else max(entry.started_at, reported)
        lost = max(0.0, (entry.ended_at - since).total_seconds() / 3600)
        entry.lost_gpu_hours = min(entry.gpu_hours, lost)
        lost_in_all += entry.lost_gpu_hours
        session.add(entry)
    session.flush()
    return lost_in_all
