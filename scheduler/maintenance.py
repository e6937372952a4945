"""Hosts' planned maintenance windows, at every cycle (issue 32).

The policy keeps new work off a host whose window opens before the work would end
(scheduler/policy/capacity.py, `closing_before`); a host inside its window takes no job
(the snapshot's HostOut.MAINTENANCE) and takes jobs again when it ends. Here, what is left:

- the owners of jobs running there that are expected to still run when the window opens are
  told a day before and an hour before (the nearer one only, when the window is planned at
  shorter notice), each once (the notice's key);
- at its start, every job still on the host is asked to stop with its grace (stop reason
  "maintenance": a preemptible job checkpoints); once its host confirms the stop it is queued
  again (scheduler/hosts/reconcile.py, REQUEUED_STOPS) and its owner told. The window records
  that it was done (`stopped_at`, a conditional update: once, whoever runs the cycle).

One window, and one job, that fails is logged; the others go on.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from scheduler.hosts.reconcile import ACTOR
from scheduler.notices.kinds import NoticeKind
from scheduler.notices.outbox import Announcement, claim
from scheduler.policy.snapshot import HOUR, wall_hours
from scheduler.races import retrying
from storage.db import session_scope
from storage.models import Job, JobState, MaintenanceWindow
from storage.queries import audit
from storage.queries import cluster as cluster_queries
from storage.queries import maintenance as maintenance_queries

log = logging.getLogger(__name__)

KIND = NoticeKind.MAINTENANCE_AHEAD
STOP_REASON = "maintenance"  # REQUEUED_STOPS queues the job again once its host confirms
# How long before a window opens its jobs' owners are told: the day before, an hour before.
LEADS = (("hour", timedelta(hours=1)), ("day", timedelta(days=1)))
ON_HOST = (JobState.RUNNING, JobState.UNKNOWN)


def local_time(moment: datetime, zone: tzinfo) -> str:
    """A moment as the install's people read it: in its zone, with the zone's name."""
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")


def expected_end(job: Job) -> datetime | None:
    """When a running job should end by its estimate (its GPU-hours over its GPUs)."""
    if job.started_at is None:
        return None
    return job.started_at + timedelta(seconds=wall_hours(job.est_gpu_hours, job.gpus) * HOUR)


def runs_into(job: Job, starts_at: datetime, now: datetime) -> bool:
    """Whether a running job is expected to still run when a window opens at `starts_at`:
    by its estimate, or, past its estimate already, surely (its end is not known)."""
    end = expected_end(job)
    return end is None or end <= now or end > starts_at


def step(engine: Engine, now: datetime, zone: tzinfo = UTC) -> list[Announcement]:
    """Tell owners ahead of the windows, and stop what runs on hosts whose window opened."""
    with Session(engine) as session:
        windows = list(maintenance_queries.not_over(session=session, now=now))
    told: list[Announcement] = []
    for window in windows:
        try:
            if window.starts_at <= now:
                if window.stopped_at is None:
                    retrying(lambda w=window: _stop(engine, w, now), what="a maintenance stop")  # type: ignore[misc]
            else:
                told += _tell(engine, window, now, zone)
        except Exception:  # one window's trouble must not hold up the others
            log.exception("maintenance window %s of host %s failed", window.id, window.host)
    return told


def _stop(engine: Engine, window: MaintenanceWindow, now: datetime) -> list[int]:
    """Ask every job on the host to stop for the window, once; the ids asked."""
    with session_scope(engine) as session:
        if not maintenance_queries.mark_stopped(session=session, window_id=window.id or 0, at=now):
            return []  # another scheduler did it, or the window was cancelled
        asked = []
        for job in cluster_queries.jobs_on_host(session=session, host_name=window.host):
            if job.state not in ON_HOST or job.stop_requested_at is not None:
                continue  # already stopping (cancel, preemption …): that stop stands
            job.stop_requested_at = now
            job.stop_reason = STOP_REASON
            session.add(job)
            asked.append(job.id or 0)
        audit.record(
            session=session,
            at=now,
            actor=ACTOR,
            action="maintenance.start",
            target_kind="host",
            target_id=window.host,
            detail={"window": window.id, "stopped": asked},
        )
        return asked


def _tell(
    engine: Engine, window: MaintenanceWindow, now: datetime, zone: tzinfo
) -> list[Announcement]:
    """Tell the owners of jobs that would run into the window, at the nearer lead due."""
    ahead = window.starts_at - now
    due = next((name for name, lead in LEADS if ahead <= lead), None)
    if due is None:
        return []
    told = []
    with Session(engine) as session:
        jobs = [
            job.id or 0
            for job in cluster_queries.jobs_on_host(session=session, host_name=window.host)
            if job.state in ON_HOST and runs_into(job, window.starts_at, now)
        ]
    for job_id in jobs:
        try:
            notice = retrying(
                lambda j=job_id: _tell_one(engine, window, due, j, now, zone),  # type: ignore[misc]
                what="a maintenance notice",
            )
        except Exception:
            log.exception("telling the owner of job %s of maintenance failed", job_id)
            continue
        if notice is not None:
            told.append(notice)
    return told


def _tell_one(
    engine: Engine, window: MaintenanceWindow, lead: str, job_id: int, now: datetime, zone: tzinfo
) -> Announcement | None:
    with session_scope(engine) as session:
        job = session.get(Job, job_id)
        if job is None or job.state not in ON_HOST:
            return None
        detail: dict[str, Any] = {
            "subject": str(job.id),
            "job_id": job.id,
            "name": job.name,
            "owner": job.owner,
            "host": window.host,
            "window": window.id,
            # As the install's people read times: in its zone, with the zone's name.
            "starts": local_time(window.starts_at, zone),
            "ends": local_time(window.ends_at, zone),
            "reason": window.reason,
            "lead": lead,
            "preemptible": bool(job.preemptible),
        }
        notice = Announcement(
            key=f"maintenance:{window.id}:{lead}:{job.id}",
            kind=KIND,
            at=now,
            to_users=(job.owner,),
            detail=detail,
        )
        return notice if claim(session, notice) else None
