"""The outbox: every notice is claimed once, in the transaction of the change that caused it,
and delivered until it gets through.

The scheduler never knows Slack and says no sentence: a notice is its kind and the plain
values it names, and the courier hands each due one, as an `Announcement`, to the one
`Announcer` of its medium. The bot's announcers say it from their catalogue: the console's
prints it, Slack's posts it (DMs, the channel, buttons, pictures). A sender takes a notice for a lease before sending
it, so of several paika instances one sends it; a failed sending is tried again later,
further apart each time, for up to a day. A crash between sending and marking it sent can
repeat that one notice; nothing is ever lost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import Engine

from scheduler.clock import Clock
from storage.db import session_scope
from storage.models import Notice
from storage.queries import notices as notice_queries

log = logging.getLogger(__name__)

LEASE = timedelta(minutes=2)  # a sender's hold on a notice while it sends (Slack times out first)
FIRST_RETRY = timedelta(seconds=5)  # then 10 s, 20 s … up to LONGEST_WAIT between tries
LONGEST_WAIT = timedelta(minutes=10)
GIVE_UP_AFTER = timedelta(days=1)  # a notice not delivered in a day is stale news


@dataclass(frozen=True)
class Announcement:
    """One notice, ready to deliver: to whom, and the data to render (never a sentence)."""

    key: str  # the notice's occasion key (its row in `notices`)
    kind: str  # a NoticeKind: job_started, bump_request, quota_expiry, digest …
    at: datetime  # when it was raised
    to_users: tuple[str, ...] = ()  # Slack users to DM
    to_channel: bool = False  # also post in the policy's channel (slack.channel)
    detail: Mapping[str, Any] = field(default_factory=dict)  # JSON-able data to render from
    # The English sentence a notice written by an older paika stored instead of its values;
    # such a notice is said as stored. Never set for a notice written now.
    legacy_text: str | None = None


class Announcer(Protocol):
    """Delivers announcements; True only when the delivery got through (else it is retried)."""

    def announce(self, announcement: Announcement) -> bool: ...


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
    return notice_queries.claim_notice(
        session=session,
        key=announcement.key,
        kind=announcement.kind,
        subject=str(announcement.detail.get("subject", "")),
        now=announcement.at,
        detail={
            "to_users": list(announcement.to_users),
            "to_channel": announcement.to_channel,
            "detail": dict(announcement.detail),
        },
    )


def from_row(row: Notice) -> Announcement:
    """The announcement a claimed notice row stands for."""
    stored = row.detail or {}
    legacy = stored.get("text")  # only rows written before notices carried no sentence
    return Announcement(
        key=row.key,
        kind=row.kind,
        at=row.created_at,
        to_users=tuple(stored.get("to_users", ())),
        to_channel=bool(stored.get("to_channel", False)),
        detail=stored.get("detail", {}),
        legacy_text=str(legacy) if legacy else None,
    )


def deliver_pending(
    engine: Engine,
    announcer: Announcer,
    now: datetime,
    kind: str | None = None,
    kinds: Sequence[str] | None = None,
) -> int:
    """Deliver every due notice (of `kind`, or of `kinds`); returns how many got through now.

    Each is taken for a lease first, so another sender (another paika instance, or this
    one's courier) never sends it at the same time; a failure waits longer each time."""
    wanted = [kind] if kind is not None else kinds
    with session_scope(engine) as session:
        due = [
            (from_row(row), row.attempts)
            for row in notice_queries.due_notices(
                session=session, now=now, kinds=wanted, since=now - GIVE_UP_AFTER
            )
        ]
    delivered = 0
    for announcement, failures in due:
        with session_scope(engine) as session:
            taken = notice_queries.take(
                session=session, key=announcement.key, now=now, until=now + LEASE
            )
        if not taken:
            continue  # another sender has it, or sent it meanwhile
        ok = _safely(announcer.announce, announcement)
        with session_scope(engine) as session:
            if ok:
                notice_queries.mark_sent(session=session, key=announcement.key, at=now)
            else:
                notice_queries.mark_failed(
                    session=session, key=announcement.key, retry_at=now + retry_wait(failures)
                )
        delivered += ok
    return delivered


def retry_wait(failures: int) -> timedelta:
    """How long to wait after the (failures + 1)th failed sending: doubling, capped."""
    wait: timedelta = FIRST_RETRY * (2 ** min(failures, 16))
    return min(wait, LONGEST_WAIT)


class Courier:
    """Delivers the outbox on its own thread: at once when woken (a cycle or a command has
    just written notices), and every `every_s` seconds anyway (retries, other instances'
    notices). Neither the cycle nor a command ever waits on Slack."""

    def __init__(
        self,
        engine: Engine,
        announcer: Announcer,
        clock: Clock,
        every_s: float = 5.0,
        kinds: Sequence[str] | None = None,
    ) -> None:
        self.engine, self.announcer, self.clock, self.every_s = engine, announcer, clock, every_s
        self.kinds = kinds  # None: every kind
        self._woken = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="paika-courier", daemon=True)
            self._thread.start()

    def wake(self) -> None:
        """Deliver soon: something was just written to the outbox."""
        self._woken.set()

    def stop(self) -> None:
        self._stopping.set()
        self._woken.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def deliver_now(self) -> int:
        """One delivery round, on the caller's thread; how many notices got through."""
        try:
            return deliver_pending(self.engine, self.announcer, self.clock.now(), kinds=self.kinds)
        except Exception:  # the database is away: the notices wait in the outbox
            log.exception("delivering the outbox failed; it is tried again")
            return 0

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._woken.wait(self.every_s)
            self._woken.clear()
            if not self._stopping.is_set():
                self.deliver_now()


def _safely(send: Callable[[Announcement], bool], announcement: Announcement) -> bool:
    try:
        return bool(send(announcement))
    except Exception:  # an announcer's bug must not stop the others; it is retried later
        log.exception("announcing %s failed", announcement.key)
        return False


def backlog(engine: Engine, now: datetime) -> int:
    """Notices raised and not yet delivered, leaving out those too old to be sent any more."""
    with session_scope(engine) as session:
        return notice_queries.backlog(session=session, since=now - GIVE_UP_AFTER)
