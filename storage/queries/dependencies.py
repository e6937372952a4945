"""Jobs that wait for other jobs (`after=`, `afterany=`, `data=after:`): the rows, and their
settling by conditional updates (a row changes only from the state its writer saw)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from sqlalchemy import update
from sqlmodel import Session, col, func, select

from storage.models import Job, JobDependency
from storage.models.jobs import DependencyKind, DependencyState

# A dependency that still keeps its job from running.
UNMET = (DependencyState.WAITING, DependencyState.BROKEN)


def add(
    *,
    session: Session,
    job_id: int,
    upstream_id: int,
    kind: str,
    state: str = DependencyState.WAITING,
    at: datetime | None = None,
) -> JobDependency:
    """Record that `job_id` waits for `upstream_id` (or, in `state` MET, that it already
    got what it waited for, at `at`)."""
    row = JobDependency(
        job_id=job_id,
        upstream_id=upstream_id,
        kind=kind,
        state=state,
        settled_at=at if state != DependencyState.WAITING else None,
    )
    session.add(row)
    return row


def of_job(*, session: Session, job_id: int) -> Sequence[JobDependency]:
    """Every dependency of a job, in the order given."""
    query = select(JobDependency).where(JobDependency.job_id == job_id)
    return session.exec(query.order_by(col(JobDependency.id))).all()


def waits_for_data(*, session: Session, job_id: int) -> bool:
    """Whether a job still waits for another job to make its data (read from the table, not
    from rows this session may hold from before an update)."""
    query = (
        select(func.count())
        .where(JobDependency.job_id == job_id)
        .where(JobDependency.kind == DependencyKind.DATA)
        .where(col(JobDependency.state).in_(UNMET))
    )
    return bool(session.exec(query).one())


def dependants(*, session: Session, upstream_id: int) -> Sequence[JobDependency]:
    """Every dependency on a job, oldest first."""
    query = select(JobDependency).where(JobDependency.upstream_id == upstream_id)
    return session.exec(query.order_by(col(JobDependency.id))).all()


def unmet_of(
    *, session: Session, job_ids: Collection[int]
) -> dict[int, tuple[tuple[int, str], ...]]:
    """Each of `job_ids` with a dependency still unmet → (upstream id, state) of each, in the
    order given: what the policy holds it for."""
    if not job_ids:
        return {}
    query = (
        select(JobDependency.job_id, JobDependency.upstream_id, JobDependency.state)
        .where(col(JobDependency.job_id).in_(sorted(job_ids)))
        .where(col(JobDependency.state).in_(UNMET))
        .order_by(col(JobDependency.id))
    )
    found: dict[int, list[tuple[int, str]]] = {}
    for job_id, upstream_id, state in session.exec(query):
        found.setdefault(job_id, []).append((upstream_id, state))
    return {job_id: tuple(rows) for job_id, rows in found.items()}


def due(*, session: Session, ended: Collection[str]) -> Sequence[tuple[JobDependency, str]]:
    """The waiting dependencies whose upstream job is in one of the `ended` states, with that
    state, oldest first: what the cycle settles now."""
    query = (
        select(JobDependency, Job.state)
        .join(Job, col(Job.id) == col(JobDependency.upstream_id))
        .where(JobDependency.state == DependencyState.WAITING)
        .where(col(Job.state).in_(sorted(ended)))
        .order_by(col(JobDependency.id))
    )
    return [(row, state) for row, state in session.exec(query).all()]


def untold_broken(*, session: Session) -> Sequence[JobDependency]:
    """Broken dependencies whose dependant's owner has not been told yet, oldest first."""
    query = (
        select(JobDependency)
        .where(JobDependency.state == DependencyState.BROKEN)
        .where(col(JobDependency.told_at).is_(None))
        .order_by(col(JobDependency.id))
    )
    return session.exec(query).all()


def settle(
    *,
    session: Session,
    dependency_id: int,
    was: Collection[str],
    now: str,
    at: datetime,
    by: str | None = None,
) -> bool:
    """Move one dependency from one of the states `was` to `now`; False when another writer
    moved it first."""
    changed = session.execute(
        update(JobDependency)
        .where(col(JobDependency.id) == dependency_id, col(JobDependency.state).in_(list(was)))
        .values(state=now, settled_at=at, settled_by=by)
        .execution_options(synchronize_session=False)
    )
    return bool(changed.rowcount)  # type: ignore[attr-defined]


def told(*, session: Session, job_id: int, at: datetime) -> bool:
    """Mark a job's broken dependencies as told to its owner; False when they already were
    (the owner is told once per job)."""
    changed = session.execute(
        update(JobDependency)
        .where(col(JobDependency.job_id) == job_id)
        .where(col(JobDependency.state) == DependencyState.BROKEN)
        .where(col(JobDependency.told_at).is_(None))
        .values(told_at=at)
        .execution_options(synchronize_session=False)
    )
    return bool(changed.rowcount)  # type: ignore[attr-defined]
