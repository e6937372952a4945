"""Job and host events: what the cycle tells people, through the outbox.

An event is recorded in the outbox (`record`) in the same transaction as the change it
reports, so a crash or a Slack outage never loses it; the courier delivers it to the job's
owner (job events) or the channel (hosts down and back). Observers see each event once the
cycle is over: tests, and the demo's summary; they tell nobody.

An event carries no sentence: its kind, a code for what happened (`EventCode`) and the plain
values that sentence names (the job's name, hosts, an exit code, minutes). The bot says it
from its catalogue, in the reader's language.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from scheduler.notices.kinds import EVENT_KINDS, NoticeKind
from scheduler.notices.outbox import Announcement, claim
from storage.models import Job

log = logging.getLogger(__name__)


# Events are notices of the job and host kinds (EVENT_KINDS) of the one list of kinds.
EventKind = NoticeKind


class EventCode(StrEnum):
    """What happened, beside the event's kind; the values each code names are listed."""

    STARTED = "started"  # hosts, gpus, gpu_type (gpus and gpu_type absent on a resent start)
    START_CONFIRMED = "start_confirmed"  # a start whose answer was lost did start
    START_REFUSED = "start_refused"  # problem: the host's own words on why
    START_FAILED = "start_failed"  # host, problem; it is queued again
    PREEMPT_ASKED = "preempt_asked"  # minutes (to checkpoint), for_job (the core job)
    HOST_ANSWERS = "host_answers"  # its host answers again and still runs it
    HOST_SILENT = "host_silent"  # minutes its host has been silent; it keeps its GPUs
    LOST = "lost"  # why (LostWhy), hours (host_gave_up), attempts: it failed
    LOST_REQUEUED = "lost_requeued"  # why (LostWhy), hours, minutes, reason: queued again
    STOPPED_UNSTARTED = "stopped_unstarted"  # state: stopped before it ever ran
    STOPPED_REQUEUED = "stopped_requeued"  # stop: preempt or reclaim; queued again
    STOPPED = "stopped"  # stop: cancel, release or done
    FINISHED = "finished"  # exited with 0
    FAILED = "failed"  # exit_code
    KILLED = "killed"  # killed on its host
    REPORTED_FAILED = "reported_failed"  # exited with 0, but the job reported status=failed
    # Settling the job raised (error: what, shortened; owner, attempt), told to the admins
    # once per run; kept to this job, which ends once its run is gone (UNSETTLED_ENDED)
    UNSETTLED = "unsettled"
    UNSETTLED_ENDED = "unsettled_ended"  # state, error: its run is gone, its GPUs given back
    # host, refusal (a RefusalCode), account: a host refused its start for a reason that
    # will not change by itself; it waits, not sent there again until something changes
    START_HELD = "start_held"
    # On a shared card job #slowed ran at sm_pct % SM busy, lost_pct % below its alone_pct %
    # alone, beside job #by for `minutes` (card: host/index); job #stopped was stopped and
    # queued again, and the two are kept apart. Told to both owners (JOB_KEPT_APART).
    SHARE_SLOWED = "share_slowed"
    HOST_BACK = "host_back"
    HOST_DOWN = "host_down"  # error: why the last poll failed


_CODES = frozenset(code.value for code in EventCode)


class LostWhy(StrEnum):
    """Why a run is gone from its host."""

    NEVER_TOOK_START = "never_took_start"
    AGENT_LOST = "agent_lost"  # the agent restarted without it
    HOST_GAVE_UP = "host_gave_up"  # its host did not answer for `hours`
    NODE_FAILED = "node_failed"  # its executor (Slurm) ended it: its node failed
    EXECUTOR_PREEMPTED = "executor_preempted"  # its executor (Slurm) preempted it
    # Its executor (Slurm) held it pending past `minutes` (for `reason`): cancelled, it never ran.
    PENDING_TOO_LONG = "pending_too_long"


@dataclass(frozen=True)
class Event:
    """One thing worth telling someone: what, when, about which job or host, to whom, and
    the values the telling names (in `detail`, JSON-able)."""

    kind: NoticeKind
    at: datetime
    code: EventCode | None  # None only for a notice written before events carried codes
    job_id: int | None = None
    name: str | None = None  # the job's name, for job events
    host: str | None = None
    owner: str | None = None  # the Slack user to tell, for job events
    detail: Mapping[str, object] = field(default_factory=dict)


HOST_KINDS = frozenset({EventKind.HOST_DOWN, EventKind.HOST_UP})
# Told in the channel, where the admins hear it: hosts, and jobs that need an admin.
CHANNEL_KINDS = HOST_KINDS | {EventKind.JOB_UNSETTLED, EventKind.JOB_HELD}


def record(session: Any, event: Event) -> Event:
    """Put `event` in the outbox, in the caller's transaction (the one making the change).
    A job of an array tells nothing of its own start and end: its owner hears once, when
    the whole array has ended (scheduler/array_watch.py); observers still see the event."""
    if event.kind in ARRAY_QUIET and event.job_id is not None and _in_array(session, event):
        return event
    claim(session, announcement_of(event))
    return event


# What a job of an array does not tell on its own (one notice says the whole array's end).
ARRAY_QUIET = frozenset({NoticeKind.JOB_STARTED, NoticeKind.JOB_FINISHED, NoticeKind.JOB_FAILED})


def _in_array(session: Any, event: Event) -> bool:
    job = session.get(Job, event.job_id)
    return job is not None and job.array_id is not None


def announcement_of(event: Event) -> Announcement:
    """The notice an event becomes: to the job's owner (when it names one) and, for hosts and
    jobs that need an admin, to the channel."""
    subject = f"job:{event.job_id}" if event.job_id is not None else f"host:{event.host}"
    return Announcement(
        # One occasion per event: the same kind can happen to a job again (another attempt).
        key=f"{event.kind.value}:{subject}:{uuid.uuid4().hex}",
        kind=event.kind.value,
        at=event.at,
        to_users=(event.owner,) if event.owner else (),
        to_channel=event.kind in CHANNEL_KINDS,
        detail={
            "subject": subject,
            "job_id": event.job_id,
            "host": event.host,
            "event": {
                **event.detail,
                "code": event.code.value if event.code else None,
                "name": event.name,
            },
        },
    )


def event_of(announcement: Announcement) -> Event:
    """The event a notice was made from (for rendering it)."""
    detail = announcement.detail
    job_id = detail.get("job_id")
    values = dict(detail.get("event") or {})
    code = values.pop("code", None)
    name = values.pop("name", None)
    return Event(
        EventKind(announcement.kind),
        announcement.at,
        EventCode(code) if code in _CODES else None,
        int(job_id) if job_id is not None else None,
        name=str(name) if name is not None else None,
        host=detail.get("host"),
        owner=announcement.to_users[0] if announcement.to_users else None,
        detail=values,
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
        # A job's event names its host in its detail; say it either way, and leave out what
        # the event does not have rather than print "None".
        hosts = event.detail.get("hosts")
        listed = ", ".join(map(str, hosts)) if isinstance(hosts, list | tuple) else None
        host = event.host or event.detail.get("host") or listed
        fields = {"job_id": event.job_id, "host": host, "event": event.kind.value}
        extra = {key: value for key, value in fields.items() if value is not None}
        said = [event.kind.value + (f" ({event.code.value})" if event.code else "")]
        if event.job_id is not None:
            said.append(f"job #{event.job_id}" + (f" {event.name}" if event.name else ""))
        if host:
            said.append(f"on {host}")
        rest = {key: value for key, value in event.detail.items() if key not in ("host", "hosts")}
        log.info("%s%s", " ".join(said), f" {rest}" if rest else "", extra=extra)


class RecordingObserver:
    """Keeps events in a list (tests, the demo's summary)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def notify(self, event: Event) -> None:
        self.events.append(event)

    def kinds(self) -> list[EventKind]:
        return [event.kind for event in self.events]
