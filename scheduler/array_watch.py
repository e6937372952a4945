"""Arrays (count=, sweep=, issue 32) at every cycle: their owner is told once when every job
of an array has ended, with how many succeeded, failed or were cancelled, instead of a
message per job (scheduler/notices/events.py keeps their own starts and ends quiet).

The array's first job keeps when its owner was told (`array_told_at`, set under the job's
version, so two schedulers tell once); one array that fails is logged and the others go on.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from scheduler.hosts.reconcile import ACTOR
from scheduler.notices.kinds import NoticeKind
from scheduler.notices.outbox import Announcement, claim
from scheduler.races import retrying
from storage.db import session_scope
from storage.models import TERMINAL_STATES, JobState
from storage.queries import audit
from storage.queries import jobs as job_queries

log = logging.getLogger(__name__)

KIND = NoticeKind.ARRAY_ENDED
NAMED = 10  # the failed jobs a notice names; the rest are counted


def step(engine: Engine, now: datetime) -> list[Announcement]:
    """Tell the owner of each array that has just ended, once."""
    with Session(engine) as session:
        ended = list(job_queries.arrays_ended_untold(session=session))
    told = []
    for array_id in ended:
        try:
            notice = retrying(lambda a=array_id: _tell(engine, now, a), what="an array's end")  # type: ignore[misc]
        except Exception:  # one array's trouble must not keep the others' owners untold
            log.exception("telling the end of array %s failed", array_id)
            continue
        if notice is not None:
            told.append(notice)
    return told


def _tell(engine: Engine, now: datetime, array_id: int) -> Announcement | None:
    with session_scope(engine) as session:
        jobs = list(job_queries.array_jobs(session=session, array_id=array_id))
        head = next((job for job in jobs if job.id == array_id), None)
        if head is None or head.array_told_at is not None:
            return None
        if any(job.state not in TERMINAL_STATES for job in jobs):
            return None  # one was queued again meanwhile
        head.array_told_at = now  # under the job's version: a second writer fails here
        session.add(head)
        counts = Counter(job.state for job in jobs)
        failed = [f"#{array_id}.{job.array_index}" for job in jobs if job.state == JobState.FAILED]
        detail: dict[str, Any] = {
            "subject": str(array_id),
            "array_id": array_id,
            "name": head.name.rsplit(".", 1)[0],
            "owner": head.owner,
            "size": len(jobs),
            "succeeded": counts[JobState.SUCCEEDED],
            "failed": counts[JobState.FAILED],
            "cancelled": counts[JobState.CANCELLED],
            "failed_jobs": failed[:NAMED],
        }
        notice = Announcement(
            key=f"array:{array_id}:ended", kind=KIND, at=now, to_users=(head.owner,), detail=detail
        )
        if not claim(session, notice):
            return None
        audit.record(
            session=session,
            at=now,
            actor=ACTOR,
            action="array.ended_told",
            target_kind="job",
            target_id=array_id,
            detail={"succeeded": detail["succeeded"], "failed": detail["failed"]},
        )
        return notice
