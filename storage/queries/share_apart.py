"""Pairs of jobs kept apart: two jobs that are never to share a card again, because on one
one of them ran too slowly beside the other (scheduler/share_watch.py)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, or_, select

from storage.models.cluster import ShareApart


def keep_apart(
    *,
    session: Session,
    jobs: tuple[int, int],
    at: datetime,
    reason_code: str,
    reason_values: Mapping[str, Any],
) -> bool:
    """Record that the two jobs are kept apart; False when they already were (the first
    record, and its why, stands)."""
    job_a, job_b = sorted(jobs)
    if job_a == job_b:
        raise ValueError(f"job #{job_a} cannot be kept apart from itself")
    found = session.exec(
        select(ShareApart).where(col(ShareApart.job_a) == job_a, col(ShareApart.job_b) == job_b)
    ).first()
    if found is not None:
        return False
    session.add(
        ShareApart(
            job_a=job_a,
            job_b=job_b,
            at=at,
            reason_code=reason_code,
            reason_values=dict(reason_values),
        )
    )
    session.flush()  # a second writer of the same pair fails here, on the unique pair
    return True


def apart_from(*, session: Session, job_ids: Collection[int]) -> dict[int, frozenset[int]]:
    """Each of `job_ids` that is kept apart from any job → the jobs it is kept apart from."""
    if not job_ids:
        return {}
    ids = list(job_ids)
    query = select(ShareApart).where(
        or_(col(ShareApart.job_a).in_(ids), col(ShareApart.job_b).in_(ids))
    )
    found: dict[int, set[int]] = {}
    wanted = set(ids)
    for row in session.exec(query):
        for one, other in ((row.job_a, row.job_b), (row.job_b, row.job_a)):
            if one in wanted:
                found.setdefault(one, set()).add(other)
    return {job_id: frozenset(others) for job_id, others in found.items()}


def pairs_of(*, session: Session, job_id: int) -> list[ShareApart]:
    """The pairs `job_id` is part of, oldest first."""
    query = (
        select(ShareApart)
        .where(or_(col(ShareApart.job_a) == job_id, col(ShareApart.job_b) == job_id))
        .order_by(col(ShareApart.at), col(ShareApart.id))
    )
    return list(session.exec(query))
