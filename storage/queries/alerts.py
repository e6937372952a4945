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


def alerts_about(*, session: Session, kind: str, subjects: Sequence[str]) -> Sequence[Alert]:
    """Alerts of one kind about any of `subjects` (e.g. job ids), oldest first."""
    if not subjects:
        return []
    query = select(Alert).where(Alert.kind == kind, col(Alert.subject).in_(subjects))
    return session.exec(query.order_by(col(Alert.created_at), col(Alert.key))).all()


def unanswered_alerts(*, session: Session, kind: str, sent_before: datetime) -> Sequence[Alert]:
    """Alerts of one kind delivered before a moment and still without an answer, oldest first."""
    query = select(Alert).where(
        Alert.kind == kind,
        col(Alert.answered_at).is_(None),
        col(Alert.sent_at).is_not(None),
        col(Alert.sent_at) <= sent_before,
    )
    return session.exec(query.order_by(col(Alert.sent_at), col(Alert.key))).all()


def lock_alert(*, session: Session, key: str) -> Alert | None:
    """The alert, locked until the transaction ends, so whoever answers it sees the latest answer."""
    return session.get(Alert, key, with_for_update=True, populate_existing=True)


def claimed_keys(*, session: Session, keys: Sequence[str]) -> set[str]:
    """Which of `keys` have been claimed already (one query)."""
    if not keys:
        return set()
    query = select(col(Alert.key)).where(col(Alert.key).in_(keys))
    return set(session.exec(query).all())
