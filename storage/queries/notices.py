"""The outbox: claim an occasion once, find the notices due for sending, take one for a
lease, record sending (or a failure, with when to try again) and answers."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, or_, update
from sqlmodel import Session, col, select

from storage.models import Notice
from storage.queries.once import insert_once


def claim_notice(
    *,
    session: Session,
    key: str,
    kind: str,
    subject: str,
    now: datetime,
    detail: dict[str, Any] | None = None,
) -> bool:
    """Create the alert for one occasion; False if it was already claimed (by anyone)."""
    statement = insert(Notice).values(
        key=key, kind=kind, subject=subject, created_at=now, attempts=0, detail=detail
    )
    return insert_once(session, statement)


def get_notice(*, session: Session, key: str) -> Notice | None:
    return session.get(Notice, key)


def due_notices(
    *,
    session: Session,
    now: datetime,
    kinds: Sequence[str] | None = None,
    since: datetime | None = None,
    limit: int = 200,
) -> Sequence[Notice]:
    """Notices claimed but not yet sent, not waiting for a retry and not taken by a sender,
    oldest first; `since`: only those raised from then on."""
    query = select(Notice).where(
        col(Notice.sent_at).is_(None),
        or_(col(Notice.next_attempt_at).is_(None), col(Notice.next_attempt_at) <= now),
        or_(col(Notice.taken_until).is_(None), col(Notice.taken_until) <= now),
    )
    if kinds is not None:
        query = query.where(col(Notice.kind).in_(kinds))
    if since is not None:
        query = query.where(col(Notice.created_at) >= since)
    return session.exec(query.order_by(col(Notice.created_at), col(Notice.key)).limit(limit)).all()


def take(*, session: Session, key: str, now: datetime, until: datetime) -> bool:
    """Take the notice for sending until `until`; False if it was sent, or another sender
    holds it (a conditional update: of racing senders, one wins)."""
    result = session.execute(
        update(Notice)
        .where(
            col(Notice.key) == key,
            col(Notice.sent_at).is_(None),
            or_(col(Notice.taken_until).is_(None), col(Notice.taken_until) <= now),
        )
        .values(taken_until=until)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def mark_sent(*, session: Session, key: str, at: datetime) -> None:
    session.execute(
        update(Notice).where(col(Notice.key) == key).values(sent_at=at, taken_until=None)
    )


def mark_failed(*, session: Session, key: str, retry_at: datetime | None = None) -> None:
    """A sending failed: count it, and do not try again before `retry_at`."""
    session.execute(
        update(Notice)
        .where(col(Notice.key) == key)
        .values(attempts=col(Notice.attempts) + 1, next_attempt_at=retry_at, taken_until=None)
    )


def prune_old(*, session: Session, kinds: Sequence[str], before: datetime) -> int:
    """Forget notices of `kinds` raised before `before`, sent or long given up (job and
    host events: nobody answers them, and the jobs' own history keeps what happened); how
    many went."""
    result = session.execute(
        delete(Notice).where(col(Notice.kind).in_(kinds), col(Notice.created_at) < before)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def answer_notice(*, session: Session, key: str, answer: str, by: str, at: datetime) -> bool:
    """Record the answer to an alert's buttons; False if it was already answered (first wins)."""
    result = session.execute(
        update(Notice)
        .where(col(Notice.key) == key, col(Notice.answered_at).is_(None))
        .values(answer=answer, answered_by=by, answered_at=at)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def notices_about(*, session: Session, kind: str, subjects: Sequence[str]) -> Sequence[Notice]:
    """Alerts of one kind about any of `subjects` (e.g. job ids), oldest first."""
    if not subjects:
        return []
    query = select(Notice).where(Notice.kind == kind, col(Notice.subject).in_(subjects))
    return session.exec(query.order_by(col(Notice.created_at), col(Notice.key))).all()


def unanswered_notices(*, session: Session, kind: str, sent_before: datetime) -> Sequence[Notice]:
    """Alerts of one kind delivered before a moment and still without an answer, oldest first."""
    query = select(Notice).where(
        Notice.kind == kind,
        col(Notice.answered_at).is_(None),
        col(Notice.sent_at).is_not(None),
        col(Notice.sent_at) <= sent_before,
    )
    return session.exec(query.order_by(col(Notice.sent_at), col(Notice.key))).all()


def lock_notice(*, session: Session, key: str) -> Notice | None:
    """The alert, locked until the transaction ends, so whoever answers it sees the latest answer."""
    return session.get(Notice, key, with_for_update=True, populate_existing=True)


def claimed_keys(*, session: Session, keys: Sequence[str]) -> set[str]:
    """Which of `keys` have been claimed already (one query)."""
    if not keys:
        return set()
    query = select(col(Notice.key)).where(col(Notice.key).in_(keys))
    return set(session.exec(query).all())


def backlog(*, session: Session, since: datetime) -> int:
    """How many notices raised from `since` on are not sent yet (the outbox's backlog)."""
    query = (
        select(func.count())
        .select_from(Notice)
        .where(col(Notice.sent_at).is_(None), col(Notice.created_at) >= since)
    )
    return int(session.exec(query).one())
