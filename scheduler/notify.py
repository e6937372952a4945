"""Events the scheduler reports, and the notifier interface that carries them.

The scheduler never knows Slack: it hands events to a Notifier. The console notifier
prints them (the demo, `paika up` without Slack); the bot implements the same interface.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol, TextIO


class EventKind(StrEnum):
    """What happened."""

    JOB_STARTED = "job_started"
    JOB_FINISHED = "job_finished"
    JOB_FAILED = "job_failed"
    JOB_LOST = "job_lost"
    JOB_UNKNOWN = "job_unknown"  # its host stopped answering; it keeps its GPUs
    JOB_RESUMED = "job_resumed"  # its host answers again and still runs it
    JOB_PREEMPTED = "job_preempted"
    JOB_REQUEUED = "job_requeued"
    HOST_DOWN = "host_down"
    HOST_UP = "host_up"


@dataclass(frozen=True)
class Event:
    """One thing worth telling someone: what, when, about which job or host, to whom."""

    kind: EventKind
    at: datetime
    text: str
    job_id: int | None = None
    host: str | None = None
    owner: str | None = None  # the Slack user to tell, for job events
    detail: dict[str, object] = field(default_factory=dict)


class Notifier(Protocol):
    """Anything that can carry events to people."""

    def notify(self, event: Event) -> None: ...


class ConsoleNotifier:
    """Prints each event as one line."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout

    def notify(self, event: Event) -> None:
        to = f" → <@{event.owner}>" if event.owner else ""
        print(
            f"[{event.at:%H:%M:%S}] {event.kind.value}: {event.text}{to}",
            file=self.stream,
            flush=True,
        )


class RecordingNotifier:
    """Keeps events in a list (tests, the demo's summary)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def notify(self, event: Event) -> None:
        self.events.append(event)

    def kinds(self) -> list[EventKind]:
        return [event.kind for event in self.events]


class FanOut:
    """Sends each event to several notifiers."""

    def __init__(self, *notifiers: Notifier) -> None:
        self.notifiers = notifiers

    def notify(self, event: Event) -> None:
        for notifier in self.notifiers:
            notifier.notify(event)
