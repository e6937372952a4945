"""Cards booked ahead for teams: kept, listed and cancelled (once, by a conditional update)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import update
from sqlmodel import Session, col, select

from storage.models import TeamReservation


def add(
    *,
    session: Session,
    team_id: int,
    gpu_type: str,
    gpus: int,
    starts_at: datetime,
    ends_at: datetime,
    reason: str,
    by: str,
    at: datetime,
) -> TeamReservation:
    """Keep a new booking; its id once flushed."""
    booking = TeamReservation(
        team_id=team_id,
        gpu_type=gpu_type,
        gpus=gpus,
        starts_at=starts_at,
        ends_at=ends_at,
        reason=reason,
        created_by=by,
        created_at=at,
    )
    session.add(booking)
    session.flush()
    return booking


def get(*, session: Session, reservation_id: int) -> TeamReservation | None:
    return session.get(TeamReservation, reservation_id)


def not_over(*, session: Session, now: datetime) -> Sequence[TeamReservation]:
    """The bookings not cancelled that have not ended by `now`, soonest first."""
    query = (
        select(TeamReservation)
        .where(col(TeamReservation.cancelled_at).is_(None))
        .where(col(TeamReservation.ends_at) > now)
        .order_by(col(TeamReservation.starts_at), col(TeamReservation.id))
    )
    return session.exec(query).all()


def cancel(*, session: Session, reservation_id: int, by: str, at: datetime) -> bool:
    """Cancel a booking not yet cancelled; False when it already was."""
    changed = session.execute(
        update(TeamReservation)
        .where(col(TeamReservation.id) == reservation_id)
        .where(col(TeamReservation.cancelled_at).is_(None))
        .values(cancelled_at=at, cancelled_by=by)
        .execution_options(synchronize_session=False)
    )
    return bool(changed.rowcount)  # type: ignore[attr-defined]
