"""The scheduling cycle, one step a line:

1. poll every agent                         (hosts/poll.py)
2. apply the reports; reconcile running jobs (hosts/inventory.py, hosts/reconcile.py)
3. send again the starts an agent never got; send the stops paika asked for
4. snapshot the database and run the policy  (snapshots.py, policy/)
5. admit each start: persist first, then dispatch; on failure undo and requeue
6. record preemptions (their stops go out in step 3 of this and later cycles)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from scheduler import lifecycle
from scheduler.clock import Clock
from scheduler.config import PolicyConfig
from scheduler.dispatch import Dispatcher, DispatchError, StartOrder, agent_job_id
from scheduler.hosts.inventory import apply_reports
from scheduler.hosts.poll import Target
from scheduler.hosts.reconcile import ACTOR, REQUEUED_STOPS, reconcile
from scheduler.hosts.report import HostReport
from scheduler.notify import Event, EventKind, Notifier
from scheduler.policy.plan import Plan, Preempt, Start
from scheduler.policy.scheduler import schedule
from scheduler.snapshots import build_snapshot
from storage.db import session_scope
from storage.models import Allocation, Gpu, Host, Job, JobState, Match
from storage.queries import audit
from storage.queries import cluster as cluster_queries
from storage.queries import jobs as job_queries

log = logging.getLogger(__name__)
Poller = Callable[[Sequence[Target]], Mapping[str, HostReport]]


@dataclass
class CycleResult:
    """What one cycle did, for logs, the demo and tests."""

    at: datetime
    reports: Mapping[str, HostReport] = field(default_factory=dict)
    started: list[int] = field(default_factory=list)
    requeued: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    plan: Plan | None = None


class Cycle:
    """Runs the cycle against one database with one dispatcher and one notifier."""

    def __init__(
        self,
        engine: Engine,
        policy: PolicyConfig,
        clock: Clock,
        dispatcher: Dispatcher,
        notifier: Notifier,
        poller: Poller,
    ) -> None:
        self.engine, self.policy, self.clock = engine, policy, clock
        self.dispatcher, self.notifier, self.poller = dispatcher, notifier, poller
        self._last_sample: datetime | None = None

    def run_once(self) -> CycleResult:
        """One full cycle; returns what it did."""
        result = CycleResult(self.clock.now())
        result.reports = self.poller(self._targets())
        sample = self._sample_due(result.at)
        with session_scope(self.engine) as session:
            result.events += apply_reports(
                session, self.policy, result.reports, result.at, sample=sample
            )
            found = reconcile(session, self.policy, result.reports, result.at)
            session.commit()  # the writes end here; the policy runs outside a write transaction
            # Same session: the GPUs, jobs and allocations just loaded are reused, not rebuilt.
            snapshot = build_snapshot(session, self.policy, result.at)
        result.events += found.events
        self._resend_starts(found.resend)
        self._send_stops(found.stops, found.orphans)
        result.plan = schedule(snapshot)
        self._admit_all(result.plan.starts, result)
        self._record_preemptions(result.plan.preemptions, result)
        for event in result.events:
            self.notifier.notify(event)
        return result

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

    def _targets(self) -> list[Target]:
        with Session(self.engine) as session:
            return [
                Target(host.name, host.url) for host in cluster_queries.host_rows(session=session)
            ]

    def _admit_all(self, starts: tuple[Start, ...], result: CycleResult) -> None:
        """Persist each start (the database refuses a GPU already held), then dispatch them
        all at once, a host's slowness costing only its own jobs; undo what failed."""
        persisted = [
            (start, orders) for start in starts if (orders := self._persist_start(start, result.at))
        ]
        if not persisted:
            return
        with ThreadPoolExecutor(max_workers=min(32, len(persisted))) as pool:
            failures = list(pool.map(self._dispatch, [orders for _, orders in persisted]))
        for (start, _), failure in zip(persisted, failures, strict=True):
            if failure is not None:
                log.warning("start failed, requeueing: %s", failure)
                self._undo_start(
                    start.job_id, result.at, f"start failed on {failure.host}: {failure.problem}"
                )
                result.requeued.append(start.job_id)
                text = f"job #{start.job_id} could not start on {failure.host} and is queued again: {failure.problem}"
                result.events.append(Event(EventKind.JOB_REQUEUED, result.at, text, start.job_id))
                continue
            result.started.append(start.job_id)
            job = self._job(start.job_id)
            text = f"job #{start.job_id} {job.name} started on {', '.join(start.hosts)} ({len(start.gpu_ids)}× {start.gpu_type})"
            result.events.append(
                Event(EventKind.JOB_STARTED, result.at, text, start.job_id, owner=job.owner)
            )

    def _dispatch(self, orders: list[StartOrder]) -> DispatchError | None:
        try:
            for order in orders:
                self.dispatcher.start(order)
        except DispatchError as exc:
            return exc
        return None

    def _persist_start(self, start: Start, now: datetime) -> list[StartOrder] | None:
        try:
            with session_scope(self.engine) as session:
                job = job_queries.get_job(session=session, job_id=start.job_id)
                if (
                    job is None
                    or job.state not in (JobState.QUEUED, JobState.PREEMPTED)
                    or not job.data_ready
                ):
                    return None  # changed since the snapshot (cancelled, data marked not ready …)
                gpus = [
                    gpu for gpu_id in start.gpu_ids if (gpu := session.get(Gpu, gpu_id)) is not None
                ]
                for gpu in gpus:
                    allocation = Allocation(
                        job_id=job.id or 0, gpu_id=gpu.id or 0, active_gpu_id=gpu.id, started_at=now
                    )
                    session.add(allocation)
                if job.state == JobState.PREEMPTED:
                    lifecycle.move(
                        session, job, JobState.QUEUED, at=now, actor=ACTOR, reason="requeued"
                    )
                lifecycle.move(
                    session, job, JobState.RUNNING, at=now, actor=ACTOR, reason=start.match.reason
                )
                job.attempts += 1
                job.missing_since = None
                session.add(job)
                session.add(
                    Match(
                        job_id=job.id or 0,
                        at=now,
                        chosen_type=start.gpu_type,
                        alternatives=[asdict(a) for a in start.match.alternatives],
                        reason=start.match.reason,
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
                return _orders(session, job, gpus)
        except IntegrityError:
            log.warning(
                "job #%s: a GPU it was given is already held; it waits for the next cycle",
                start.job_id,
            )
            return None

    def _undo_start(self, job_id: int, now: datetime, reason: str) -> None:
        with session_scope(self.engine) as session:
            job = job_queries.get_job(session=session, job_id=job_id)
            if job is None:
                return
            for allocation in cluster_queries.open_allocations(session=session, job_id=job_id):
                session.delete(allocation)  # it never ran: no GPU time to charge
            lifecycle.move(session, job, JobState.QUEUED, at=now, actor=ACTOR, reason=reason)

    def _resend_starts(self, job_ids: list[int]) -> None:
        for job_id in job_ids:
            with Session(self.engine) as session:
                job = job_queries.get_job(session=session, job_id=job_id)
                gpus = [
                    session.get(Gpu, a.gpu_id)
                    for a in cluster_queries.open_allocations(session=session, job_id=job_id)
                ]
                orders = _orders(session, job, [g for g in gpus if g is not None]) if job else []
            for order in orders:
                try:
                    self.dispatcher.start(order)  # agents start a job id once; a resend is safe
                except DispatchError as exc:
                    log.warning("resending start failed: %s", exc)

    def _send_stops(self, job_ids: list[int], orphans: list[tuple[str, str]]) -> None:
        grace = self.policy.scheduler.preemption.idle_grace_minutes * 60
        with Session(self.engine) as session:
            urls = {host.name: host.url for host in cluster_queries.host_rows(session=session)}
            targets: list[tuple[str, str, str, float]] = []
            for job_id in job_ids:
                job = job_queries.get_job(session=session, job_id=job_id)
                for order in _orders(session, job, _gpus_of(session, job_id)) if job else []:
                    # Stops that requeue the job leave it time to checkpoint.
                    wait = grace if job and job.stop_reason in REQUEUED_STOPS else 30.0
                    targets.append(
                        (order.host, order.url, agent_job_id(job_id, order.attempt), wait)
                    )
        targets += [(host, urls[host], run, 30.0) for host, run in orphans if host in urls]
        for host, url, run, wait in targets:
            try:
                self.dispatcher.stop(host, url, run, wait)
            except DispatchError as exc:
                log.warning("stop failed: %s", exc)

    def _record_preemptions(self, preemptions: tuple[Preempt, ...], result: CycleResult) -> None:
        for preempt in preemptions:
            with session_scope(self.engine) as session:
                job = job_queries.get_job(session=session, job_id=preempt.job_id)
                if (
                    job is None
                    or job.state != JobState.RUNNING
                    or job.stop_requested_at is not None
                ):
                    continue
                job.stop_requested_at, job.stop_reason = result.at, "preempt"
                session.add(job)
                audit.record(
                    session=session,
                    at=result.at,
                    actor=ACTOR,
                    action="job.preempt",
                    target_kind="job",
                    target_id=job.id,
                    detail={"for_job": preempt.for_job},
                )
                result.preempted.append(job.id or 0)
                minutes = self.policy.scheduler.preemption.idle_grace_minutes
                text = f"job #{job.id} {job.name} (idle class) is asked to checkpoint and stop within {minutes:g} min for core job #{preempt.for_job}; it is queued again after"
                result.events.append(
                    Event(EventKind.JOB_PREEMPTED, result.at, text, job.id, owner=job.owner)
                )
        if result.preempted:
            self._send_stops(result.preempted, [])

    def _job(self, job_id: int) -> Job:
        with Session(self.engine) as session:
            job = job_queries.get_job(session=session, job_id=job_id)
            assert job is not None
            return job


def _gpus_of(session: Session, job_id: int) -> list[Gpu]:
    gpus = [
        session.get(Gpu, a.gpu_id)
        for a in cluster_queries.open_allocations(session=session, job_id=job_id)
    ]
    return [g for g in gpus if g is not None]


def _orders(session: Session, job: Job, gpus: list[Gpu]) -> list[StartOrder]:
    """One start order per host the job's GPUs are on (usually one)."""
    by_host: dict[int, list[int]] = {}
    for gpu in gpus:
        by_host.setdefault(gpu.host_id, []).append(gpu.index)
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
            )
        )
    return orders
