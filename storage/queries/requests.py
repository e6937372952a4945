"""Slack requests seen: the first sighting of each wins; old sightings are purged."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, insert
from sqlmodel import Session, col

from storage.models import SeenRequest
from storage.queries.once import insert_once

# Slack's signatures are refused once their timestamp is 5 minutes old, so a replay of a
# request older than that never reaches the check; twice the window leaves room for clocks.
KEPT_FOR = timedelta(minutes=10)


def first_sighting(*, session: Session, key: str, at: datetime) -> bool:
    """Record request `key` (a SHA-256 hex digest) as seen at `at`; False if it already was.

    The primary key decides, so instances racing on one request cannot both win. A
    duplicate undoes only its own insert; the rest of the caller's transaction goes on.
    """
    return insert_once(session, insert(SeenRequest).values(key=key, seen_at=at))


def purge_sightings(*, session: Session, at: datetime, kept_for: timedelta = KEPT_FOR) -> int:
    """Forget requests seen more than `kept_for` before `at`; how many were forgotten."""
    cutoff = at - kept_for
    result = session.execute(delete(SeenRequest).where(col(SeenRequest.seen_at) < cutoff))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
