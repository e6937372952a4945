"""Hosts' planned maintenance windows: kept, listed, cancelled, and the stop at their start
recorded by conditional updates (a window is stopped, or cancelled, once)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import update
from sqlmodel import Session, col, select

from storage.models import MaintenanceWindow


def add(
    *,
    session: Session,
    host: str,
    starts_at: datetime,
    ends_at: datetime,
    reason: str,
    by: str,
    at: datetime,
) -> MaintenanceWindow:
    """Keep a new window; its id once flushed."""
    window = MaintenanceWindow(
        host=host,
        starts_at=starts_at,
        ends_at=ends_at,
        reason=reason,
        created_by=by,
        created_at=at,
    )
    session.add(window)
    session.flush()
    return window


def get(*, session: Session, window_id: int) -> MaintenanceWindow | None:
    return session.get(MaintenanceWindow, window_id)


def not_over(*, session: Session, now: datetime) -> Sequence[MaintenanceWindow]:
    """The windows not cancelled that have not ended by `now`, soonest first."""
    query = (
        select(MaintenanceWindow)
        .where(col(MaintenanceWindow.cancelled_at).is_(None))
        .where(col(MaintenanceWindow.ends_at) > now)
        .order_by(col(MaintenanceWindow.starts_at), col(MaintenanceWindow.id))
    )
    return session.exec(query).all()


def overlapping(
    *, session: Session, host: str, starts_at: datetime, ends_at: datetime
) -> Sequence[MaintenanceWindow]:
    """The host's windows not cancelled that overlap [starts_at, ends_at)."""
    query = (
        select(MaintenanceWindow)
        .where(MaintenanceWindow.host == host)
        .where(col(MaintenanceWindow.cancelled_at).is_(None))
        .where(col(MaintenanceWindow.starts_at) < ends_at)
        .where(col(MaintenanceWindow.ends_at) > starts_at)
        .order_by(col(MaintenanceWindow.starts_at))
    )
    return session.exec(query).all()


def cancel(*, session: Session, window_id: int, by: str, at: datetime) -> bool:
    """Cancel a window not yet cancelled; False when it already was."""
    changed = session.execute(
        update(MaintenanceWindow)
        .where(col(MaintenanceWindow.id) == window_id)
        .where(col(MaintenanceWindow.cancelled_at).is_(None))
        .values(cancelled_at=at, cancelled_by=by)
        .execution_options(synchronize_session=False)
    )
    return bool(changed.rowcount)  # type: ignore[attr-defined]


def mark_stopped(*, session: Session, window_id: int, at: datetime) -> bool:
    """Record that what ran on the window's host was asked to stop at its start; False when
    another scheduler did it first (or the window was cancelled meanwhile)."""
    changed = session.execute(
        update(MaintenanceWindow)
        .where(col(MaintenanceWindow.id) == window_id)
        .where(col(MaintenanceWindow.stopped_at).is_(None))
        .where(col(MaintenanceWindow.cancelled_at).is_(None))
        .values(stopped_at=at)
        .execution_options(synchronize_session=False)
    )
    return bool(changed.rowcount)  # type: ignore[attr-defined]
