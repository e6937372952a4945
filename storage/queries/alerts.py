"""Alerts: claim an occasion once, find the ones still to send, record sending and answers."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import insert, update
from sqlmodel import Session, col, select

from storage.models import Alert
from storage.queries.once import insert_once


def claim_alert(
    *,
    session: Session,
    key: str,
    kind: str,
    subject: str,
    now: datetime,
    detail: dict[str, Any] | None = None,
) -> bool:
    """Create the alert for one occasion; False if it was already claimed (by anyone)."""
    statement = insert(Alert).values(
        key=key, kind=kind, subject=subject, created_at=now, attempts=0, detail=detail
    )
    return insert_once(session, statement)


def get_alert(*, session: Session, key: str) -> Alert | None:
    return session.get(Alert, key)


def unsent_alerts(
    *, session: Session, kind: str | None = None, max_attempts: int = 20
) -> Sequence[Alert]:
    """Alerts claimed but not yet delivered, oldest first (those that failed too often excepted)."""
    query = select(Alert).where(col(Alert.sent_at).is_(None), col(Alert.attempts) < max_attempts)
    if kind is not None:
        query = query.where(Alert.kind == kind)
    return session.exec(query.order_by(col(Alert.created_at), col(Alert.key))).all()


def mark_alert_sent(*, session: Session, key: str, at: datetime) -> None:
    session.execute(update(Alert).where(col(Alert.key) == key).values(sent_at=at))


def mark_alert_failed(*, session: Session, key: str) -> None:
    session.execute(
        update(Alert).where(col(Alert.key) == key).values(attempts=col(Alert.attempts) + 1)
    )


def answer_alert(*, session: Session, key: str, answer: str, by: str, at: datetime) -> bool:
    """Record the answer to an alert's buttons; False if it was already answered (first wins)."""
    result = session.execute(
        update(Alert)
        .where(col(Alert.key) == key, col(Alert.answered_at).is_(None))
        .values(answer=answer, answered_by=by, answered_at=at)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def alerts_of_kind(
    *, session: Session, kind: str, since: datetime | None = None
) -> Sequence[Alert]:
    query = select(Alert).where(Alert.kind == kind)
    if since is not None:
        query = query.where(col(Alert.created_at) >= since)
    return session.exec(query.order_by(col(Alert.created_at))).all()
