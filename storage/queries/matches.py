"""The matches table: which GPU type each run was put on, and what else was weighed."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from storage.models import Match


def matches_of_job(*, session: Session, job_id: int) -> Sequence[Match]:
    """A job's matches (one per start), oldest first."""
    query = select(Match).where(Match.job_id == job_id).order_by(col(Match.at), col(Match.id))
    return session.exec(query).all()


def latest_alternatives(
    *, session: Session, job_ids: Collection[int]
) -> dict[int, list[dict[str, Any]] | None]:
    """The types weighed at each of these jobs' latest match, by job id (only that column)."""
    if not job_ids:
        return {}
    query = (
        sa_select(col(Match.job_id), col(Match.alternatives))
        .where(col(Match.job_id).in_(list(job_ids)))
        .order_by(col(Match.at), col(Match.id))
    )
    return {
        job_id: alternatives for job_id, alternatives in session.connection().execute(query).all()
    }
