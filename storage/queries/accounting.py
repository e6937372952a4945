"""Quotas and the ledger."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from storage.models import Job, JobOutput, LedgerEntry, OutputKind, Quota


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


# The reports read a year of the ledger at once: they select the columns they use as plain
# rows (no ORM objects, no identity map), and each job's facts once, not once per entry.


@dataclass(frozen=True, slots=True)
class Charge:
    """One ledger entry as the reports count it: whose, on which type, how much, when."""

    job_id: int
    team_id: int
    gpu_type: str
    gpu_hours: float
    idle_gpu_hours: float
    cost: float
    started_at: datetime
    ended_at: datetime


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What the reports say about a job: who, what it is part of, how it ended, what it
    asked of its GPUs and the latest metrics it was done with (not its command or spec)."""

    id: int
    name: str
    owner: str
    team_id: int
    state: str
    project: str | None
    round: str | None
    output: str | None
    metrics: dict[str, Any] | None
    gpu_types: list[str] | None
    min_memory_gib: float | None
    min_speed: float | None


@dataclass(frozen=True, slots=True)
class OutputRow:
    """One thing a job reported, as the reports read it."""

    job_id: int
    kind: str
    name: str
    value: float | None
    text: str | None


def charges_between(
    *, session: Session, start: datetime, end: datetime, team_id: int | None = None
) -> list[Charge]:
    """Ledger entries overlapping [start, end), oldest entry first, as plain rows."""
    query = (
        sa_select(
            col(LedgerEntry.job_id),
            col(LedgerEntry.team_id),
            col(LedgerEntry.gpu_type),
            col(LedgerEntry.gpu_hours),
            col(LedgerEntry.idle_gpu_hours),
            col(LedgerEntry.cost),
            col(LedgerEntry.started_at),
            col(LedgerEntry.ended_at),
        )
        .where(col(LedgerEntry.started_at) < end, col(LedgerEntry.ended_at) > start)
        .order_by(col(LedgerEntry.id))
    )
    if team_id is not None:
        query = query.where(col(LedgerEntry.team_id) == team_id)
    return [Charge(*row) for row in session.connection().execute(query)]


def _chunks(ids: Collection[int]) -> Iterator[list[int]]:
    ordered = sorted(set(ids))
    for first in range(0, len(ordered), _IDS_PER_QUERY):
        yield ordered[first : first + _IDS_PER_QUERY]


def job_facts(*, session: Session, job_ids: Collection[int]) -> dict[int, JobFacts]:
    """The facts of these jobs, by id (one query per few hundred jobs)."""
    found: dict[int, JobFacts] = {}
    for chunk in _chunks(job_ids):
        query = sa_select(
            col(Job.id),
            col(Job.name),
            col(Job.owner),
            col(Job.team_id),
            col(Job.state),
            col(Job.project),
            col(Job.round),
            col(Job.output),
            col(Job.metrics),
            col(Job.gpu_types),
            col(Job.min_memory_gib),
            col(Job.min_speed),
        ).where(col(Job.id).in_(chunk))
        for row in session.connection().execute(query):
            found[row[0]] = JobFacts(*row)
    return found


def output_rows_of_jobs(
    *, session: Session, job_ids: Collection[int], metrics_only: bool = False
) -> list[OutputRow]:
    """What these jobs reported (only the metrics with a value, when `metrics_only`), oldest
    first per job, as plain rows."""
    found: list[OutputRow] = []
    for chunk in _chunks(job_ids):
        query = (
            sa_select(
                col(JobOutput.job_id),
                col(JobOutput.kind),
                col(JobOutput.name),
                col(JobOutput.value),
                col(JobOutput.text),
            )
            .where(col(JobOutput.job_id).in_(chunk))
            .order_by(col(JobOutput.job_id), col(JobOutput.at), col(JobOutput.id))
        )
        if metrics_only:
            query = query.where(
                col(JobOutput.kind) == OutputKind.METRIC, col(JobOutput.value).is_not(None)
            )
        found += [OutputRow(*row) for row in session.connection().execute(query)]
    return found
