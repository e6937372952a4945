"""Reconciling what the database thinks runs with what the agents report.

For each job the database has running:
- its agent reports it running: all is well;
- it ended there: exit 0 → succeeded, else failed; if paika had asked it to stop, the reason
  decides (preempted and requeued, cancelled, done);
- its host does not answer, or answers without it: it is missing; if its agent answers and
  the job started recently, the start is sent again (agents start a job id only once);
  after `lost_after_seconds` missing it is lost (failed, with the reason).
Ending a job closes its allocations and writes their ledger entries in the same transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlmodel import Session

from scheduler import lifecycle
from scheduler.config import PolicyConfig
from scheduler.dispatch import agent_job_id
from scheduler.hosts.report import AgentJobState, HostReport
from scheduler.notify import Event, EventKind
from scheduler.service.ledger import close_allocations_at
from storage.models import Job, JobState
from storage.queries import cluster as cluster_queries
from storage.queries import jobs as job_queries

ACTOR = "scheduler"

# Why paika asked a run to stop → what happens when its host confirms the stop.
# Requeued: the job goes back to the queue (an idle-class job stopped for core work, or a
# job whose GPUs sat idle); ended: the job ends in that state.
REQUEUED_STOPS = {"preempt": "for core work", "reclaim": "its GPUs sat idle"}
ENDING_STOPS = {
    "cancel": (JobState.CANCELLED, "cancelled"),
    "release": (JobState.CANCELLED, "released: its GPUs sat idle"),
    "done": (JobState.SUCCEEDED, "marked done"),
}


@dataclass
class Reconciliation:
    """What reconciling found: events to tell, starts to send again, stops to send."""

    events: list[Event] = field(default_factory=list)
    resend: list[int] = field(default_factory=list)  # job ids whose start the agent never got
    stops: list[int] = field(default_factory=list)  # job ids paika asked to stop, still running
    orphans: list[tuple[str, str]] = field(
        default_factory=list
    )  # (host, agent job id) paika no longer runs


def reconcile(
    session: Session, policy: PolicyConfig, reports: Mapping[str, HostReport], now: datetime
) -> Reconciliation:
    """Bring every running job's state in line with its host's report."""
    found = Reconciliation()
    hosts = {host.id: host.name for host in cluster_queries.host_rows(session=session)}
    host_of_gpu = {
        gpu_id: hosts.get(host_id) for gpu_id, host_id in cluster_queries.gpu_hosts(session=session)
    }
    first_gpu: dict[int, int] = {}
    for held, job_id in sorted(cluster_queries.holder_ids(session=session).items()):
        first_gpu.setdefault(job_id, held)
    running_here: dict[str, set[str]] = {}
    # Plain rows for every running job; a Job object only for the few that change.
    for row in job_queries.running_rows(session=session):
        gpu_id = first_gpu.get(row.id)
        host = host_of_gpu.get(gpu_id) if gpu_id is not None else None
        run = agent_job_id(row.id, row.attempts)
        running_here.setdefault(host or "", set()).add(run)
        report = reports.get(host or "")
        known = report.jobs.get(run) if report is not None and report.ok else None
        if known is not None and known.state == "running":
            if row.missing_since is not None:
                job = _job(session, row.id)
                job.missing_since = None
                session.add(job)
            if row.stop_requested_at is not None:
                found.stops.append(row.id)
        elif known is None or known.state == "lost":
            _missing(session, policy, _job(session, row.id), report, known, now, found)
        else:
            _ended(session, policy, _job(session, row.id), known, now, found)
    for name, report in reports.items():
        if report.ok:
            mine = running_here.get(name, set())
            found.orphans += [
                (name, job_id)
                for job_id, j in report.jobs.items()
                if j.state == "running" and job_id not in mine
            ]
    return found


def _job(session: Session, job_id: int) -> Job:
    job = session.get(Job, job_id)
    assert job is not None  # it was just read, in this transaction
    return job


def _missing(
    session: Session,
    policy: PolicyConfig,
    job: Job,
    report: HostReport | None,
    known: AgentJobState | None,
    now: datetime,
    found: Reconciliation,
) -> None:
    grace = timedelta(seconds=policy.scheduler.hosts.lost_after_seconds)
    if job.missing_since is None:
        job.missing_since = now
        session.add(job)
    answering = report is not None and report.ok and known is None
    if now - job.missing_since < grace:
        if answering and job.stop_requested_at is None:
            found.resend.append(job.id or 0)
        return
    why = (
        "its host stopped answering"
        if not (report and report.ok)
        else "its host no longer knows it"
    )
    _finish(
        session, policy, job, JobState.FAILED, now, f"lost: {why} for {grace.total_seconds():g} s"
    )
    found.events.append(
        Event(
            EventKind.JOB_LOST,
            now,
            f"job #{job.id} {job.name} was lost: {why}",
            job.id,
            owner=job.owner,
        )
    )


def _ended(
    session: Session,
    policy: PolicyConfig,
    job: Job,
    known: AgentJobState,
    now: datetime,
    found: Reconciliation,
) -> None:
    asked = job.stop_reason
    if asked in REQUEUED_STOPS:
        why = REQUEUED_STOPS[asked]
        _finish(session, policy, job, JobState.PREEMPTED, now, f"stopped: {why}")
        back = JobState.QUEUED if job.data_ready else JobState.WAITING_DATA
        lifecycle.move(session, job, back, at=now, actor=ACTOR, reason=f"requeued: {why}")
        text = f"job #{job.id} {job.name} was stopped ({why}) and is queued again"
        found.events.append(Event(EventKind.JOB_PREEMPTED, now, text, job.id, owner=job.owner))
        return
    if asked in ENDING_STOPS:
        state, why = ENDING_STOPS[asked]
        _finish(session, policy, job, state, now, why)
        found.events.append(
            Event(
                EventKind.JOB_FINISHED,
                now,
                f"job #{job.id} {job.name} stopped ({why})",
                job.id,
                owner=job.owner,
            )
        )
        return
    job.exit_code = known.exit_code
    if known.state == "exited" and known.exit_code == 0:
        _finish(session, policy, job, JobState.SUCCEEDED, now, "exited with 0")
        found.events.append(
            Event(
                EventKind.JOB_FINISHED,
                now,
                f"job #{job.id} {job.name} finished",
                job.id,
                owner=job.owner,
            )
        )
        return
    why = f"exited with {known.exit_code}" if known.state == "exited" else "was killed on its host"
    _finish(session, policy, job, JobState.FAILED, now, why)
    found.events.append(
        Event(
            EventKind.JOB_FAILED,
            now,
            f"job #{job.id} {job.name} failed: {why}",
            job.id,
            owner=job.owner,
        )
    )


def _finish(
    session: Session, policy: PolicyConfig, job: Job, state: JobState, now: datetime, reason: str
) -> None:
    close_allocations_at(session, policy, job, now)
    job.missing_since = None
    job.stop_requested_at, job.stop_reason = None, None
    lifecycle.move(session, job, state, at=now, actor=ACTOR, reason=reason)
