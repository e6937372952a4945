"""Runs that outlast their estimate: the owner is told once, and a hard limit stops them.

A run's estimate, as wall time, is its GPU-hours ÷ its GPUs (as the snapshot reads it).

1. `check_overrun`: a running job past estimate × `estimates.overrun_factor` gets its owner
   one DM (`overrun:<job id>:<attempt>:<moment>`), with Extend and Stop; the job's
   `overrun_warned_at` is set in the same transaction, so it is told once per estimate.
2. Answers (`answer_overrun`, first answer wins; the owner, their team's approvers or an
   admin): Extend makes the estimate the time run so far × the factor (so the new estimate
   can warn once more: `overrun_warned_at` clears); Stop is the owner's cancel.
3. `enforce_limits`: where `estimates.hard_limit` names the job's class, a run past
   estimate × that factor is stopped (stop reason `estimate_limit`; the cycle sends the
   stop, its host confirms it, the job ends cancelled with that reason and its owner is told).

Each job is one transaction of its own: one that fails is logged and the others go on.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from scheduler.alerts.answers import answering
from scheduler.config import PolicyConfig
from scheduler.hosts.reconcile import ACTOR
from scheduler.notices.kinds import NoticeKind
from scheduler.notices.outbox import Announcement, claim
from scheduler.policy.snapshot import wall_hours
from scheduler.races import on_race, retrying
from storage.db import session_scope
from storage.models import Job, JobState
from storage.queries import audit
from storage.queries import jobs as job_queries
from storage.queries import notices as notice_queries

log = logging.getLogger(__name__)

KIND = NoticeKind.JOB_OVERRUN
EXTEND = "extend"
STOP = "stop"
ENDED = "ended"  # the run had ended, or was being stopped, when the answer came
ANSWERS = (EXTEND, STOP)
# The stop a hard limit asks of the host; the reconcile ends the job cancelled with it.
LIMIT_STOP = "estimate_limit"
# Paika's own stops, which an owner's Stop or a hard limit may take over ("slowed": the
# opportunistic job of a pair on a shared card, scheduler/share_watch.py).
OWN_STOPS = ("preempt", "reclaim", "release", "slowed", "maintenance")


def estimated_hours(job: Job) -> float:
    """The run's estimate as wall time: its GPU-hours spread over its GPUs."""
    return wall_hours(job.est_gpu_hours, job.gpus)


def elapsed_hours(job: Job, now: datetime) -> float:
    """Wall time the current run has had so far."""
    if job.started_at is None:
        return 0.0
    return max(0.0, (now - _aware(job.started_at, now)).total_seconds() / 3600)


def _aware(moment: datetime, like: datetime) -> datetime:
    return moment.replace(tzinfo=like.tzinfo) if moment.tzinfo is None else moment


def warned(job: Job) -> bool:
    """Whether the owner was told of this run's overrun (a notice about an earlier run of a
    requeued job does not count: each run starts afresh)."""
    told, started = job.overrun_warned_at, job.started_at
    return told is not None and (started is None or told >= _aware(started, told))


def hard_limit(policy: PolicyConfig, job: Job) -> float | None:
    """The factor of its estimate after which the job is stopped, if its class has one."""
    return next(
        (factor for name, factor in policy.estimates.hard_limit.items() if name == job.priority),
        None,
    )


def _running(session: Session) -> list[Job]:
    return [
        job
        for job in job_queries.jobs_in_states(session=session, states=(JobState.RUNNING,))
        if job.started_at is not None and job.est_gpu_hours > 0
    ]


# ---------------------------------------------------------------- 1. telling


def check_overrun(engine: Engine, policy: PolicyConfig, now: datetime) -> list[Announcement]:
    """Tell the owner of each run newly past its estimate × the overrun factor (once)."""
    factor = policy.estimates.overrun_factor
    if factor is None:
        return []
    with session_scope(engine) as session:
        due = [
            job.id or 0
            for job in _running(session)
            if not warned(job)
            and job.stop_requested_at is None
            and elapsed_hours(job, now) > estimated_hours(job) * factor
        ]
    told = []
    for job_id in due:
        try:
            notice = retrying(lambda j=job_id: _tell(engine, policy, now, j), what="overrun notice")  # type: ignore[misc]
        except Exception:  # one job's trouble must not keep the others' owners untold
            log.exception("telling the owner of job %s of its overrun failed", job_id)
            continue
        if notice is not None:
            told.append(notice)
    return told


def _tell(engine: Engine, policy: PolicyConfig, now: datetime, job_id: int) -> Announcement | None:
    factor = policy.estimates.overrun_factor or 1.0
    with session_scope(engine) as session:
        job = job_queries.get_job(session=session, job_id=job_id)
        # Read again in this transaction: the run may have ended or been extended meanwhile.
        if (
            job is None
            or job.state != JobState.RUNNING
            or warned(job)
            or job.stop_requested_at is not None
            or elapsed_hours(job, now) <= estimated_hours(job) * factor
        ):
            return None
        job.overrun_warned_at = now  # the job's version makes this conditional
        session.add(job)
        notice = _notice(policy, job, now, factor)
        if not claim(session, notice):
            return None
        audit.record(
            session=session,
            at=now,
            actor=ACTOR,
            action="job.overrun_told",
            target_kind="job",
            target_id=job.id,
            detail={"alert": notice.key, "elapsed_hours": notice.detail["elapsed_hours"]},
        )
        return notice


def _notice(policy: PolicyConfig, job: Job, now: datetime, factor: float) -> Announcement:
    elapsed = elapsed_hours(job, now)
    limit = hard_limit(policy, job)
    detail: dict[str, Any] = {
        "subject": str(job.id),
        "job_id": job.id,
        "name": job.name,
        "owner": job.owner,
        "priority": job.priority,
        "attempt": job.attempts,
        "gpus": job.gpus,
        "est_gpu_hours": job.est_gpu_hours,
        "estimate_hours": estimated_hours(job),
        "elapsed_hours": elapsed,
        "factor": factor,
        "extend_to_hours": extended_hours(job, elapsed, factor),
        "limit_hours": estimated_hours(job) * limit if limit is not None else None,
    }
    return Announcement(
        key=f"overrun:{job.id}:{job.attempts}:{int(now.timestamp())}",
        kind=KIND,
        at=now,
        to_users=(job.owner,),
        detail=detail,
    )


def extended_hours(job: Job, elapsed: float, factor: float) -> float:
    """Extend's rule: the estimate becomes the time run so far × the overrun factor (never
    less than it was), so the run is told again only if it outlasts that by the factor too."""
    return max(estimated_hours(job), elapsed * factor)


# ---------------------------------------------------------------- 2. answers


@dataclass(frozen=True)
class OverrunAnswer:
    """What a click on Extend / Stop did, and the notice to redraw."""

    known: bool  # the key names an overrun notice
    allowed: bool = False  # the clicker is the owner, an approver of its team or an admin
    changed: bool = False  # this click recorded the answer (first wins)
    answer: str | None = None  # the answer that holds
    answered_by: str | None = None
    answered_at: datetime | None = None
    notice: Announcement | None = None
    estimate_hours: float | None = None  # after Extend: the new estimate (wall time)


@on_race("an overrun answer")
def answer_overrun(
    engine: Engine,
    policy: PolicyConfig,
    admins: Collection[str],
    key: str,
    answer: str,
    user_id: str,
    now: datetime,
) -> OverrunAnswer:
    """Record the answer to an overrun notice (first wins) and act on it."""
    if answer not in ANSWERS:
        raise ValueError(f"unknown answer {answer!r}")
    with session_scope(engine) as session:
        found = answering(session, key, KIND, user_id, admins)
        row, notice, job = found.row, found.notice, found.job
        if row is None or notice is None:
            return OverrunAnswer(known=False)
        if not found.allowed:
            return OverrunAnswer(True, notice=notice)
        if row.answered_at is not None:
            return OverrunAnswer(
                True, True, False, row.answer, row.answered_by, row.answered_at, notice
            )
        same_run = (
            job is not None
            and job.state == JobState.RUNNING
            and job.attempts == notice.detail.get("attempt")
            and (job.stop_requested_at is None or job.stop_reason in OWN_STOPS)
        )
        if job is None or not same_run:
            notice_queries.answer_notice(session=session, key=key, answer=ENDED, by=user_id, at=now)
            return OverrunAnswer(True, True, False, ENDED, user_id, now, notice)
        notice_queries.answer_notice(session=session, key=key, answer=answer, by=user_id, at=now)
        new_estimate = None
        if answer == EXTEND:
            new_estimate = _extend(policy, job, now)
        else:
            job.stop_requested_at = now
            job.stop_reason = "cancel"  # as the owner's own cancel
        session.add(job)
        audit.record(
            session=session,
            at=now,
            actor=user_id,
            action="job.estimate_extended" if answer == EXTEND else "job.cancel",
            target_kind="job",
            target_id=job.id,
            detail={"alert": key, "answer": answer, "est_gpu_hours": job.est_gpu_hours}
            | ({} if answer == EXTEND else {"reason": "ran past its estimate"}),
        )
        return OverrunAnswer(True, True, True, answer, user_id, now, notice, new_estimate)


def _extend(policy: PolicyConfig, job: Job, now: datetime) -> float:
    """Grow the estimate by Extend's rule (within the policy's per-job bound); the new
    estimate may warn once more."""
    factor = policy.estimates.overrun_factor or 1.0
    hours = extended_hours(job, elapsed_hours(job, now), factor)
    gpu_hours = min(hours * max(1, job.gpus), policy.limits.max_hours_per_job)
    job.est_gpu_hours = max(job.est_gpu_hours, gpu_hours)
    job.overrun_warned_at = None
    return estimated_hours(job)


# ---------------------------------------------------------------- 3. the hard limit


def enforce_limits(engine: Engine, policy: PolicyConfig, now: datetime) -> list[int]:
    """Stop each run past estimate × its class's hard limit; the ids of those stopped now.

    The stop is recorded on the job; the cycle sends it to the host (as for a cancel)."""
    limits = policy.estimates.hard_limit
    if not limits:
        return []
    with session_scope(engine) as session:
        due = [job.id or 0 for job in _running(session) if _past_limit(policy, job, now)]
    stopped = []
    for job_id in due:
        try:
            if retrying(lambda j=job_id: _stop(engine, policy, now, j), what="estimate limit"):  # type: ignore[misc]
                stopped.append(job_id)
        except Exception:  # one job's trouble must not keep the others running on
            log.exception("stopping job %s at its estimate's hard limit failed", job_id)
    return stopped


def _past_limit(policy: PolicyConfig, job: Job, now: datetime) -> bool:
    limit = hard_limit(policy, job)
    return (
        limit is not None
        and (job.stop_requested_at is None or job.stop_reason in OWN_STOPS)
        and elapsed_hours(job, now) > estimated_hours(job) * limit
    )


def _stop(engine: Engine, policy: PolicyConfig, now: datetime, job_id: int) -> bool:
    with session_scope(engine) as session:
        job = job_queries.get_job(session=session, job_id=job_id)
        if job is None or job.state != JobState.RUNNING or not _past_limit(policy, job, now):
            return False
        if job.stop_requested_at is None:
            job.stop_requested_at = now
        job.stop_reason = LIMIT_STOP
        session.add(job)
        limit = hard_limit(policy, job) or 0.0
        audit.record(
            session=session,
            at=now,
            actor=ACTOR,
            action="job.estimate_limit",
            target_kind="job",
            target_id=job.id,
            detail={
                "hard_limit": limit,
                "estimate_hours": estimated_hours(job),
                "elapsed_hours": elapsed_hours(job, now),
                "stopped_after": str(timedelta(hours=estimated_hours(job) * limit)),
            },
        )
        return True
