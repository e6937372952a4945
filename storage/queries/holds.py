"""Start holds: the hosts that refused a job's start for good, and what released them."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlmodel import Session, col, func, select

from storage.models import StartHold


def standing(*, session: Session, job_ids: Collection[int] | None = None) -> Sequence[StartHold]:
    """The holds not yet released (of `job_ids`, else of every job), oldest first."""
    query = select(StartHold).where(col(StartHold.released_at).is_(None))
    if job_ids is not None:
        query = query.where(col(StartHold.job_id).in_(sorted(job_ids)))
    return session.exec(query.order_by(col(StartHold.id))).all()


def of_job(*, session: Session, job_id: int) -> Sequence[StartHold]:
    """Every hold of a job, released or not, oldest first."""
    query = select(StartHold).where(StartHold.job_id == job_id).order_by(col(StartHold.id))
    return session.exec(query).all()


def count_of_job(*, session: Session, job_id: int) -> int:
    """How many of a job's starts hosts refused for good (each was counted as an attempt)."""
    query = select(func.count()).where(StartHold.job_id == job_id)
    return int(session.exec(query).one())
