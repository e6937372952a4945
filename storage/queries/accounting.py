"""Quotas and the ledger."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Text, cast, func
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


def kept_gpu_hours(*, session: Session, job_ids: Collection[int]) -> dict[int, float]:
    """Job id → the GPU-hours its ended stretches kept (charged minus what preemptions lost):
    the work a requeued job resumes from."""
    if not job_ids:
        return {}
    kept = func.sum(col(LedgerEntry.gpu_hours) - col(LedgerEntry.lost_gpu_hours))
    query = (
        sa_select(col(LedgerEntry.job_id), kept)
        .where(col(LedgerEntry.job_id).in_(sorted(job_ids)))
        .group_by(col(LedgerEntry.job_id))
    )
    return {job_id: float(hours or 0.0) for job_id, hours in session.execute(query).all()}


def usage_since(*, session: Session, since: datetime) -> list[tuple[int | None, datetime, float]]:
    """(team id, end, GPU-hours) of each ledger entry that ended at or after `since`: plain
    rows, no ORM objects (every scheduling pass reads weeks of them for fair share)."""
    query = select(
        col(LedgerEntry.team_id), col(LedgerEntry.ended_at), col(LedgerEntry.gpu_hours)
    ).where(col(LedgerEntry.ended_at) >= since)
    return [(team, ended, hours) for team, ended, hours in session.exec(query)]


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


# The reports read a year of the ledger at once: they select the columns they use as plain
# rows (no ORM objects, no identity map), sum in SQL the entries wholly inside the period,
# and read each job's facts once, not once per entry.


@dataclass(frozen=True, slots=True)
class Charge:
    """GPU-hours, idle GPU-hours and cost charged to a job's team on one GPU type.

    With `started_at`/`ended_at`: one ledger entry that crosses the period's edges (the
    report counts its share inside). Without: the sum of the job's entries on that type
    that lie wholly inside the period.
    """

    job_id: int
    team_id: int
    gpu_type: str
    gpu_hours: float
    idle_gpu_hours: float
    cost: float
    started_at: datetime | None = None
    ended_at: datetime | None = None
    lost_gpu_hours: float = 0.0  # of gpu_hours, what preemptions threw away


@dataclass(frozen=True, slots=True)
class JobFilter:
    """The jobs a report keeps (None: any): by owner, project, round, team."""

    owner: str | None = None
    project: str | None = None
    round: str | None = None
    team_id: int | None = None

    def on_jobs(self, query: Any) -> Any:
        """`query`, which selects from the jobs, keeping only these jobs."""
        for column, wanted in (
            (Job.owner, self.owner),
            (Job.project, self.project),
            (Job.round, self.round),
            (Job.team_id, self.team_id),
        ):
            if wanted is not None:
                query = query.where(col(column) == wanted)
        return query

    @property
    def by_job(self) -> bool:
        return any(v is not None for v in (self.owner, self.project, self.round))


ANY_JOB = JobFilter()


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
    metrics_json: str | None  # read as text: only the reports that need them parse them
    gpu_types: list[str] | None
    min_memory_gib: float | None
    min_speed: float | None
    array_id: int | None = None  # one job of an array (count=, sweep=): the array's number

    @property
    def holds_metrics(self) -> bool:
        """Whether the job's row holds metrics (JSON `null` and `{}` hold none)."""
        return bool(self.metrics_json) and self.metrics_json not in ("null", "{}")

    def latest_metrics(self) -> dict[str, Any]:
        """The latest value of each metric the job reported (`jobs.metrics`)."""
        return (json.loads(self.metrics_json) if self.metrics_json else None) or {}


def _overlapping(query: Any, start: datetime, end: datetime, jobs: JobFilter) -> Any:
    query = query.where(col(LedgerEntry.started_at) < end, col(LedgerEntry.ended_at) > start)
    if jobs.team_id is not None:
        query = query.where(col(LedgerEntry.team_id) == jobs.team_id)
    if jobs.by_job:
        query = jobs.on_jobs(query.join(Job, col(Job.id) == col(LedgerEntry.job_id)))
    return query


def charges_between(
    *,
    session: Session,
    start: datetime,
    end: datetime,
    jobs: JobFilter = ANY_JOB,
    gpu_type: str | None = None,
) -> list[Charge]:
    """What the ledger charged between `start` and `end` to these jobs (on `gpu_type`):
    per job and type the sum of its entries wholly inside, and each entry that crosses an
    edge on its own (its times set)."""
    inside = (col(LedgerEntry.started_at) >= start) & (col(LedgerEntry.ended_at) <= end)
    sums = _overlapping(
        sa_select(
            col(LedgerEntry.job_id),
            col(LedgerEntry.team_id),
            col(LedgerEntry.gpu_type),
            func.sum(col(LedgerEntry.gpu_hours)),
            func.sum(col(LedgerEntry.idle_gpu_hours)),
            func.sum(col(LedgerEntry.cost)),
            func.sum(col(LedgerEntry.lost_gpu_hours)),
        ).where(inside),
        start,
        end,
        jobs,
    ).group_by(col(LedgerEntry.job_id), col(LedgerEntry.team_id), col(LedgerEntry.gpu_type))
    edges = _overlapping(
        sa_select(
            col(LedgerEntry.job_id),
            col(LedgerEntry.team_id),
            col(LedgerEntry.gpu_type),
            col(LedgerEntry.gpu_hours),
            col(LedgerEntry.idle_gpu_hours),
            col(LedgerEntry.cost),
            col(LedgerEntry.started_at),
            col(LedgerEntry.ended_at),
            col(LedgerEntry.lost_gpu_hours),
        ).where(~inside),
        start,
        end,
        jobs,
    ).order_by(col(LedgerEntry.id))
    if gpu_type is not None:
        sums = sums.where(col(LedgerEntry.gpu_type) == gpu_type)
        edges = edges.where(col(LedgerEntry.gpu_type) == gpu_type)
    connection = session.connection()
    found = [
        Charge(
            job_id,
            team_id,
            kind,
            float(hours),
            float(idle or 0),
            float(cost),
            lost_gpu_hours=float(lost or 0),
        )
        for job_id, team_id, kind, hours, idle, cost, lost in connection.execute(sums).all()
    ]
    return found + [Charge(*row) for row in connection.execute(edges).all()]


def job_facts(*, session: Session, job_ids: Collection[int]) -> dict[int, JobFacts]:
    """The facts of these jobs, by id (one query per few hundred jobs)."""
    found: dict[int, JobFacts] = {}
    for chunk in _chunks(job_ids):
        query = sa_select(*_FACTS).where(col(Job.id).in_(chunk))
        for row in session.connection().execute(query).all():
            facts = _facts(row)
            found[facts.id] = facts
    return found


_FACTS = (
    col(Job.id),
    col(Job.name),
    col(Job.owner),
    col(Job.team_id),
    col(Job.state),
    col(Job.project),
    col(Job.round),
    col(Job.output),
    cast(col(Job.metrics), Text),
    col(Job.gpu_types),
    col(Job.min_memory_gib),
    col(Job.min_speed),
    col(Job.array_id),
)


def _facts(row: Any) -> JobFacts:
    return JobFacts(*row)


def facts_of_jobs_in(*, session: Session, job_ids: Any) -> dict[int, JobFacts]:
    """The facts of the jobs a subquery of job ids names, by id (one query)."""
    query = sa_select(*_FACTS).where(col(Job.id).in_(job_ids))
    return {facts.id: facts for facts in map(_facts, session.connection().execute(query).all())}


def charged_job_ids(*, start: datetime, end: datetime, jobs: JobFilter = ANY_JOB) -> Any:
    """A subquery: the ids of these jobs with a ledger entry between `start` and `end`."""
    return _overlapping(sa_select(col(LedgerEntry.job_id)), start, end, jobs)


def _chunks(ids: Collection[int]) -> Iterator[list[int]]:
    ordered = sorted(set(ids))
    for first in range(0, len(ordered), _IDS_PER_QUERY):
        yield ordered[first : first + _IDS_PER_QUERY]


def metric_values(
    *, session: Session, job_ids: Collection[int] | Any, name: str | None = None
) -> list[tuple[int, str, float]]:
    """(job id, metric, value) of every metric these jobs reported (only `name`, when
    given), oldest first per job, as plain rows. `job_ids`: ids, or a subquery of them."""
    query = sa_select(col(JobOutput.job_id), col(JobOutput.name), col(JobOutput.value)).where(
        col(JobOutput.kind) == OutputKind.METRIC, col(JobOutput.value).is_not(None)
    )
    if name is not None:
        query = query.where(col(JobOutput.name) == name)
    return _of_jobs(session, query, job_ids)


def artefact_locations(
    *, session: Session, job_ids: Collection[int] | Any
) -> list[tuple[int, str, str | None]]:
    """(job id, label, location) of every artefact these jobs reported, oldest first per
    job, as plain rows. `job_ids`: ids, or a subquery of them."""
    query = sa_select(col(JobOutput.job_id), col(JobOutput.name), col(JobOutput.text)).where(
        col(JobOutput.kind) == OutputKind.ARTEFACT
    )
    return _of_jobs(session, query, job_ids)


def _of_jobs(session: Session, query: Any, job_ids: Collection[int] | Any) -> list[Any]:
    chunks = _chunks(job_ids) if isinstance(job_ids, Collection) else [job_ids]
    found: list[Any] = []
    for chunk in chunks:
        ordered = query.where(col(JobOutput.job_id).in_(chunk)).order_by(
            col(JobOutput.job_id), col(JobOutput.at), col(JobOutput.id)
        )
        found += session.connection().execute(ordered).all()
    return found
