"""Claim an alert once, deliver it until it gets through.

The scheduler never knows Slack: it hands an `Announcement` to an `Announcer`. The
console announcer prints it; the bot posts it (DMs, the channel, buttons, pictures).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TextIO

from sqlalchemy import Engine

from storage.db import session_scope
from storage.models import Alert
from storage.queries import alerts as alert_queries

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Announcement:
    """One alert, ready to deliver: to whom, and the data to render."""

    key: str  # the alert's occasion key (its row in `alerts`)
    kind: str  # e.g. quota_expiry, quota_used, gpus_idle, gpus_reclaimed, digest
    at: datetime  # when it was raised
    text: str  # the plain English of it (console, Slack's notification text)
    to_users: tuple[str, ...] = ()  # Slack users to DM
    to_channel: bool = False  # also post in the policy's channel (slack.channel)
    detail: Mapping[str, Any] = field(default_factory=dict)  # JSON-able data to render from


class Announcer(Protocol):
    """Delivers announcements; True only when the delivery got through (else it is retried)."""

    def announce(self, announcement: Announcement) -> bool: ...


class ConsoleAnnouncer:
    """Prints each announcement (no Slack configured, the demo)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout

    def announce(self, announcement: Announcement) -> bool:
        to = (
            " → " + ", ".join(f"<@{u}>" for u in announcement.to_users)
            if announcement.to_users
            else ""
        )
        print(
            f"[{announcement.at:%H:%M:%S}] {announcement.kind}: {announcement.text}{to}",
            file=self.stream,
            flush=True,
        )
        return True


class RecordingAnnouncer:
    """Keeps announcements (tests); can be told to fail, like an unreachable Slack."""

    def __init__(self) -> None:
        self.announcements: list[Announcement] = []
        self.failing = False

    def announce(self, announcement: Announcement) -> bool:
        if self.failing:
            return False
        self.announcements.append(announcement)
        return True

    def kinds(self) -> list[str]:
        return [a.kind for a in self.announcements]


def claim(session: Any, announcement: Announcement) -> bool:
    """Claim the announcement's occasion in the caller's transaction; False if already claimed."""
    return alert_queries.claim_alert(
        session=session,
        key=announcement.key,
        kind=announcement.kind,
        subject=str(announcement.detail.get("subject", "")),
        now=announcement.at,
        detail={
            "text": announcement.text,
            "to_users": list(announcement.to_users),
            "to_channel": announcement.to_channel,
            "detail": dict(announcement.detail),
        },
    )


def from_row(row: Alert) -> Announcement:
    """The announcement a claimed alert row stands for."""
    stored = row.detail or {}
    return Announcement(
        key=row.key,
        kind=row.kind,
        at=row.created_at,
        text=str(stored.get("text", "")),
        to_users=tuple(stored.get("to_users", ())),
        to_channel=bool(stored.get("to_channel", False)),
        detail=stored.get("detail", {}),
    )


def deliver_pending(
    engine: Engine, announcer: Announcer, now: datetime, kind: str | None = None
) -> int:
    """Deliver every claimed, unsent alert; returns how many got through now."""
    with session_scope(engine) as session:
        pending = [from_row(row) for row in alert_queries.unsent_alerts(session=session, kind=kind)]
    delivered = 0
    for announcement in pending:
        ok = _safely(announcer.announce, announcement)
        with session_scope(engine) as session:
            if ok:
                alert_queries.mark_alert_sent(session=session, key=announcement.key, at=now)
            else:
                alert_queries.mark_alert_failed(session=session, key=announcement.key)
        delivered += ok
    return delivered


def _safely(send: Callable[[Announcement], bool], announcement: Announcement) -> bool:
    try:
        return bool(send(announcement))
    except Exception:  # an announcer's bug must not stop the others; it is retried later
        log.exception("announcing %s failed", announcement.key)
        return False
