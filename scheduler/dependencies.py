"""Jobs that wait for other jobs (issue 32): settled at every cycle, before the policy runs.

A dependency (storage/models/jobs.py, JobDependency) waits until its upstream job ends:
- the upstream succeeded, or it ended at all and the dependency is `afterany=`: MET. One that
  made the dependant's data (`data=after:#12`) marks its data ready once every such job has
  succeeded, which queues it (WAITING_DATA → QUEUED, its history says which job made it);
- the upstream failed or was cancelled and the dependency asked for its success: BROKEN. The
  dependant is held (the policy's UPSTREAM_FAILED wait) and its owner is told once, with
  buttons to cancel it or release it anyway (`/gpu release` on the console).

Each row is settled in a transaction of its own by a conditional update (a row moves only
from WAITING, so two schedulers, or a cycle and a release, never settle it twice); one row
that fails is logged and the others go on. A scheduler killed between two rows settles the
rest at its next cycle: the rows, not memory, say what is left.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from scheduler import lifecycle
from scheduler.hosts.reconcile import ACTOR
from scheduler.notices.kinds import NoticeKind
from scheduler.notices.outbox import Announcement, claim
from scheduler.policy.reasons import Reason, ReasonCode
from scheduler.races import retrying
from storage.db import session_scope
from storage.models import TERMINAL_STATES, Job, JobDependency, JobState
from storage.models.jobs import DependencyKind, DependencyState
from storage.queries import audit
from storage.queries import dependencies as dependency_queries
from storage.queries import jobs as job_queries

log = logging.getLogger(__name__)

KIND = NoticeKind.JOB_UPSTREAM_FAILED
NEVER_SUCCEEDS = (JobState.FAILED, JobState.CANCELLED)
ENDED = TERMINAL_STATES
# The states a dependant waits in: one that has ended or runs needs nothing settled.
WAITING = (JobState.QUEUED, JobState.WAITING_DATA, JobState.PREEMPTED)


@dataclass
class Settled:
    """What one pass over the dependencies did."""

    met: list[int]  # dependency ids met
    broken: list[int]  # dependency ids broken
    told: list[Announcement]  # owners told that a job their job waits for failed


def settle(engine: Engine, now: datetime) -> Settled:
    """Settle every dependency whose upstream job has ended, then tell the owners of jobs
    newly held (once per job)."""
    done = Settled([], [], [])
    with Session(engine) as session:
        due = [
            (row.id or 0, upstream_state)
            for row, upstream_state in dependency_queries.due(session=session, ended=ENDED)
        ]
    for dependency_id, upstream_state in due:
        try:
            state = retrying(
                lambda d=dependency_id, u=upstream_state: _settle_one(engine, now, d, u),  # type: ignore[misc]
                what="a job dependency",
            )
        except Exception:  # one row's trouble must not hold up the others
            log.exception("settling job dependency %s failed", dependency_id)
            continue
        if state == DependencyState.MET:
            done.met.append(dependency_id)
        elif state == DependencyState.BROKEN:
            done.broken.append(dependency_id)
    with Session(engine) as session:
        untold = sorted({row.job_id for row in dependency_queries.untold_broken(session=session)})
    for job_id in untold:
        try:
            notice = retrying(lambda j=job_id: _tell(engine, now, j), what="a held job's notice")  # type: ignore[misc]
        except Exception:
            log.exception("telling the owner of job %s that it is held failed", job_id)
            continue
        if notice is not None:
            done.told.append(notice)
    return done


def _settle_one(engine: Engine, now: datetime, dependency_id: int, upstream: str) -> str | None:
    """One dependency, in its own transaction: MET or BROKEN, or None when another writer
    settled it first."""
    with session_scope(engine) as session:
        row = session.get(JobDependency, dependency_id)
        if row is None or row.state != DependencyState.WAITING:
            return None
        met = upstream == JobState.SUCCEEDED or row.kind == DependencyKind.END
        state = DependencyState.MET if met else DependencyState.BROKEN
        if not dependency_queries.settle(
            session=session,
            dependency_id=dependency_id,
            was=(DependencyState.WAITING,),
            now=state,
            at=now,
        ):
            return None
        job = job_queries.get_job(session=session, job_id=row.job_id)
        if job is None or job.state not in WAITING:
            # Nothing waits any more (cancelled meanwhile): nobody to tell.
            dependency_queries.told(session=session, job_id=row.job_id, at=now)
            return state
        if met and row.kind == DependencyKind.DATA and data_waits_over(session, job):
            make_data_ready(
                session,
                job,
                now,
                ACTOR,
                Reason(ReasonCode.DATA_FROM_JOB, {"upstream": row.upstream_id}),
            )
        return state


def data_waits_over(session: Session, job: Job) -> bool:
    """Whether none of the job's data dependencies is still unmet."""
    return not dependency_queries.waits_for_data(session=session, job_id=job.id or 0)


def make_data_ready(session: Session, job: Job, now: datetime, actor: str, reason: Reason) -> None:
    """Mark a job's data ready (another job made it, or someone released it) and queue it."""
    if job.data_ready:
        return
    job.data_ready = True
    job.data_ready_at = now
    if job.state == JobState.WAITING_DATA:
        lifecycle.move(session, job, JobState.QUEUED, at=now, actor=actor, reason=reason)
    session.add(job)


def _tell(engine: Engine, now: datetime, job_id: int) -> Announcement | None:
    """Tell the owner of a held job, once: which job it waits for failed, and what to do."""
    with session_scope(engine) as session:
        job = job_queries.get_job(session=session, job_id=job_id)
        broken = [
            row
            for row in dependency_queries.of_job(session=session, job_id=job_id)
            if row.state == DependencyState.BROKEN and row.told_at is None
        ]
        if not broken or not dependency_queries.told(session=session, job_id=job_id, at=now):
            return None
        if job is None or job.state not in WAITING:
            return None
        upstream = job_queries.get_job(session=session, job_id=broken[0].upstream_id)
        notice = _notice(job, upstream, broken[0].upstream_id, now)
        if not claim(session, notice):
            return None
        audit.record(
            session=session,
            at=now,
            actor=ACTOR,
            action="job.held_for_upstream",
            target_kind="job",
            target_id=job.id,
            detail={"upstream": broken[0].upstream_id, "notice": notice.key},
        )
        return notice


def _notice(job: Job, upstream: Job | None, upstream_id: int, now: datetime) -> Announcement:
    detail: dict[str, Any] = {
        "subject": str(job.id),
        "job_id": job.id,
        "name": job.name,
        "owner": job.owner,
        "upstream": upstream_id,
        "upstream_name": upstream.name if upstream is not None else "?",
        "upstream_state": upstream.state if upstream is not None else JobState.FAILED,
    }
    return Announcement(
        key=f"upstream:{job.id}:{upstream_id}",
        kind=KIND,
        at=now,
        to_users=(job.owner,),
        detail=detail,
    )
