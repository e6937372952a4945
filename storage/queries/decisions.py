"""The decision log: appending lines, what the cycle said last about each waiting job, and
one job's lines up to a moment (for `/gpu why`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert
from sqlmodel import Session, col, select

from storage.models import Decision, Job


def append(*, session: Session, lines: Sequence[dict[str, Any]]) -> None:
    """Add lines (each a dict of at, job_id, kind, detail) in one statement."""
    if lines:
        session.execute(insert(Decision), list(lines))


def latest_of_jobs_in(
    *, session: Session, states: Collection[str], kinds: Collection[str]
) -> Sequence[Decision]:
    """The latest line of each of `kinds` for every job now in one of `states`, in one query
    (what the cycle said last, when it starts afresh)."""
    latest = (
        select(
            col(Decision.job_id).label("job_id"),
            col(Decision.kind).label("kind"),
            func.max(col(Decision.id)).label("id"),
        )
        .join(Job, col(Job.id) == col(Decision.job_id))
        .where(col(Job.state).in_(list(states)), col(Decision.kind).in_(list(kinds)))
        .group_by(col(Decision.job_id), col(Decision.kind))
        .subquery()
    )
    query = select(Decision).join(latest, col(Decision.id) == latest.c.id)
    return session.exec(query).all()


def of_job(*, session: Session, job_id: int, until: datetime) -> Sequence[Decision]:
    """One job's lines up to and including `until`, oldest first."""
    query = (
        select(Decision)
        .where(Decision.job_id == job_id, col(Decision.at) <= until)
        .order_by(col(Decision.at), col(Decision.id))
    )
    return session.exec(query).all()
