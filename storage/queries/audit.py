"""The audit trail."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from storage.models import AuditEvent


def record(
    *,
    session: Session,
    at: datetime,
    actor: str,
    action: str,
    target_kind: str,
    target_id: object,
    detail: dict[str, Any] | None = None,
) -> AuditEvent:
    """Add one audit event to the unit of work."""
    event = AuditEvent(
        at=at,
        actor=actor,
        action=action,
        target_kind=target_kind,
        target_id=str(target_id),
        detail=detail,
    )
    session.add(event)
    return event


def events(
    *, session: Session, target_kind: str | None = None, target_id: object = None
) -> Sequence[AuditEvent]:
    """Audit events, oldest first, optionally about one target."""
    query = select(AuditEvent).order_by(col(AuditEvent.id))
    if target_kind is not None:
        query = query.where(AuditEvent.target_kind == target_kind)
    if target_id is not None:
        query = query.where(AuditEvent.target_id == str(target_id))
    return session.exec(query).all()


def latest(
    *, session: Session, action: str, target_kind: str, target_id: object
) -> AuditEvent | None:
    """The newest audit event of `action` about one target, None if there is none."""
    query = (
        select(AuditEvent)
        .where(
            AuditEvent.action == action,
            AuditEvent.target_kind == target_kind,
            AuditEvent.target_id == str(target_id),
        )
        .order_by(col(AuditEvent.id).desc())
        .limit(1)
    )
    return session.exec(query).first()


def recent_times(
    *, session: Session, actor: str, action: str, since: datetime, limit: int
) -> list[datetime]:
    """When `actor` did `action` from `since` on, oldest first, at most `limit` of them
    (a rate limit's window: read by the actor's index, never the whole trail)."""
    query = (
        select(AuditEvent.at)
        .where(AuditEvent.actor == actor, AuditEvent.action == action, AuditEvent.at >= since)
        .order_by(col(AuditEvent.at))
        .limit(limit)
    )
    return list(session.exec(query).all())
