"""The scheduling cycle, one step a line:

1. poll every agent                          (hosts/poll.py)
2. apply the reports; reconcile on-host jobs  (hosts/inventory.py, hosts/reconcile.py);
   judge the runs on shared cards: one slowed by its neighbour for long enough has the
   opportunistic job of the pair stopped, requeued and kept apart (share_watch.py)
3. send again the starts whose answer was lost; send the stops paika asked for
4. release the holds whose cause has gone (holds.py); snapshot the database and run the
   policy (snapshots.py, policy/)
5. admit each start: persist first, then dispatch; a refused start is undone and requeued
   (one the host refuses for good also holds the job off that host: holds.py), a start
   whose answer was lost stays put (it is asked about again, never started elsewhere)
6. record preemptions (their stops go out in step 3 of this and later cycles)
7. log the decisions: starts the hosts took, preemptions, reservations, changed reasons
   (decision_log.py; its own transaction: a failure there is logged and stops nothing)

No step lets one job or one host stop the others: each job's change is its own conditional
update, and an error in one is logged and left for the next cycle (an error settling a job
is kept to that job, which is never stuck: hosts/reconcile.py, `_contain`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from scheduler import array_watch, dependencies, holds, lifecycle, maintenance
from scheduler.clock import Clock
from scheduler.config import PolicyConfig, Preemption, Sharing
from scheduler.configs.live import LivePolicy
from scheduler.credentials import AgentKeys
from scheduler.decision_log import DecisionLog, Outcome, weighed_detail
from scheduler.dispatch import (
    AgentDispatcher,
    CardShare,
    Dispatcher,
    DispatchError,
    StartOrder,
    agent_job_id,
)
from scheduler.hosts.inventory import apply_reports
from scheduler.hosts.poll import Poller as HostPoller
from scheduler.hosts.poll import Target
from scheduler.hosts.reconcile import (
    ACTOR,
    ENDING_STOP_GRACE_S,
    PREEMPT_ACTION,
    REQUEUED_STOPS,
    RETRIES,
    Reconciliation,
    hosts_of_jobs,
    reconcile,
    requeue_or_finish,
)
from scheduler.hosts.report import HostReport
from scheduler.notices.events import Event, EventCode, EventKind, Observer, record
from scheduler.notices.outbox import Announcement
from scheduler.outputs import ReportLimits, mint_token
from scheduler.policy.plan import Plan, Preempt, PreemptCode, Start
from scheduler.policy.reasons import Reason, ReasonCode
from scheduler.policy.scheduler import could_act, schedule
from scheduler.policy.snapshot import Snapshot
from scheduler.service import arrays
from scheduler.share_watch import ShareWatch
from scheduler.snapshots import build_snapshot, expected_wall_hours
from storage.db import lost_race, session_scope
from storage.models import ON_HOST_STATES, Gpu, Host, Job, JobState, Match
from storage.models.cluster import WHOLE_CARD
from storage.queries import audit
from storage.queries import cluster as cluster_queries
from storage.queries import jobs as job_queries
from storage.queries.stamps import PlanningStamp, planning_stamp
from storage.queries.state import is_token_digest

log = logging.getLogger(__name__)
Poller = Callable[[Sequence[Target]], Mapping[str, HostReport]]
# How long a pass that could decide nothing stands while nothing changes (Cycle._quiet).
REPLAN_EVERY = timedelta(seconds=30)


@dataclass
class CycleResult:
    """What one cycle did, for logs, the demo and tests."""

    at: datetime
    reports: Mapping[str, HostReport] = field(default_factory=dict)
    started: list[int] = field(default_factory=list)
    attempts: dict[int, int] = field(default_factory=dict)  # started job → its attempt
    requeued: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    unconfirmed: list[int] = field(default_factory=list)  # starts whose answer was lost
    # When each job this cycle admitted started (see `start_moment`): `at`, or later for a
    # job submitted after the cycle began.
    start_times: dict[int, datetime] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    # Other notices this cycle raised (owners of jobs held because a job they wait for failed).
    notices: list[Announcement] = field(default_factory=list)
    plan: Plan | None = None
    snapshot: Snapshot | None = None  # what the policy was given (for the metrics)
    # False: the policy did not run this cycle, its last pass stood (see `Cycle._quiet`).
    planned: bool = True
    timings: dict[str, float] = field(default_factory=dict)  # seconds per step
    errors: list[str] = field(default_factory=list)  # steps that failed (logged)


@dataclass(frozen=True)
class _Pass:
    """The last time the policy ran: what it read and decided, and whether it could have
    decided anything (see `Cycle._quiet`)."""

    stamp: PlanningStamp
    at: datetime
    policy: PolicyConfig
    snapshot: Snapshot
    plan: Plan
    quiet: bool


class Cycle:
    """Runs the cycle against one database with one dispatcher; `observer` sees its events
    afterwards (people are told through the outbox, in the transactions that made them)."""

    def __init__(
        self,
        engine: Engine,
        policy: PolicyConfig | LivePolicy,
        clock: Clock,
        dispatcher: Dispatcher,
        observer: Observer,
        poller: Poller,
        keys: AgentKeys | None = None,
        *,
        report_url: str | None = None,
        report_limits: ReportLimits | None = None,
    ) -> None:
        """`policy`: a holder following the stored config versions (the policy is taken
        afresh at the start of each cycle), or one policy kept as given.
        `keys`: each host's own token, shared with the dispatcher (None: one token for all).
        `report_url`: where a run reports its outputs (`paika up`), told to every run as
        PAIKA_REPORT_URL (None: runs report through their report file only)."""
        self.live = policy if isinstance(policy, LivePolicy) else None
        self.policy = policy.current if isinstance(policy, LivePolicy) else policy
        self.engine, self.clock = engine, clock
        self.keys = keys
        self.report_url = report_url
        self.report_limits = report_limits or ReportLimits()
        self.dispatcher, self.observer, self.poller = dispatcher, observer, poller
        self._last_sample: datetime | None = None
        self._last_pass: _Pass | None = None
        self._silent: set[str] = set()  # hosts whose last poll failed
        self._revoked_unsent: list[Any] = []  # host rows whose agent still takes a revoked token
        self.share_watch = ShareWatch()  # how long each run on a shared card has been slowed
        self.decisions = DecisionLog()

    def run_once(self) -> CycleResult:
        """One full cycle; returns what it did."""
        result = CycleResult(self.clock.now())
        # 0. the config version in force: a new one is taken here, without a restart
        if self.live is not None:
            try:
                self.live.refresh(self.engine)
            except Exception:  # the database is away: the cycle's own steps will say so
                log.exception("could not look for a new config version; keeping the one in force")
            self._follow(self.live.current)
        # 1. poll every agent
        with self._step(result, "poll"):
            result.reports = self.poller(self._targets())
            self._log_silences(result.reports)
        # 2. apply the reports; reconcile the jobs on hosts. Not when the poll itself failed:
        # no report is not the same as every host being silent.
        found = Reconciliation()
        if not result.errors:
            sample = self._sample_due(result.at)
            with self._step(result, "apply"), session_scope(self.engine) as session:
                changes = apply_reports(
                    session, self.policy, result.reports, result.at, sample=sample
                )
                result.events += [record(session, event) for event in changes]
            with self._step(result, "reconcile"):
                found = reconcile(
                    self.engine,
                    self.policy,
                    result.reports,
                    result.at,
                    rows_cap=self.report_limits.rows_per_run,
                )
                # Runs whose end is committed: their agents may forget them (next poll).
                acknowledge = getattr(self.poller, "acknowledge", None)
                if acknowledge is not None and found.acks:
                    acknowledge(found.acks)
            with self._step(result, "feedback"):
                fed = self.share_watch.watch(self.engine, self.policy, result.reports, result.at)
                result.events += fed.events
                self._send_stops(fed.stops, [])
        result.events += found.events
        result.errors += [f"reconcile: job #{job_id}" for job_id in found.failed]
        # 3. starts whose answer was lost, and stops
        with self._step(result, "resend"):
            self._resend_starts(found.resend, result)
        with self._step(result, "stops"):
            self._send_stops(found.stops, found.orphans)
        with self._step(result, "revoke"):
            self._send_revocations(result.at)
        # 4. snapshot and policy, once the holds whose cause has gone are released and the
        # jobs that waited for jobs now ended are settled
        with self._step(result, "holds"):
            holds.release(self.engine, self.policy, result.at)
        with self._step(result, "dependencies"):
            result.notices += dependencies.settle(self.engine, result.at).told
        with self._step(result, "arrays"):
            result.notices += array_watch.step(self.engine, result.at)
        with self._step(result, "maintenance"):
            result.notices += maintenance.step(self.engine, result.at, self.policy.zone)
        with self._step(result, "policy"), Session(self.engine) as session:
            stamp = planning_stamp(session=session)
            last = self._last_pass
            if last is not None and self._quiet(last, stamp, result.at):
                result.snapshot, result.plan, result.planned = last.snapshot, last.plan, False
            else:
                result.snapshot = build_snapshot(session, self.policy, result.at)
                # With reasons: the decision log writes each waiting job's when it changes.
                result.plan = schedule(result.snapshot, explain=True)
                quiet = not (
                    result.plan.starts or result.plan.preemptions or could_act(result.snapshot)
                )
                self._last_pass = _Pass(
                    stamp, result.at, self.policy, result.snapshot, result.plan, quiet
                )
        # 5. admit the starts; 6. record the preemptions; 7. log the decisions
        if result.plan is not None and result.snapshot is not None and result.planned:
            with self._step(result, "admit"):
                self._admit_all(result.plan.starts, result)
            with self._step(result, "preempt"):
                self._record_preemptions(result.plan.preemptions, result)
        if result.plan is not None and result.snapshot is not None and self._to_log(result):
            with self._step(result, "log"):
                outcome = Outcome(
                    result.at,
                    result.attempts,
                    result.unconfirmed,
                    result.preempted,
                    result.start_times,
                )
                self.decisions.write(self.engine, result.snapshot, result.plan, outcome)
        for event in result.events:
            self.observer.notify(event)
        return result

    def _quiet(self, last: _Pass, stamp: PlanningStamp, now: datetime) -> bool:
        """Whether the last pass's decisions stand without running the policy again: it
        decided nothing and could decide nothing (no ready job fits a free GPU, no running
        job may be stopped: `could_act`), nothing it read has changed since (the planning
        stamp, the policy), and it is recent. A full cluster with a long queue then costs a
        cycle its poll, not a pass over every waiting job; the reasons and ETAs, which move
        with the clock alone, are worked out afresh at least every REPLAN_EVERY (Slurm's
        own main scheduler, likewise, runs on events and every `sched_interval`)."""
        return (
            last.quiet
            and last.policy is self.policy
            and last.stamp == stamp
            and timedelta(0) <= now - last.at < REPLAN_EVERY
        )

    @staticmethod
    def _to_log(result: CycleResult) -> bool:
        """A pass's decisions are logged; a cycle that reused them logs only what its own
        steps did (a start sent again and confirmed)."""
        return result.planned or bool(result.attempts or result.unconfirmed or result.preempted)

    def _follow(self, policy: PolicyConfig) -> None:
        """Take a new policy, with what the agents are told on every start and poll."""
        if policy is self.policy:
            return
        self.policy = policy
        timeout = policy.scheduler.hosts.poll_timeout_seconds
        if isinstance(self.dispatcher, AgentDispatcher):
            self.dispatcher.containers = policy.containers.options()
            self.dispatcher.timeout = timeout
        if isinstance(self.poller, HostPoller):
            self.poller.timeout = timeout
        for part in (self.dispatcher, self.poller):  # per-pool executors take the new pools
            follow = getattr(part, "follow", None)
            if callable(follow):
                follow(policy)

    @contextmanager
    def _step(self, result: CycleResult, name: str) -> Iterator[None]:
        """Time one step; an error in it is logged and the cycle goes on with the next."""
        began = time.perf_counter()
        try:
            yield
        except Exception as exc:
            log.exception("cycle step %s failed; the cycle goes on", name)
            result.errors.append(f"{name}: {type(exc).__name__}: {exc}")
        finally:
            result.timings[name] = took = time.perf_counter() - began
            log.debug("cycle step %s took %.1f ms", name, took * 1000)

    def _log_silences(self, reports: Mapping[str, HostReport]) -> None:
        """Log a host that stops answering its poll, and again when it answers: once per
        change, not every cycle."""
        silent = {host for host, report in reports.items() if not report.ok}
        for host in sorted(silent - self._silent):
            error = reports[host].error
            log.warning("host %s did not answer its poll: %s", host, error, extra={"host": host})
        for host in sorted(self._silent - silent):
            log.info("host %s answers its poll again", host, extra={"host": host})
        self._silent = silent

    def close(self) -> None:
        """Let go of the poller's connections (when it has any)."""
        close = getattr(self.poller, "close", None)
        if callable(close):
            close()

    def _sample_due(self, now: datetime) -> bool:
        every = timedelta(seconds=self.policy.scheduler.hosts.sample_seconds)
        if self._last_sample is not None and now - self._last_sample < every:
            return False
        self._last_sample = now
        return True

    def _send_revocations(self, now: datetime) -> None:
        """Tell each host whose token was revoked to refuse it, once it can be reached: the
        scheduler stopped using it at once; this makes a leaked copy useless on the host too."""
        if self.keys is None:
            return
        for row in self._revoked_unsent:
            token = self.keys.revoked_token_of(row)
            if token is None or not self.dispatcher.revoke(row.name, row.url, token):
                continue
            with session_scope(self.engine) as session:
                cluster_queries.revocation_sent(
                    session=session,
                    host_id=row.id,
                    revoked_at=row.token_revoked_at,
                    generation=row.token_generation,
                    at=now,
                )
            log.info("host %s refuses its revoked token now", row.name, extra={"host": row.name})

    def _targets(self) -> list[Target]:
        with Session(self.engine) as session:
            rows = cluster_queries.host_rows(session=session)
            runs = self._held_runs(session)
        self._revoked_unsent = [
            row
            for row in rows
            if row.token_revoked_at is not None and row.token_revocation_sent_at is None
        ]
        if self.keys is None:
            return [Target(host.name, host.url, runs=runs.get(host.name, ())) for host in rows]
        self.keys.refresh(rows)
        keys = [self.keys.key(host.name) for host in rows]
        return [
            Target(host.name, host.url, key.token, key.problem, runs.get(host.name, ()))
            for host, key in zip(rows, keys, strict=True)
        ]

    def _held_runs(self, session: Session) -> dict[str, tuple[str, ...]]:
        """Host → the runs the database holds on it, for a batch system's read (Slurm looks up
        one it no longer lists); nothing to read where no pool's executor needs them."""
        holds_runs = getattr(self.poller, "holds_runs", None)
        if not callable(holds_runs) or not holds_runs():
            return {}
        hosts = hosts_of_jobs(session)
        runs: dict[str, list[str]] = {}
        for row in job_queries.on_host_rows(session=session):
            for host in hosts.get(row.id, []):
                runs.setdefault(host, []).append(agent_job_id(row.id, row.attempts))
        return {host: tuple(held) for host, held in runs.items()}

    def _admit_all(self, starts: tuple[Start, ...], result: CycleResult) -> None:
        """Persist each start (the database refuses a GPU already held), then dispatch them
        all at once, a host's slowness costing only its own jobs; settle each outcome."""
        persisted = self._persist_starts(starts, result)
        if not persisted:
            return
        with ThreadPoolExecutor(
            max_workers=min(32, len(persisted)), thread_name_prefix="paika-dispatch"
        ) as pool:
            failures = list(pool.map(self._dispatch, [orders for _, orders in persisted]))
        taken = [
            (start, orders) for (start, orders), f in zip(persisted, failures, strict=True) if not f
        ]
        confirmed = self._confirm_starts(taken, result)
        for (start, orders), failure in zip(persisted, failures, strict=True):
            if start.job_id in confirmed:
                continue
            try:
                self._settle_start(start.job_id, orders[0].attempt, failure, result, _where(start))
            except Exception:  # one job's trouble never stops the others' starts
                log.exception(
                    "job #%s: its start could not be settled",
                    start.job_id,
                    extra={"job_id": start.job_id, "host": ",".join(start.hosts)},
                )
                result.errors.append(f"admit: job #{start.job_id}")

    def _persist_starts(
        self, starts: Sequence[Start], result: CycleResult
    ) -> list[tuple[Start, list[StartOrder]]]:
        """Record every start in one transaction: a cycle starting a hundred jobs makes one
        commit, not a hundred. Should any of them fail (a GPU another writer took, a job a
        user changed meanwhile), nothing of the batch is kept and each is recorded on its
        own instead, so that one start's trouble costs only that start."""
        if len(starts) > 1:
            try:
                with session_scope(self.engine) as session:
                    made = [(start, self._persist_in(session, start, result)) for start in starts]
            except Exception as exc:
                log.info("the cycle's starts are recorded one by one: %s", exc)
            else:
                persisted = []
                for start, found in made:
                    if found is not None:
                        result.start_times[start.job_id] = found[1]
                        persisted.append((start, found[0]))
                return persisted
        return [
            (start, orders) for start in starts if (orders := self._persist_start(start, result))
        ]

    def _confirm_starts(
        self, taken: Sequence[tuple[Start, list[StartOrder]]], result: CycleResult
    ) -> set[int]:
        """Confirm every start its hosts took in one transaction, with the owners' notices;
        the job ids confirmed. Should the batch fail (a user changed one of the jobs
        meanwhile), none is, and each is settled on its own (`_settle_start`)."""
        if len(taken) < 2:
            return set()
        confirmed: list[tuple[int, int]] = []
        events: list[Event] = []
        try:
            with session_scope(self.engine) as session:
                for start, orders in taken:
                    attempt, now = (
                        orders[0].attempt,
                        result.start_times.get(start.job_id, result.at),
                    )
                    job = job_queries.get_job(session=session, job_id=start.job_id)
                    if job is None or job.state not in ON_HOST_STATES or job.attempts != attempt:
                        continue  # settled on its own below
                    _confirm(job, now)
                    session.add(job)
                    event = Event(
                        EventKind.JOB_STARTED,
                        now,
                        EventCode.STARTED,
                        start.job_id,
                        name=job.name,
                        owner=job.owner,
                        detail=_where(start),
                    )
                    events.append(record(session, event))
                    confirmed.append((start.job_id, attempt))
        except Exception as exc:
            log.info("the cycle's starts are confirmed one by one: %s", exc)
            return set()
        result.events += events
        for job_id, attempt in confirmed:
            result.started.append(job_id)
            result.attempts[job_id] = attempt
        return {job_id for job_id, _ in confirmed}

    def _dispatch(self, orders: list[StartOrder]) -> DispatchError | None:
        try:
            for order in orders:
                self.dispatcher.start(order)
        except DispatchError as exc:
            return exc
        except Exception as exc:  # a bug in one order must not be taken for a lost answer
            log.exception(
                "start of job #%s raised",
                orders[0].job_id,
                extra={"job_id": orders[0].job_id, "host": orders[0].host},
            )
            return DispatchError(orders[0].host, orders[0].job_id, f"{type(exc).__name__}: {exc}")
        return None

    def _settle_start(
        self,
        job_id: int,
        attempt: int,
        failure: DispatchError | None,
        result: CycleResult,
        where: Mapping[str, object],
    ) -> None:
        """Record what came of sending a start: started, refused, or not known yet.
        `where`: the hosts it was sent to (and, for a first start, its GPUs and their type)."""
        # The moment its start was recorded with, so that its confirmation and the event
        # told never read earlier than the start (a resent start: this cycle's time).
        now = result.start_times.get(job_id, result.at)
        if failure is None:

            def started(job: Job) -> Event:
                return Event(
                    EventKind.JOB_STARTED,
                    now,
                    EventCode.STARTED,
                    job_id,
                    name=job.name,
                    owner=job.owner,
                    detail=where,
                )

            if self._update(job_id, attempt, lambda s, j: _confirm(j, now), started, result):
                result.started.append(job_id)
                result.attempts[job_id] = attempt
            return
        if not failure.known:
            # It may be running there: ask that host again (same run id), never another one.
            log.warning(
                "start of job #%s: no answer, asked again next cycle: %s",
                job_id,
                failure,
                extra={"job_id": job_id, "host": failure.host},
            )
            result.unconfirmed.append(job_id)
            return
        log.warning("start refused: %s", failure, extra={"job_id": job_id, "host": failure.host})
        if failure.refusal is not None:
            self._hold(job_id, attempt, failure, now, result)
            return
        if failure.bad_order:
            kind, code = EventKind.JOB_FAILED, EventCode.START_REFUSED
            said: dict[str, object] = {"host": failure.host, "problem": failure.problem}
            if failure.code is not None:  # the faces have words for it
                said["dispatch"] = failure.code
            reason = Reason(ReasonCode.START_REFUSED, dict(said))

            def change(session: Session, job: Job) -> None:
                requeue_or_finish(session, job, now, reason, fail=True)
        else:
            unsent = not failure.reached  # the host never saw it: the attempt is given back
            kind, code = EventKind.JOB_REQUEUED, EventCode.START_FAILED
            said = {"host": failure.host, "problem": failure.problem}
            if failure.code is not None:
                said["dispatch"] = failure.code
            reason = Reason(ReasonCode.START_FAILED, dict(said))

            def change(session: Session, job: Job) -> None:
                requeue_or_finish(session, job, now, reason, unsent=unsent)

        job = self._update(
            job_id,
            attempt,
            change,
            lambda job: Event(kind, now, code, job_id, name=job.name, owner=job.owner, detail=said),
            result,
        )
        if job is not None and job.state in (JobState.QUEUED, JobState.WAITING_DATA):
            result.requeued.append(job_id)

    def _hold(
        self,
        job_id: int,
        attempt: int,
        failure: DispatchError,
        now: datetime,
        result: CycleResult,
    ) -> None:
        """The host refuses the job for good (its agent's 403): the job goes back in line, its
        attempt counted, held off that host until something changes (scheduler/holds.py);
        its owner and the admins are told once."""
        said: dict[str, object] = {
            "host": failure.host,
            "refusal": (failure.refusal or "other"),
            "problem": failure.problem,
        }
        reason = Reason(ReasonCode.START_HELD, dict(said))
        told: list[bool] = []

        def change(session: Session, job: Job) -> None:
            said["account"] = job.account or ""
            requeue_or_finish(session, job, now, reason)
            told.append(holds.hold(session, job, failure, now))

        def tell(job: Job) -> Event | None:
            if not told or not told[-1]:
                return None
            kind, code = EventKind.JOB_HELD, EventCode.START_HELD
            return Event(kind, now, code, job_id, name=job.name, owner=job.owner, detail=said)

        job = self._update(job_id, attempt, change, tell, result)
        if job is not None and job.state in (JobState.QUEUED, JobState.WAITING_DATA):
            result.requeued.append(job_id)

    def _update(
        self,
        job_id: int,
        attempt: int,
        change: Callable[[Session, Job], object],
        tell: Callable[[Job], Event | None],
        result: CycleResult,
    ) -> Job | None:
        """Apply `change` to the job's current run as a conditional update, re-reading it if
        a user's command got there first, and put the event `tell` makes of it in the
        outbox in the same transaction; None if that run is no longer on a host."""
        for _ in range(RETRIES):
            try:
                with session_scope(self.engine) as session:
                    job = job_queries.get_job(session=session, job_id=job_id)
                    if job is None or job.state not in ON_HOST_STATES or job.attempts != attempt:
                        return None
                    change(session, job)
                    session.add(job)
                    event = tell(job)
                    if event is not None:
                        record(session, event)
                if event is not None:
                    result.events.append(event)
                return job
            except Exception as exc:
                if not lost_race(exc):
                    raise
        log.warning(
            "job #%s kept changing; its start is settled next cycle",
            job_id,
            extra={"job_id": job_id},
        )
        return None

    def _persist_start(self, start: Start, result: CycleResult) -> list[StartOrder] | None:
        try:
            with session_scope(self.engine) as session:
                found = self._persist_in(session, start, result)
            if found is None:
                return None
            result.start_times[start.job_id] = found[1]
            return found[0]
        except Exception as exc:
            if isinstance(exc, IntegrityError) or lost_race(exc):
                # A GPU it was given is already held, or a user changed the job (a cancel
                # won): nothing was written; the next cycle decides afresh.
                log.warning(
                    "job #%s was not started: it or its GPUs changed",
                    start.job_id,
                    extra={"job_id": start.job_id},
                )
            else:
                log.exception(
                    "job #%s could not be started; the others go on",
                    start.job_id,
                    extra={"job_id": start.job_id},
                )
            return None

    def _persist_in(
        self, session: Session, start: Start, result: CycleResult
    ) -> tuple[list[StartOrder], datetime] | None:
        """Record one start in `session`: its GPUs' allocations, the job running as a new
        attempt, its match and audit line; its orders and the moment it started. None: the
        job changed since the snapshot."""
        job = job_queries.get_job(session=session, job_id=start.job_id)
        if (
            job is None
            or job.state not in (JobState.QUEUED, JobState.PREEMPTED)
            or not job.data_ready
        ):
            return None  # changed since the snapshot (cancelled, data marked not ready …)
        now = start_moment(result.at, job.submitted_at)
        gpus = [gpu for gpu_id in start.gpu_ids if (gpu := session.get(Gpu, gpu_id)) is not None]
        part = start.share_milli if start.share_milli is not None else WHOLE_CARD
        for gpu in gpus:
            cluster_queries.open_allocation(
                session=session, job_id=job.id or 0, gpu_id=gpu.id or 0, at=now, share_milli=part
            )
        if job.state == JobState.PREEMPTED:
            requeued = Reason(ReasonCode.REQUEUED)
            lifecycle.move(session, job, JobState.QUEUED, at=now, actor=ACTOR, reason=requeued)
        why = start.match.why or start.match.reason
        lifecycle.move(session, job, JobState.RUNNING, at=now, actor=ACTOR, reason=why)
        job.attempts += 1
        # The new run's own secret for its reports: one run's token is never another's.
        job.report_token = mint_token()
        job.missing_since = None
        job.confirmed_at = None
        session.add(job)
        session.add(
            Match(
                job_id=job.id or 0,
                at=now,
                chosen_type=start.gpu_type,
                alternatives=[weighed_detail(a) for a in start.match.alternatives],
                reason=start.match.reason,
                reason_code=start.match.why.code.value if start.match.why else None,
                reason_values=start.match.why.stored_values() if start.match.why else None,
            )
        )
        audit.record(
            session=session,
            at=now,
            actor=ACTOR,
            action="job.start",
            target_kind="job",
            target_id=job.id,
            detail={"gpus": list(start.gpu_ids), "type": start.gpu_type},
        )
        session.flush()
        orders = _orders(session, job, gpus, self.report_url, self._preemption, self._sharing)
        return orders, now

    def _resend_starts(self, job_ids: list[int], result: CycleResult) -> None:
        """Send again the starts whose answer was lost (the agent starts a run id once)."""
        for job_id in job_ids:
            with Session(self.engine) as session:
                job = job_queries.get_job(session=session, job_id=job_id)
                gpus = _gpus_of(session, job_id)
                orders = (
                    _orders(session, job, gpus, self.report_url, self._preemption, self._sharing)
                    if job
                    else []
                )
            if orders:
                where = {"hosts": sorted({order.host for order in orders})}
                self._settle_start(job_id, orders[0].attempt, self._dispatch(orders), result, where)

    @property
    def _preemption(self) -> Preemption:
        return self.policy.scheduler.preemption

    @property
    def _sharing(self) -> Sharing:
        return self.policy.sharing

    def _stop_grace(self, job: Job) -> float:
        """How long a stop that requeues the job leaves it between SIGTERM and the kill:
        a job that checkpoints and resumes its own grace (or the policy's default for
        such jobs), any other the idle-class grace."""
        if job.preemptible and job.stop_reason == "preempt":
            return self._preemption.grace_of(job.preempt_grace_s)
        return self._preemption.idle_grace_minutes * 60

    def _send_stops(self, job_ids: list[int], orphans: list[tuple[str, str]]) -> None:
        with Session(self.engine) as session:
            urls = {host.name: host.url for host in cluster_queries.host_rows(session=session)}
            targets: list[tuple[str, str, str, float]] = []
            for job_id in job_ids:
                job = job_queries.get_job(session=session, job_id=job_id)
                for order in _orders(session, job, _gpus_of(session, job_id)) if job else []:
                    # Stops that requeue the job leave it time to checkpoint.
                    requeued = job is not None and job.stop_reason in REQUEUED_STOPS
                    ending = ENDING_STOP_GRACE_S
                    wait = self._stop_grace(job) if job is not None and requeued else ending
                    targets.append(
                        (order.host, order.url, agent_job_id(job_id, order.attempt), wait)
                    )
        targets += [
            (host, urls[host], run, ENDING_STOP_GRACE_S) for host, run in orphans if host in urls
        ]
        for host, url, run, wait in targets:
            try:
                self.dispatcher.stop(host, url, run, wait)
            except DispatchError as exc:
                log.warning(
                    "stop failed: %s", exc, extra={"job_id": exc.job_id, "host": host}
                )  # again next cycle
            except Exception:
                log.exception("stop of %s on %s failed", run, host, extra={"host": host})

    def _record_preemptions(self, preemptions: tuple[Preempt, ...], result: CycleResult) -> None:
        for preempt in preemptions:
            try:
                self._record_preemption(preempt, result)
            except Exception as exc:
                if not lost_race(exc):
                    log.exception(
                        "job #%s: its preemption was not recorded",
                        preempt.job_id,
                        extra={"job_id": preempt.job_id},
                    )
        if result.preempted:
            self._send_stops(result.preempted, [])

    def _record_preemption(self, preempt: Preempt, result: CycleResult) -> None:
        """Ask the job's host to stop it, with its grace, for the job the policy named; the
        owner is told why, which run it was and where it resumes from. A job that did not
        declare it checkpoints and resumes is never stopped for anything but an idle-class
        preemption, and none past the policy's cap."""
        knobs = self._preemption
        with session_scope(self.engine) as session:
            job = job_queries.get_job(session=session, job_id=preempt.job_id)
            if job is None or job.state != JobState.RUNNING or job.stop_requested_at is not None:
                return
            # Idle-class work, and work on a shared card, yields to core work without having
            # declared it resumes; anything else only if it did.
            if preempt.code not in (PreemptCode.IDLE_FOR_CORE, PreemptCode.SHARED_FOR_CORE) and (
                not job.preemptible or not knobs.preemptible or job.preemptions >= knobs.max_per_job
            ):
                log.error(
                    "job #%s: a %s preemption refused (preemptible: %s, preempted %s times)",
                    job.id,
                    preempt.code.value,
                    job.preemptible,
                    job.preemptions,
                    extra={"job_id": job.id},
                )
                return
            job.stop_requested_at, job.stop_reason = result.at, "preempt"
            session.add(job)
            grace = self._stop_grace(job)
            audit.record(
                session=session,
                at=result.at,
                actor=ACTOR,
                action=PREEMPT_ACTION,
                target_kind="job",
                target_id=job.id,
                detail={
                    "for_job": preempt.for_job,
                    "code": preempt.code.value,
                    "reason": preempt.reason,
                    "grace_s": grace,
                    "attempt": job.attempts,
                },
            )
            said: dict[str, object] = {"minutes": round(grace / 60, 2), "for_job": preempt.for_job}
            if job.preemptible:  # why, which run, and where it resumes from
                said.update(preempt=preempt.code.value, attempt=job.attempts)
                place = knobs.checkpoint_of(job.id or 0, job.checkpoint)
                hosts = sorted(
                    {o.host for o in _orders(session, job, _gpus_of(session, job.id or 0))}
                )
                said.update(resumes=place, hosts=hosts)
            event = Event(
                EventKind.JOB_PREEMPTED,
                result.at,
                EventCode.PREEMPT_ASKED,
                job.id,
                name=job.name,
                owner=job.owner,
                detail=said,
            )
            record(session, event)
        result.preempted.append(job.id or 0)
        result.events.append(event)


def start_moment(cycle_at: datetime, submitted_at: datetime) -> datetime:
    """When a start the cycle admits is recorded as made: the time the cycle began, the
    moment its plan was made for, or for a job submitted while the cycle ran (after that
    moment, yet in the snapshot it planned from) its submission, the earliest it can have
    started. So a start never reads earlier than its job's submission, and the job's
    history, its allocations (what the ledger charges from), its match, the event told
    and the decision log's start line all say the same moment."""
    if submitted_at.tzinfo is None:  # SQLite hands back naive datetimes; paika stores UTC
        submitted_at = submitted_at.replace(tzinfo=UTC)
    return max(cycle_at, submitted_at)


def _confirm(job: Job, now: datetime) -> None:
    """The host took the start: the run exists there."""
    job.confirmed_at = job.confirmed_at or now
    job.missing_since = None


def _gpus_of(session: Session, job_id: int) -> list[Gpu]:
    gpus = [
        session.get(Gpu, a.gpu_id)
        for a in cluster_queries.open_allocations(session=session, job_id=job_id)
    ]
    return [g for g in gpus if g is not None]


def _card_share(job: Job, host: str, sharing: Sharing | None) -> CardShare:
    """How a run on a shared card is kept apart on `host`: its mode there (advisory when the
    policy no longer names the host: the run still must not take the card whole), the memory
    it declared, and with MPS an even share of the card's SMs among as many jobs as a card
    takes (MPS's limit is a ceiling, not a reservation: idle SMs are not lent)."""
    mode = (sharing.mode_of(host) if sharing is not None else "") or "advisory"
    memory_mib = max(1, math.ceil((job.min_memory_gib or 0.0) * 1024))
    most = sharing.max_jobs_per_card if sharing is not None else 2
    threads = math.ceil(100 / most) if mode == "mps" else None
    return CardShare(mode, memory_mib, threads)


def _orders(
    session: Session,
    job: Job,
    gpus: list[Gpu],
    report_url: str | None = None,
    preemption: Preemption | None = None,
    sharing: Sharing | None = None,
) -> list[StartOrder]:
    """One start order per host the job's GPUs are on (usually one). A resent start carries
    the same report secret: it is the same run. Each run is told which it is
    (PAIKA_ATTEMPT, 1-based) and how often the job was preempted (PAIKA_PREEMPTIONS); a job
    that checkpoints and resumes also where its checkpoint is (PAIKA_CHECKPOINT_DIR): its
    checkpoint=, else `<checkpoint_root>/job-<id>`, else a folder its host's agent keeps."""
    by_host: dict[int, list[int]] = {}
    for gpu in gpus:
        by_host.setdefault(gpu.host_id, []).append(gpu.index)
    parts = [
        a.share_milli for a in cluster_queries.open_allocations(session=session, job_id=job.id)
    ]
    shared = any(part < WHOLE_CARD for part in parts)
    hosts = {host_id: session.get(Host, host_id) for host_id in by_host}
    names = [h.name for h in hosts.values() if h is not None]
    orders = []
    for rank, (host_id, indices) in enumerate(sorted(by_host.items())):
        host = hosts[host_id]
        if host is None:
            continue
        env = {
            "PAIKA_HOSTS": ",".join(names),
            "PAIKA_NODE_RANK": str(rank),
            "PAIKA_JOB_NAME": job.name,
        }
        env["PAIKA_ATTEMPT"] = str(job.attempts)
        env["PAIKA_PREEMPTIONS"] = str(job.preemptions)
        if job.array_id is not None:  # its place in its array, and its sweep's values
            env.update(
                arrays.environment(
                    job.array_id, job.array_index or 0, job.array_size or 0, job.array_values or {}
                )
            )
        checkpoints = None
        if job.preemptible:
            place = (
                preemption.checkpoint_of(job.id or 0, job.checkpoint)
                if preemption is not None
                else job.checkpoint
            )
            if place:
                env["PAIKA_CHECKPOINT_DIR"] = place
            else:
                checkpoints = f"job-{job.id}"
        if job.report_token and not is_token_digest(job.report_token):  # not a restored digest
            env["PAIKA_JOB_TOKEN"] = job.report_token
            if report_url:
                env["PAIKA_REPORT_URL"] = report_url
        orders.append(
            StartOrder(
                job.id or 0,
                job.attempts,
                host.name,
                host.url,
                tuple(sorted(indices)),
                job.command,
                job.image,
                env,
                job.account,
                checkpoints,
                gpu_type=next((g.gpu_type for g in gpus if g.host_id == host_id), None),
                share=_card_share(job, host.name, sharing) if shared else None,
                # As the policy plans it (the owner's usual overrun, a resumed job's rest):
                # Slurm's --time adds its margin to this, and must not cut the plan short.
                wall_hours=expected_wall_hours(session, job),
            )
        )
    return orders


def _where(start: Start) -> dict[str, object]:
    """Where a first start went, as its notice tells it."""
    return {"hosts": list(start.hosts), "gpus": len(start.gpu_ids), "gpu_type": start.gpu_type}
