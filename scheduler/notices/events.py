"""Job and host events: what the cycle tells people, through the outbox.

An event is recorded in the outbox (`record`) in the same transaction as the change it
reports, so a crash or a Slack outage never loses it; the courier delivers it to the job's
owner (job events) or the channel (hosts down and back). Observers see each event once the
cycle is over: tests, and the demo's summary; they tell nobody.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from scheduler.notices.kinds import EVENT_KINDS, NoticeKind
from scheduler.notices.outbox import Announcement, claim

log = logging.getLogger(__name__)


# Events are notices of the job and host kinds (EVENT_KINDS) of the one list of kinds.
EventKind = NoticeKind


@dataclass(frozen=True)
class Event:
    """One thing worth telling someone: what, when, about which job or host, to whom."""

    kind: NoticeKind
    at: datetime
    text: str
    job_id: int | None = None
    host: str | None = None
    owner: str | None = None  # the Slack user to tell, for job events
    detail: dict[str, object] = field(default_factory=dict)


HOST_KINDS = frozenset({EventKind.HOST_DOWN, EventKind.HOST_UP})


def record(session: Any, event: Event) -> Event:
    """Put `event` in the outbox, in the caller's transaction (the one making the change)."""
    claim(session, announcement_of(event))
    return event


def announcement_of(event: Event) -> Announcement:
    """The notice an event becomes: to the job's owner, or (hosts) to the channel."""
    subject = f"job:{event.job_id}" if event.job_id is not None else f"host:{event.host}"
    return Announcement(
        # One occasion per event: the same kind can happen to a job again (another attempt).
        key=f"{event.kind.value}:{subject}:{uuid.uuid4().hex}",
        kind=event.kind.value,
        at=event.at,
        text=event.text,
        to_users=(event.owner,) if event.owner else (),
        to_channel=event.kind in HOST_KINDS,
        detail={
            "subject": subject,
            "job_id": event.job_id,
            "host": event.host,
            "event": dict(event.detail),
        },
    )


def event_of(announcement: Announcement) -> Event:
    """The event a notice was made from (for rendering it)."""
    detail = announcement.detail
    job_id = detail.get("job_id")
    return Event(
        EventKind(announcement.kind),
        announcement.at,
        announcement.text,
        int(job_id) if job_id is not None else None,
        host=detail.get("host"),
        owner=announcement.to_users[0] if announcement.to_users else None,
        detail=dict(detail.get("event") or {}),
    )


def is_event(kind: str) -> bool:
    """Whether a notice of `kind` is a job or host event."""
    return kind in EVENT_KINDS


class Observer(Protocol):
    """Anything that watches the cycle's events after it (tests, the demo's summary)."""

    def notify(self, event: Event) -> None: ...


class LoggingObserver:
    """Logs each event (`paika up`: people hear of it through the outbox), with its job and
    host as fields of the record, so JSON logs can be searched by them."""

    def notify(self, event: Event) -> None:
        fields = {"job_id": event.job_id, "host": event.host, "event": event.kind.value}
        extra = {key: value for key, value in fields.items() if value is not None}
        log.info("%s: %s", event.kind.value, event.text, extra=extra)


class RecordingObserver:
    """Keeps events in a list (tests, the demo's summary)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def notify(self, event: Event) -> None:
        self.events.append(event)

    def kinds(self) -> list[EventKind]:
        return [event.kind for event in self.events]
