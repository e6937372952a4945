"""Reconciling what the database thinks runs with what the agents report.

For each job that holds GPUs on a host (running, or unknown because its host is silent):
- its agent reports the run running: all is well (a job that was unknown runs again; a
  start whose answer was lost is confirmed);
- it ended there: exit 0 → succeeded, else failed; if paika had asked it to stop, the reason
  decides (preempted and requeued, cancelled, done). The GPUs are charged for as long as the
  host says the run lasted;
- its agent answers without it: a start never confirmed is sent again under the same run id
  (agents start a run id once); a confirmed run the agent has lost is requeued as a new
  attempt — or failed once the job has used its attempts; one its executor (Slurm) held
  pending past the pool's limit and ended for that never ran: requeued as a new attempt
  whatever its attempts, nothing charged (or ended, never having run, if paika was asked
  to end it);
- its host does not answer: the job keeps its GPUs; after `unknown_after_seconds` it is
  shown as unknown and its owner told; only after `give_up_after_hours` is it requeued.
Each job is settled in its own short transaction, as a conditional update: a user's cancel or
done racing the cycle makes one of them start over from the fresh row, and one job that
cannot be settled never stops the others.

The lines a run wrote to its report file come up with its agent's report; the new ones are
stored (scheduler/outputs.py) in the same transaction that settles the job, before it is
settled: a run that exits 0 after reporting status=failed ends failed (an exit code other
than 0 fails it whatever it reported).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any

from sqlalchemy import Engine, Row
from sqlmodel import Session

from scheduler import lifecycle
from scheduler.agent.protocol import OVER_MEMORY
from scheduler.config import PolicyConfig
from scheduler.dispatch import agent_job_id
from scheduler.hosts.profiles import record_profiles
from scheduler.hosts.report import PENDING_TOO_LONG, AgentJobState, HostReport
from scheduler.ledger import charge_lost, close_allocations_at
from scheduler.notices.events import Event, EventCode, EventKind, LostWhy, record
from scheduler.outputs import (
    ROWS_PER_RUN,
    FileLines,
    lines_taken,
    reported_failed,
    skip_file_lines,
    take_file_lines,
)
from scheduler.policy.plan import PreemptCode
from scheduler.policy.reasons import Reason, ReasonCode, because
from storage.db import lost_race, session_scope
from storage.models import ON_HOST_STATES, Allocation, Job, JobState, LedgerEntry
from storage.queries import audit
from storage.queries import cluster as cluster_queries
from storage.queries import holds as hold_queries
from storage.queries import jobs as job_queries

log = logging.getLogger(__name__)
ACTOR = "scheduler"
RETRIES = 3  # a job changed under the cycle is re-read and settled again, this many times
PENDING = (JobState.QUEUED, JobState.WAITING_DATA)
# The audit record of a job whose settling raised (once per run: the admins are told once).
UNSETTLED_ACTION = "job.unsettled"
ERROR_SAID = 300  # characters of the error a notice and the job's history keep
# How long a stop that ends the job (cancel, done) leaves the run between SIGTERM and the
# kill; a job whose settling fails ends this long after its stop when its host cannot be asked.
ENDING_STOP_GRACE_S = 30.0

# Why paika asked a run to stop → what happens when its host confirms the stop.
# Requeued: the job goes back to the queue (an idle-class job stopped for core work, a job
# that checkpoints and resumes stopped for core or much shorter work, a job whose GPUs sat
# idle, or the opportunistic job of a pair on a shared card where one slowed the other:
# scheduler/share_watch.py); ended: the job ends in that state.
R = ReasonCode
REQUEUED_STOPS = {
    "preempt": Reason(R.FOR_CORE_WORK),
    "reclaim": Reason(R.GPUS_SAT_IDLE),
    "slowed": Reason(R.SHARE_SLOWED),
    "maintenance": Reason(R.HOST_MAINTENANCE),
}
PREEMPT_ACTION = "job.preempt"  # the audit record of a preemption: its code and for_job
# Why a preempted job was stopped, as the reason its history keeps (with for_job).
_PREEMPTED_FOR = {
    PreemptCode.IDLE_FOR_CORE: R.PREEMPTED_FOR_CORE,
    PreemptCode.FOR_CORE: R.PREEMPTED_FOR_CORE,
    PreemptCode.FOR_SHORTER: R.PREEMPTED_FOR_SHORTER,
    PreemptCode.FOR_STARVING: R.PREEMPTED_FOR_STARVING,
    PreemptCode.SHARED_FOR_CORE: R.PREEMPTED_FOR_CORE,
}
ENDING_STOPS = {
    "cancel": (JobState.CANCELLED, Reason(R.CANCELLED)),
    "release": (JobState.CANCELLED, Reason(R.RELEASED_IDLE)),
    "done": (JobState.SUCCEEDED, Reason(R.MARKED_DONE)),
    "estimate_limit": (JobState.CANCELLED, Reason(R.ESTIMATE_LIMIT)),
}


# Why a run is gone, as the reason its job's history keeps (the notice carries LostWhy).
_LOST_WHY = {
    LostWhy.NEVER_TOOK_START: R.NEVER_TOOK_START,
    LostWhy.AGENT_LOST: R.AGENT_LOST,
    LostWhy.HOST_GAVE_UP: R.HOST_GAVE_UP,  # hours
    LostWhy.NODE_FAILED: R.NODE_FAILED,
    LostWhy.EXECUTOR_PREEMPTED: R.EXECUTOR_PREEMPTED,
    LostWhy.PENDING_TOO_LONG: R.PENDING_TOO_LONG,  # minutes (PENDING_TOO_LONG_SAID: + Slurm's)
}
# A run its executor ended for no fault of its own (by its state in lower case): it is lost,
# and queued again as a new attempt, not failed.
_EXECUTOR_LOST = {"node_fail": LostWhy.NODE_FAILED, "preempted": LostWhy.EXECUTOR_PREEMPTED}


def _event(kind: EventKind, code: EventCode, job: Job, now: datetime, **said: object) -> Event:
    """An event of `job`, told to its owner, with the values its sentence names."""
    return Event(kind, now, code, job.id, name=job.name, owner=job.owner, detail=said)


class Seen(Enum):
    """What the hosts of one job say of its current run."""

    RUNNING = "running"
    ENDED = "ended"  # exited or killed, with a record of how
    GONE = "gone"  # the agent answers without it, or lost it while it was away
    SILENT = "silent"  # a host of the job does not answer
    AWAY = "away"  # its executor cannot be asked (Slurm's controller): nothing is concluded


@dataclass
class Reconciliation:
    """What reconciling found: events to tell, starts to send again, stops to send."""

    events: list[Event] = field(default_factory=list)
    resend: list[int] = field(default_factory=list)  # job ids whose start the agent never got
    stops: list[int] = field(default_factory=list)  # job ids paika asked to stop, on their host
    orphans: list[tuple[str, str]] = field(
        default_factory=list
    )  # (host, agent run id) paika no longer holds
    failed: list[int] = field(default_factory=list)  # job ids that could not be settled
    # Ended runs (by host) whose end the database had recorded before this cycle: their
    # agents may forget them (see _acks).
    acks: dict[str, list[str]] = field(default_factory=dict)


def reconcile(
    engine: Engine,
    policy: PolicyConfig,
    reports: Mapping[str, HostReport],
    now: datetime,
    *,
    rows_cap: int | None = ROWS_PER_RUN,
) -> Reconciliation:
    """Bring every on-host job's state in line with its hosts' reports; the rows a run's
    report file stores stay within `rows_cap` (the settings' PAIKA_REPORT_ROWS_PER_RUN)."""
    found = Reconciliation()
    with Session(engine) as session:
        rows = job_queries.on_host_rows(session=session)
        hosts_of = hosts_of_jobs(session)
        leaks = job_queries.allocation_leaks(session=session)
        held = _report_lines(rows, hosts_of, reports)
        taken = lines_taken(session, sorted(held)) if held else {}
    record_profiles(engine, reports, rows, now)  # how each run uses its cards, for later runs
    held_here: dict[str, set[str]] = {}
    settle: list[_Settling] = []
    for row in rows:
        hosts = hosts_of.get(row.id, [])
        run = agent_job_id(row.id, row.attempts)
        for host in hosts:
            held_here.setdefault(host, set()).add(run)
        seen, known = _seen(run, hosts, reports)
        lines = [
            (lines, taken.get((row.id, row.attempts, lines.host), 0))
            for lines in held.get(row.id, ())
        ]
        fresh = [(lines, done) for lines, done in lines if lines.last > done]
        if _steady(row, seen):
            if fresh:
                settle.append(_Settling(row, None, None, fresh))
            if row.stop_requested_at is not None:
                found.stops.append(row.id)
            continue
        settle.append(_Settling(row, seen, known, fresh))
    _settle_all(engine, policy, settle, now, found, rows_cap)
    _close_leaks(engine, policy, leaks, now)
    found.orphans = _orphans(reports, held_here)
    found.acks = _acks(reports, {agent_job_id(row.id, row.attempts) for row in rows})
    return found


def _acks(reports: Mapping[str, HostReport], ours: set[str]) -> dict[str, list[str]]:
    """Ended runs the hosts report that no job had going when this cycle read the database:
    their end is committed (settled in an earlier cycle, or never paika's to settle), so
    their agents may forget them. A run settled in this cycle is acknowledged in the next,
    read back from the database: a crash before its commit leaves it on its agent."""
    acks: dict[str, list[str]] = {}
    for name, report in reports.items():
        if report.ok:
            ended = [
                run for run, j in report.jobs.items() if j.state != "running" and run not in ours
            ]
            if ended:
                acks[name] = ended
    return acks


def _report_lines(
    rows: Sequence[Row[Any]], hosts_of: Mapping[int, list[str]], reports: Mapping[str, HostReport]
) -> dict[int, list[FileLines]]:
    """Job id → the report-file lines each of its hosts keeps of its current run."""
    held: dict[int, list[FileLines]] = {}
    for row in rows:
        run = agent_job_id(row.id, row.attempts)
        for host in hosts_of.get(row.id, []):
            report = reports.get(host)
            state = report.jobs.get(run) if report is not None and report.ok else None
            if state is not None and state.report_lines:
                lines = FileLines(host, state.report_first, state.report_lines)
                held.setdefault(row.id, []).append(lines)
    return held


def _take_lines(
    session: Session,
    job: Job,
    fresh: Sequence[tuple[FileLines, int]],
    now: datetime,
    rows_cap: int | None = ROWS_PER_RUN,
) -> None:
    """Store the run's new report-file lines; a line that is not understood is logged."""
    for lines, done in fresh:
        took = take_file_lines(session, job, lines, done, now, rows_cap)
        for number, problem in took.bad:
            log.warning(
                "job #%s: line %s of its report file on %s is not a report (%s); skipped",
                job.id,
                number,
                lines.host,
                problem,
                extra={"job_id": job.id, "host": lines.host},
            )
        if took.missed:
            log.warning(
                "job #%s: %s lines of its report file on %s were dropped before they were read",
                job.id,
                took.missed,
                lines.host,
                extra={"job_id": job.id, "host": lines.host},
            )


def hosts_of_jobs(session: Session) -> dict[int, list[str]]:
    """Job id → the names of the hosts its open allocations are on (usually one)."""
    names = {host.id: host.name for host in cluster_queries.host_rows(session=session)}
    host_of_gpu = {g: names.get(h) for g, h in cluster_queries.gpu_hosts(session=session)}
    hosts: dict[int, list[str]] = {}
    for gpu_id, job_id, _ in cluster_queries.open_parts(session=session):  # shares: each job
        name = host_of_gpu.get(gpu_id)
        if name is not None and name not in hosts.setdefault(job_id, []):
            hosts[job_id].append(name)
    return hosts


def _seen(
    run: str, hosts: Sequence[str], reports: Mapping[str, HostReport]
) -> tuple[Seen, AgentJobState | None]:
    """Combine what each host of a job says of its run; the least settled answer wins."""
    if not hosts:  # it holds no GPU any more: nothing can be running for it
        return Seen.GONE, AgentJobState(run, "lost")
    answers = []
    for host in hosts:
        report = reports.get(host)
        if report is None or not report.ok:
            return (Seen.AWAY if report is not None and report.patient else Seen.SILENT), None
        if report.partial and run not in report.jobs:  # maybe in what was not read yet
            return Seen.AWAY, None
        answers.append(report.jobs.get(run))
    ended = [a for a in answers if a is not None and a.state in ("exited", "killed")]
    if ended:
        failed = [a for a in ended if not (a.state == "exited" and a.exit_code == 0)]
        return Seen.ENDED, (failed or ended)[0]
    if all(a is not None and a.state == "running" for a in answers):
        return Seen.RUNNING, answers[0]
    # A host's word that the run is lost (and why) before another's that it runs.
    said = sorted((a for a in answers if a is not None), key=lambda a: a.state != "lost")
    return Seen.GONE, next(iter(said), None)


def _steady(row: Row[Any], seen: Seen) -> bool:
    """A job whose hosts agree with the database: nothing to write (the common case)."""
    return (
        seen is Seen.RUNNING
        and row.state == JobState.RUNNING
        and row.missing_since is None
        and row.confirmed_at is not None
    )


@dataclass(frozen=True)
class _Settling:
    """One job to settle: what its hosts say of its run (`seen` None: only its new
    report-file lines to take)."""

    row: Row[Any]
    seen: Seen | None
    known: AgentJobState | None
    fresh: Sequence[tuple[FileLines, int]]


def _settle_all(
    engine: Engine,
    policy: PolicyConfig,
    settling: Sequence[_Settling],
    now: datetime,
    found: Reconciliation,
    rows_cap: int | None = ROWS_PER_RUN,
) -> None:
    """Settle every job in one transaction: a cycle in which fifty runs ended makes one
    commit, not fifty. Should the batch fail (a user's command changed one of the jobs
    meanwhile, or one job's settling raised), nothing of it is kept and each job is settled
    in its own transaction instead (`_settle_safely`), one job's trouble costing only it."""
    if len(settling) > 1:
        mine = Reconciliation()
        try:
            with session_scope(engine) as session:
                for one in settling:
                    _settle_in(
                        session,
                        policy,
                        one.row,
                        one.seen,
                        one.known,
                        now,
                        mine,
                        one.fresh,
                        rows_cap,
                    )
        except Exception as exc:
            log.info("this cycle's jobs are settled one by one: %s", exc)
        else:
            found.events += mine.events
            found.resend += mine.resend
            found.stops += mine.stops
            return
    for one in settling:
        _settle_safely(
            engine, policy, one.row, one.seen, one.known, now, found, one.fresh, rows_cap
        )


def _settle_in(
    session: Session,
    policy: PolicyConfig,
    row: Row[Any],
    seen: Seen | None,
    known: AgentJobState | None,
    now: datetime,
    mine: Reconciliation,
    fresh: Sequence[tuple[FileLines, int]],
    rows_cap: int | None = ROWS_PER_RUN,
) -> None:
    """Settle one job in `session`, its events recorded with the change (told with it, or
    not at all); nothing when it moved on since it was read (cancelled, requeued …)."""
    job = session.get(Job, row.id)
    if job is None or job.state not in ON_HOST_STATES or job.attempts != row.attempts:
        return
    told = len(mine.events)
    _take_lines(session, job, fresh, now, rows_cap)
    if seen is not None:
        _settle(session, policy, job, seen, known, now, mine)
    for event in mine.events[told:]:
        record(session, event)


def _settle_safely(
    engine: Engine,
    policy: PolicyConfig,
    row: Row[Any],
    seen: Seen | None,
    known: AgentJobState | None,
    now: datetime,
    found: Reconciliation,
    fresh: Sequence[tuple[FileLines, int]] = (),
    rows_cap: int | None = ROWS_PER_RUN,
) -> None:
    """Settle one job in its own transaction, with its new report-file lines (`seen` None:
    only take those); a race re-reads it, any other error is logged and leaves it for the
    next cycle, never stopping the others."""
    for _ in range(RETRIES):
        mine = Reconciliation()
        try:
            with session_scope(engine) as session:
                _settle_in(session, policy, row, seen, known, now, mine, fresh, rows_cap)
        except Exception as exc:
            if lost_race(exc):
                continue  # a user's command changed it in between: read it again
            log.exception(
                "job #%s could not be reconciled; its trouble is kept to it",
                row.id,
                extra={"job_id": row.id},
            )
            found.failed.append(row.id)
            _contain(engine, policy, _Settling(row, seen, known, fresh), now, found, exc)
            return
        found.events += mine.events
        found.resend += mine.resend
        found.stops += mine.stops
        return
    log.warning(
        "job #%s kept changing while it was reconciled; next cycle",
        row.id,
        extra={"job_id": row.id},
    )


def _contain(
    engine: Engine,
    policy: PolicyConfig,
    one: _Settling,
    now: datetime,
    found: Reconciliation,
    error: Exception,
) -> None:
    """Settling the job raised (a bug, a row or a report line nobody foresaw): keep it to
    this job, so that it is never stuck. The admins hear of it once per run (an outbox
    notice in the channel; the audit record says what raised). A run that is gone (ended,
    or lost) ends the job — as its stop asked (a cancel: cancelled), else failed — and its
    GPUs are given back; a run asked to end whose host cannot be asked ends so once the
    stop's grace is over. A run still running keeps its GPUs, its stop (if asked) is sent,
    and the report lines that could not be taken are skipped. Tried with the ledger first;
    should that raise too, the allocations are closed without charging them."""
    for charge in (True, False):
        for _ in range(RETRIES):
            mine = Reconciliation()
            try:
                with session_scope(engine) as session:
                    job = session.get(Job, one.row.id)
                    if (
                        job is None
                        or job.state not in ON_HOST_STATES
                        or job.attempts != one.row.attempts
                    ):
                        return
                    _contained(session, policy, job, one, now, mine, error, charge=charge)
                    for event in mine.events:
                        record(session, event)
            except Exception as exc:
                if lost_race(exc):
                    continue
                log.exception(
                    "job #%s: its trouble could not be contained%s",
                    one.row.id,
                    "; again without charging its GPUs" if charge else "; next cycle",
                    extra={"job_id": one.row.id},
                )
                break
            found.events += mine.events
            found.stops += mine.stops
            found.resend += mine.resend
            return


def _contained(
    session: Session,
    policy: PolicyConfig,
    job: Job,
    one: _Settling,
    now: datetime,
    found: Reconciliation,
    error: Exception,
    *,
    charge: bool,
) -> None:
    """What `_contain` does, in `session`."""
    told = audit.latest(
        session=session, action=UNSETTLED_ACTION, target_kind="job", target_id=job.id
    )
    what = f"{type(error).__name__}: {error}"
    what = what if len(what) <= ERROR_SAID else what[:ERROR_SAID] + "…"
    if told is None or (told.detail or {}).get("attempt") != job.attempts:
        audit.record(
            session=session,
            at=now,
            actor=ACTOR,
            action=UNSETTLED_ACTION,
            target_kind="job",
            target_id=job.id,
            detail={"attempt": job.attempts, "error": what, "seen": _seen_said(one.seen)},
        )
        admins = Event(
            EventKind.JOB_UNSETTLED,
            now,
            EventCode.UNSETTLED,
            job.id,
            name=job.name,
            detail={"error": what, "owner": job.owner, "attempt": job.attempts},
        )
        found.events.append(admins)
    asked = job.stop_reason
    # A start never confirmed that its agent does not know may still be on its way: not gone
    # (its stop makes the agent refuse it for good), nor can that host be asked about it.
    # It is given as long as any start is (`unknown_after_seconds`), then taken as gone.
    arriving = one.seen is Seen.GONE and job.confirmed_at is None and one.known is None
    patience = timedelta(seconds=policy.scheduler.hosts.unknown_after_seconds)
    if arriving and job.started_at is not None and now - _aware(job.started_at) >= patience:
        arriving = False
    gone = one.seen is Seen.ENDED or (one.seen is Seen.GONE and not arriving)
    overdue = (
        asked in ENDING_STOPS
        and (one.seen in (Seen.SILENT, Seen.AWAY) or arriving)
        and job.stop_requested_at is not None
        and now - _aware(job.stop_requested_at) >= timedelta(seconds=ENDING_STOP_GRACE_S)
    )
    if gone or overdue:
        state, done = ENDING_STOPS.get(asked or "", (JobState.FAILED, None))
        unsettled = because(R.UNSETTLED, error=what)
        why = because(R.ENDED_BECAUSE, done=done, why=unsettled) if done else unsettled
        if charge:
            _finish(session, policy, job, state, now, why)
        else:
            job.missing_since = None
            job.stop_requested_at, job.stop_reason = None, None
            lifecycle.move(session, job, state, at=now, actor=ACTOR, reason=why)
            session.flush()
            for allocation in cluster_queries.open_allocations(session=session, job_id=job.id):
                cluster_queries.end_allocation(session=session, allocation=allocation, at=now)
        kind = EventKind.JOB_FINISHED if asked in ENDING_STOPS else EventKind.JOB_FAILED
        said = {"state": str(state), "error": what}
        found.events.append(_event(kind, EventCode.UNSETTLED_ENDED, job, now, **said))
        return
    # Still running (or its host cannot be asked yet): its new report lines are skipped,
    # so the same line does not raise again every cycle; its stop goes out.
    for lines, _done in one.fresh:
        skip_file_lines(session, job, lines)
    if job.stop_requested_at is not None and (one.seen in (None, Seen.RUNNING) or arriving):
        found.stops.append(job.id or 0)
    elif arriving:  # the same start, sent again under the same run id
        found.resend.append(job.id or 0)


def _seen_said(seen: Seen | None) -> str:
    return "running" if seen is None else seen.value


def _aware(at: datetime) -> datetime:
    """A time from the database as UTC (SQLite hands back naive datetimes)."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _settle(
    session: Session,
    policy: PolicyConfig,
    job: Job,
    seen: Seen,
    known: AgentJobState | None,
    now: datetime,
    found: Reconciliation,
) -> None:
    if seen is Seen.RUNNING:
        _running(session, job, now, found)
    elif seen is Seen.ENDED:
        assert known is not None
        _ended(session, policy, job, known, now, found)
    elif seen is Seen.GONE:
        _gone(session, policy, job, known, now, found)
    else:
        _silent(session, policy, job, now, found, give_up=seen is Seen.SILENT)


def _running(session: Session, job: Job, now: datetime, found: Reconciliation) -> None:
    if job.state == JobState.UNKNOWN:
        answers = Reason(R.HOST_ANSWERS)
        lifecycle.move(session, job, JobState.RUNNING, at=now, actor=ACTOR, reason=answers)
        found.events.append(_event(EventKind.JOB_RESUMED, EventCode.HOST_ANSWERS, job, now))
    elif job.confirmed_at is None:  # a start whose answer was lost: it did start
        found.events.append(_event(EventKind.JOB_STARTED, EventCode.START_CONFIRMED, job, now))
    job.missing_since = None
    job.confirmed_at = job.confirmed_at or now
    session.add(job)
    if job.stop_requested_at is not None:
        found.stops.append(job.id or 0)


def _gone(
    session: Session,
    policy: PolicyConfig,
    job: Job,
    known: AgentJobState | None,
    now: datetime,
    found: Reconciliation,
) -> None:
    """Its agent answers but does not run it."""
    confirmed = job.confirmed_at is not None or known is not None
    if not confirmed:
        # The start may still be on its way: a stop makes the agent refuse it for good (and
        # report it stopped next cycle); otherwise the same start is sent again — for a
        # while: an agent that answers but never takes it is not waited for forever.
        patience = timedelta(seconds=policy.scheduler.hosts.unknown_after_seconds)
        if job.stop_requested_at is not None:
            found.stops.append(job.id or 0)
        elif job.started_at is not None and now - job.started_at >= patience:
            why = LostWhy.NEVER_TOOK_START
            _lost(session, policy, job, now, job.started_at, why, found)  # nothing ran: no charge
        else:
            found.resend.append(job.id or 0)
        return
    if known is not None and known.ended_by == PENDING_TOO_LONG and not known.launched:
        _never_ran(session, job, known, now, found)
        return
    # Its executor ended it for no fault of its own (a Slurm node failure, Slurm's own
    # preemption): lost, charged for as long as the executor says it ran.
    ended_by = _EXECUTOR_LOST.get(known.ended_by or "") if known is not None else None
    last_seen = job.missing_since or now
    if ended_by is not None and known is not None and known.accounted and job.started_at:
        last_seen = job.started_at + timedelta(seconds=known.ran_seconds or 0)
    _lost(session, policy, job, now, last_seen, ended_by or LostWhy.AGENT_LOST, found)


def _never_ran(
    session: Session, job: Job, known: AgentJobState, now: datetime, found: Reconciliation
) -> None:
    """Its executor held it pending past the pool's limit and ended it, never having run:
    its cards are given back uncharged and it is queued again as a new attempt (the next
    run has a name of its own), whatever attempts it has used — the pending was none of its
    doing. A job paika was asked to end (cancel, done) ends, never having run."""
    minutes = (known.pending_past_s or 0) / 60
    reason = known.pending_reason
    why = (
        because(R.PENDING_TOO_LONG_SAID, minutes=round(minutes, 1), slurm_reason=reason)
        if reason
        else because(R.PENDING_TOO_LONG, minutes=round(minutes, 1))
    )
    asked = job.stop_reason
    said_why = (
        because(R.STOPPED_WHILE, stop=asked, why=why)
        if asked in ENDING_STOPS
        else because(R.REQUEUED_BECAUSE, why=why)
    )
    state = requeue_or_finish(session, job, now, said_why)  # "…; it never ran" when it ends
    if state in PENDING:
        said = {"why": LostWhy.PENDING_TOO_LONG.value, "minutes": round(minutes, 1)}
        if reason:
            said["reason"] = reason
        found.events.append(
            _event(EventKind.JOB_REQUEUED, EventCode.LOST_REQUEUED, job, now, **said)
        )
    else:
        event = _event(
            EventKind.JOB_FINISHED, EventCode.STOPPED_UNSTARTED, job, now, state=str(state)
        )
        found.events.append(event)


def _silent(
    session: Session,
    policy: PolicyConfig,
    job: Job,
    now: datetime,
    found: Reconciliation,
    *,
    give_up: bool = True,
) -> None:
    """A host of the job does not answer: it keeps its GPUs, and paika waits for its word
    (for `give_up_after_hours`; without `give_up`, for as long as it takes)."""
    knobs = policy.scheduler.hosts
    if job.missing_since is None:
        job.missing_since = now
        session.add(job)
    silent_for = now - job.missing_since
    if job.state == JobState.RUNNING and silent_for >= timedelta(
        seconds=knobs.unknown_after_seconds
    ):
        minutes = silent_for.total_seconds() / 60
        reason = because(R.HOST_SILENT, minutes=minutes)
        lifecycle.move(session, job, JobState.UNKNOWN, at=now, actor=ACTOR, reason=reason)
        found.events.append(
            _event(EventKind.JOB_UNKNOWN, EventCode.HOST_SILENT, job, now, minutes=round(minutes))
        )
    elif (
        give_up
        and job.state == JobState.UNKNOWN
        and silent_for >= timedelta(hours=knobs.give_up_after_hours)
    ):
        _lost(session, policy, job, now, job.missing_since, LostWhy.HOST_GAVE_UP, found)


def _lost(
    session: Session,
    policy: PolicyConfig,
    job: Job,
    now: datetime,
    last_seen: datetime,
    lost: LostWhy,
    found: Reconciliation,
) -> None:
    """The run is gone (or given up on): do what its stop asked, else requeue it as a new
    attempt — failed only once it has been started `max_attempts` times (a start a host
    refused for good, which ran nothing, is not one of them: scheduler/holds.py)."""
    hours = policy.scheduler.hosts.give_up_after_hours
    why = Reason(_LOST_WHY[lost], {"hours": hours} if lost is LostWhy.HOST_GAVE_UP else {})
    said = {"why": lost.value, "hours": hours}
    asked = job.stop_reason
    if asked in ENDING_STOPS:
        state, done = ENDING_STOPS[asked]
        ended = because(R.ENDED_BECAUSE, done=done, why=why)
        _finish(session, policy, job, state, now, ended, until=last_seen)
        return
    started = job.attempts - hold_queries.count_of_job(session=session, job_id=job.id or 0)
    if asked not in REQUEUED_STOPS and started >= policy.scheduler.hosts.max_attempts:
        reason = because(R.LOST_AFTER_ATTEMPTS, why=why, attempts=started)
        _finish(session, policy, job, JobState.FAILED, now, reason, until=last_seen)
        found.events.append(
            _event(EventKind.JOB_LOST, EventCode.LOST, job, now, attempts=started, **said)
        )
        return
    _requeue(session, policy, job, now, because(R.REQUEUED_BECAUSE, why=why), until=last_seen)
    found.events.append(_event(EventKind.JOB_REQUEUED, EventCode.LOST_REQUEUED, job, now, **said))


def _ended(
    session: Session,
    policy: PolicyConfig,
    job: Job,
    known: AgentJobState,
    now: datetime,
    found: Reconciliation,
) -> None:
    # A run paika watched throughout is charged until now, by paika's clock; one it could
    # not watch (its host was silent, or its start was never confirmed), or one its executor
    # accounts for itself (Slurm), for as long as the host says it ran.
    until = (
        job.started_at + timedelta(seconds=known.ran_seconds)
        if job.started_at is not None
        and known.ran_seconds is not None
        and (known.accounted or not _watched_throughout(session, job))
        else None
    )
    asked = job.stop_reason
    if not known.launched:  # its stop reached the host before its start: it never ran
        before = because(R.STOPPED_BEFORE_START, stop=asked)
        state = requeue_or_finish(session, job, now, before)
        kind = EventKind.JOB_REQUEUED if state in PENDING else EventKind.JOB_FINISHED
        found.events.append(_event(kind, EventCode.STOPPED_UNSTARTED, job, now, state=str(state)))
        return
    if asked == "preempt":
        _preempted(session, policy, job, now, until, found)
        return
    if asked in REQUEUED_STOPS:
        why = REQUEUED_STOPS[asked]
        stopped = because(R.STOPPED_BECAUSE, why=why)
        _finish(session, policy, job, JobState.PREEMPTED, now, stopped, until=until)
        requeued = because(R.REQUEUED_BECAUSE, why=why)
        lifecycle.move(session, job, back_in_line(job), at=now, actor=ACTOR, reason=requeued)
        found.events.append(
            _event(EventKind.JOB_PREEMPTED, EventCode.STOPPED_REQUEUED, job, now, stop=asked)
        )
        return
    if asked in ENDING_STOPS:
        state, why = ENDING_STOPS[asked]
        _finish(session, policy, job, state, now, why, until=until)
        found.events.append(_event(EventKind.JOB_FINISHED, EventCode.STOPPED, job, now, stop=asked))
        return
    job.exit_code = known.exit_code
    if known.stopped_for == OVER_MEMORY:
        # Its host stopped it for taking a shared card's memory its neighbour needed.
        used = (known.used_memory_mib or 0) / 1024
        why = because(R.OVER_SHARED_MEMORY, used=round(used, 1), declared=job.min_memory_gib or 0)
        _finish(session, policy, job, JobState.FAILED, now, why, until=until)
        found.events.append(_event(EventKind.JOB_FAILED, EventCode.KILLED, job, now))
        return
    if known.state == "exited" and known.exit_code == 0 and reported_failed(session, job):
        why = Reason(R.EXITED_REPORTED_FAILED)
        _finish(session, policy, job, JobState.FAILED, now, why, until=until)
        found.events.append(_event(EventKind.JOB_FAILED, EventCode.REPORTED_FAILED, job, now))
        return
    if known.state == "exited" and known.exit_code == 0:
        _finish(session, policy, job, JobState.SUCCEEDED, now, Reason(R.EXITED_OK), until=until)
        found.events.append(_event(EventKind.JOB_FINISHED, EventCode.FINISHED, job, now))
        return
    why = (
        because(R.EXITED, exit_code=known.exit_code) if known.state == "exited" else _killed(known)
    )
    _finish(session, policy, job, JobState.FAILED, now, why, until=until)
    if known.state == "exited":
        event = _event(EventKind.JOB_FAILED, EventCode.FAILED, job, now, exit_code=known.exit_code)
    elif known.ended_by is not None:
        ended_by = known.ended_by
        event = _event(EventKind.JOB_FAILED, EventCode.KILLED, job, now, ended_by=ended_by)
    else:
        event = _event(EventKind.JOB_FAILED, EventCode.KILLED, job, now)
    found.events.append(event)


def _killed(known: AgentJobState) -> Reason:
    """Why a killed run ended, as the reason its job's history keeps."""
    if known.ended_by is None:
        return Reason(R.KILLED)
    return because(R.ENDED_BY_EXECUTOR, ended_by=known.ended_by.upper())


def _preempted(
    session: Session,
    policy: PolicyConfig,
    job: Job,
    now: datetime,
    until: datetime | None,
    found: Reconciliation,
) -> None:
    """Its host confirms the stop a preemption asked for: the stretch is charged, with the
    GPU-hours since its last reported checkpoint kept apart as lost; the job counts one more
    preemption and goes back in line, to resume from its checkpoint."""
    asked = audit.latest(
        session=session, action=PREEMPT_ACTION, target_kind="job", target_id=job.id
    )
    detail = dict(asked.detail or {}) if asked is not None else {}
    try:
        code = PreemptCode(str(detail.get("code", PreemptCode.IDLE_FOR_CORE.value)))
    except ValueError:
        code = PreemptCode.IDLE_FOR_CORE
    for_job = detail.get("for_job")
    why = because(_PREEMPTED_FOR[code], for_job=for_job) if for_job else REQUEUED_STOPS["preempt"]
    attempt = job.attempts
    stopped = because(R.STOPPED_BECAUSE, why=why)
    entries = _finish(session, policy, job, JobState.PREEMPTED, now, stopped, until=until)
    lost = charge_lost(session, job, entries)
    job.preemptions += 1  # the job's row is versioned: a conditional update with the rest
    requeued = because(R.REQUEUED_BECAUSE, why=why)
    lifecycle.move(session, job, back_in_line(job), at=now, actor=ACTOR, reason=requeued)
    said: dict[str, object] = {"stop": "preempt"}
    if job.preemptible:  # why, which run, and what it lost
        said.update(
            preempt=code.value,
            for_job=for_job,
            attempt=attempt,
            preemptions=job.preemptions,
            lost_gpu_hours=round(lost, 4),
        )
    found.events.append(
        _event(EventKind.JOB_PREEMPTED, EventCode.STOPPED_REQUEUED, job, now, **said)
    )


def _watched_throughout(session: Session, job: Job) -> bool:
    """Whether paika saw this run on its host from its start to now, without a silence."""
    if job.missing_since is not None or job.confirmed_at is None or job.started_at is None:
        return False
    return not job_queries.went_unknown_since(
        session=session, job_id=job.id or 0, since=job.started_at
    )


def _requeue(
    session: Session,
    policy: PolicyConfig,
    job: Job,
    now: datetime,
    reason: Reason,
    *,
    until: datetime | None = None,
) -> None:
    """Close the run's allocations (its GPU time is charged) and put the job back in line."""
    _finish(session, policy, job, back_in_line(job), now, reason, until=until)
    job.confirmed_at = None


def _finish(
    session: Session,
    policy: PolicyConfig,
    job: Job,
    state: JobState,
    now: datetime,
    reason: Reason,
    *,
    until: datetime | None = None,
) -> list[LedgerEntry]:
    """End the run: move the job to `state`, forget its stop, charge its GPU time (its
    ledger entries are returned)."""
    job.missing_since = None
    job.stop_requested_at, job.stop_reason = None, None
    lifecycle.move(session, job, state, at=now, actor=ACTOR, reason=reason)
    # The job's row is written (and locked) before the ledger rows that refer to it: on
    # MariaDB, their key checks would otherwise share-lock it first, and a user's cancel of
    # the same job in between would be a deadlock instead of a plain lost race.
    session.flush()
    return close_allocations_at(session, policy, job, now, until=until)


def back_in_line(job: Job) -> JobState:
    """Where a job that did not end goes: the queue, or back to waiting for its data."""
    return JobState.QUEUED if job.data_ready else JobState.WAITING_DATA


def _orphans(
    reports: Mapping[str, HostReport], held_here: Mapping[str, set[str]]
) -> list[tuple[str, str]]:
    """Runs an agent reports running that paika holds on no job of that host."""
    orphans = []
    for name, report in reports.items():
        if report.ok:
            mine = held_here.get(name, set())
            orphans += [
                (name, run)
                for run, j in report.jobs.items()
                if j.state == "running" and run not in mine
            ]
    return orphans


def _close_leaks(
    engine: Engine, policy: PolicyConfig, leaks: Sequence[Row[Any]], now: datetime
) -> None:
    """Close allocations whose job no longer holds GPUs, so no GPU stays booked forever."""
    for leak in leaks:
        job_id, allocation_id, state = leak.job_id, leak.id, leak.state
        log.error(
            "allocation #%s of job #%s (%s) was still open; closing it",
            allocation_id,
            job_id,
            state,
            extra={"job_id": job_id},
        )
        try:
            with session_scope(engine) as session:
                allocation = session.get(Allocation, allocation_id)
                job = session.get(Job, job_id)
                if allocation is None or allocation.ended_at is not None or job is None:
                    continue
                if job.state in ON_HOST_STATES:
                    continue  # it was started again since the leak was read
                cluster_queries.end_allocation(
                    session=session, allocation=allocation, at=job.ended_at or now
                )
                audit.record(
                    session=session,
                    at=now,
                    actor=ACTOR,
                    action="allocation.leak_closed",
                    target_kind="job",
                    target_id=job_id,
                    detail={"allocation": allocation_id, "job_state": state},
                )
        except Exception:
            log.exception(
                "allocation #%s could not be closed; tried again next cycle", allocation_id
            )


def requeue_or_finish(
    session: Session,
    job: Job,
    now: datetime,
    reason: Reason,
    *,
    fail: bool = False,
    unsent: bool = False,
) -> JobState:
    """After a start that never ran: a job whose own data no host takes (`fail`) fails, a
    job asked to end (cancelled, done) ends, never having run; any other goes back in line.
    Its allocations are deleted: no GPU time to charge. A start that never reached its host
    (`unsent`) gives its attempt back: the host has no record of that run id to clash with."""
    for allocation in cluster_queries.open_allocations(session=session, job_id=job.id):
        cluster_queries.drop_allocation(session=session, allocation=allocation)
    if unsent:
        job.attempts = max(0, job.attempts - 1)
    job.missing_since = None
    job.confirmed_at = None
    asked = job.stop_reason
    job.stop_requested_at, job.stop_reason = None, None
    if fail:
        lifecycle.move(session, job, JobState.FAILED, at=now, actor=ACTOR, reason=reason)
        return JobState.FAILED
    if asked in ENDING_STOPS:
        state = ENDING_STOPS[asked][0]
        state = JobState.CANCELLED if state == JobState.SUCCEEDED else state  # it never ran
        never_ran = because(R.NEVER_RAN, why=reason)
        lifecycle.move(session, job, state, at=now, actor=ACTOR, reason=never_ran)
        return state
    back = back_in_line(job)
    lifecycle.move(session, job, back, at=now, actor=ACTOR, reason=reason)
    return back
