"""What the Slack bot stores: deliveries already handled, where approval messages were posted."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, insert
from sqlmodel import Session, col

from storage.models import BumpRequest, SlackDelivery
from storage.queries.once import insert_once


def claim_delivery(*, session: Session, event_id: str, now: datetime) -> bool:
    """Record an Events API delivery; True the first time, False if it was already claimed.

    The primary key decides, so two instances (or Slack's retries) racing on one event
    cannot both win. The claim is part of the caller's transaction: if the caller rolls
    back, the event may be claimed again.
    """
    statement = insert(SlackDelivery).values(event_id=event_id, received_at=now)
    return insert_once(session, statement)


def prune_deliveries(*, session: Session, before: datetime) -> int:
    """Forget deliveries received before `before` (Slack retries for minutes, not days)."""
    result = session.execute(delete(SlackDelivery).where(col(SlackDelivery.received_at) < before))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def set_bump_message(*, session: Session, request_id: int, channel: str, ts: str) -> bool:
    """Remember where a bump request's approval message is; False if there is no such request."""
    request = session.get(BumpRequest, request_id)
    if request is None:
        return False
    request.message_channel = channel
    request.message_ts = ts
    session.add(request)
    return True
