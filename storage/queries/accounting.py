"""Quotas and the ledger."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func
from sqlmodel import Session, col, select

from storage.models import Job, JobOutput, LedgerEntry, Quota


def get_quota(*, session: Session, quota_id: int) -> Quota | None:
    """The quota with this id, if any."""
    return session.get(Quota, quota_id)


def quotas(*, session: Session, team_id: int | None = None) -> Sequence[Quota]:
    """Quotas of one team (or all), soonest expiry first."""
    query = select(Quota).order_by(col(Quota.expires_on), col(Quota.id))
    if team_id is not None:
        query = query.where(Quota.team_id == team_id)
    return session.exec(query).all()


def used_hours_by_quota(*, session: Session, quota_ids: Sequence[int]) -> dict[int, float]:
    """GPU-hours charged to each quota so far."""
    if not quota_ids:
        return {}
    query = (
        select(LedgerEntry.quota_id, func.sum(LedgerEntry.gpu_hours))
        .where(col(LedgerEntry.quota_id).in_(quota_ids))
        .group_by(col(LedgerEntry.quota_id))
    )
    return {
        quota_id: float(total or 0) for quota_id, total in session.exec(query).all() if quota_id
    }


def ledger_of_job(*, session: Session, job_id: int) -> Sequence[LedgerEntry]:
    """A job's ledger entries, oldest first."""
    query = select(LedgerEntry).where(LedgerEntry.job_id == job_id).order_by(col(LedgerEntry.id))
    return session.exec(query).all()


def ledger_since(*, session: Session, since: datetime) -> Sequence[LedgerEntry]:
    """Ledger entries that ended at or after `since`."""
    return session.exec(select(LedgerEntry).where(col(LedgerEntry.ended_at) >= since)).all()


def ledger_between(
    *, session: Session, start: datetime, end: datetime, team_id: int | None = None
) -> Sequence[tuple[LedgerEntry, Job]]:
    """Ledger entries overlapping [start, end), each with its job (one query)."""
    query = (
        select(LedgerEntry, Job)
        .join(Job, col(Job.id) == col(LedgerEntry.job_id))
        .where(col(LedgerEntry.started_at) < end, col(LedgerEntry.ended_at) > start)
        .order_by(col(LedgerEntry.id))
    )
    if team_id is not None:
        query = query.where(LedgerEntry.team_id == team_id)
    return [(entry, job) for entry, job in session.exec(query)]


# Ids per IN (…) list: well under every backend's limit on bound parameters.
_IDS_PER_QUERY = 500


def outputs_of_jobs(*, session: Session, job_ids: Sequence[int]) -> Sequence[JobOutput]:
    """What these jobs reported (metrics, artefacts, verdicts), oldest first per job."""
    found: list[JobOutput] = []
    ids = sorted(set(job_ids))
    for first in range(0, len(ids), _IDS_PER_QUERY):
        chunk = ids[first : first + _IDS_PER_QUERY]
        query = (
            select(JobOutput)
            .where(col(JobOutput.job_id).in_(chunk))
            .order_by(col(JobOutput.job_id), col(JobOutput.at), col(JobOutput.id))
        )
        found += session.exec(query).all()
    return found
