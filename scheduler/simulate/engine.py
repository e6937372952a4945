"""The event-driven replay: simulated time, the real policy.

Events are kept in a heap: a job arrives, its data becomes ready, it ends, a preempted job's
deadline comes, or a waiting job's cheaper-type wait runs out. After each batch of events at
the same moment the engine builds a `Snapshot` and calls the policy once, then applies the
plan: a started job really runs its TRUE duration (its GPUs are busy until then), while the
policy only ever sees the ESTIMATED end. A preempted job stops at its deadline, keeps its
progress as if checkpointed, and waits again with what is left of its run.

A pass is skipped when it cannot change anything, which keeps an 80k-job replay to minutes:
no ready job waits; or nothing that matters changed since the last pass (a job whose data is
not ready arriving changes nothing); or fewer GPUs are free than the smallest ready job needs
and no ready core job could preempt a running idle one. Between events the policy is not
called, so an effect that comes only from time passing (aging, starvation order) shows at the
next event; the wait for a cheaper card type (`costlier_after_s`) gets its own wake-up event.
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from scheduler.policy.matching import CardNeeds, CardType, fitting_types
from scheduler.policy.plan import Plan, Preempt, Start
from scheduler.policy.scheduler import schedule as policy_schedule
from scheduler.policy.snapshot import HOUR, Gpu, Host, Pending, Running, Snapshot, TypeChoice
from scheduler.simulate.draw import Drawn
from scheduler.simulate.policies import PolicySetup
from scheduler.simulate.traces import ClusterSpec, TraceJob

ScheduleFn = Callable[[Snapshot], Plan]
ProgressFn = Callable[[int, int], None]

# Event kinds; at one moment ends are handled before stops, readiness and arrivals.
END, STOP, READY, ARRIVE, WAKE = range(5)
WAKE_SLACK_S = 1.0  # wake a little after the cheaper-type wait runs out
PROGRESS_EVERY = 2000  # events


class PolicyViolation(RuntimeError):
    """The policy returned a plan the cluster cannot carry out (a bug in the policy)."""


def real_schedule(snapshot: Snapshot) -> Plan:
    """The one place the simulator calls the policy: `schedule(snapshot, explain=False)`."""
    return policy_schedule(snapshot, explain=False)


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A job as the replay sees it: the trace's facts plus the drawn attributes."""

    id: int
    submit: float
    duration: float  # the true run time
    gpus: int
    needs: CardNeeds
    priority: str
    team: str
    owner: str
    ready_at: float
    est_gpu_hours: float
    queue: str = "default"


def job_specs(
    jobs: Sequence[TraceJob], drawn: Sequence[Drawn], setup: PolicySetup
) -> list[JobSpec]:
    """Trace jobs with their draws; the oracle's estimates are the true run times."""
    specs: list[JobSpec] = []
    for job, extra in zip(jobs, drawn, strict=True):
        true_hours = job.duration * job.gpus / HOUR
        specs.append(
            JobSpec(
                id=job.id,
                submit=job.submit,
                duration=job.duration,
                gpus=job.gpus,
                needs=CardNeeds(allowed_types=job.gpu_types),
                priority=extra.priority,
                team=extra.team,
                owner=extra.user,
                ready_at=job.submit + extra.ready_delay,
                est_gpu_hours=true_hours if setup.oracle_estimates else extra.est_gpu_hours,
                queue=job.queue,
            )
        )
    return specs


@dataclass(frozen=True, slots=True)
class JobRecord:
    """What became of one job."""

    id: int
    priority: str
    queue: str
    gpus: int
    submit: float
    ready_at: float
    first_held: float | None  # when it first took GPUs
    first_run: float | None  # when it first ran real work (later than first_held if it held idle)
    end: float | None
    queue_delay: float | None
    gpu_type: str | None  # the type of its last run
    preemptions: int
    held_gpu_s: float
    held_idle_gpu_s: float
    costlier_gpu_s: float
    cost: float

    @property
    def wait_to_run(self) -> float | None:
        """From the moment it could run (submit and data ready) to its first real work."""
        return None if self.first_run is None else self.first_run - max(self.submit, self.ready_at)

    @property
    def jct(self) -> float | None:
        return None if self.end is None else self.end - self.submit


@dataclass
class RunResult:
    """One replay of one cluster."""

    label: str
    policy: str
    gpus: int
    nodes: int
    hold_gpus_for_data: bool
    records: list[JobRecord]
    never_fits: int
    never_started: int
    first_submit: float
    makespan: float
    busy_gpu_s: float
    held_idle_gpu_s: float
    cost: float
    costlier_gpu_s: float
    preemptions: int
    calls: int
    skipped: int
    pass_total_s: float
    pass_max_s: float
    wall_s: float


@dataclass(slots=True)
class _Job:
    spec: JobSpec
    est_run_s: float  # estimated wall time of what is left to run
    remaining: float  # true run time left
    cheapest_price: float
    ready: bool = False
    token: int = 0
    gpu_ids: tuple[int, ...] = ()
    gpu_type: str | None = None
    held_at: float = 0.0
    run_start: float = 0.0
    first_held: float | None = None
    first_run: float | None = None
    end: float | None = None
    preemptions: int = 0
    held_gpu_s: float = 0.0
    held_idle_gpu_s: float = 0.0
    costlier_gpu_s: float = 0.0
    cost: float = 0.0


@dataclass
class _Usage:
    value: float = 0.0
    at: float = 0.0


@dataclass
class Engine:
    """Replays `jobs` on `cluster` under `setup`, calling `schedule` for every pass."""

    jobs: Sequence[JobSpec]
    cluster: ClusterSpec
    catalog: tuple[CardType, ...]
    setup: PolicySetup
    schedule: ScheduleFn | None = None
    label: str = "all"
    fair_share_half_life_hours: float = 72.0
    progress: ProgressFn | None = None
    host_prefix: str = "n"
    _heap: list[tuple[float, int, int, int, int]] = field(default_factory=list, init=False)
    _seq: int = field(default=0, init=False)

    def run(self) -> RunResult:
        wall = time.perf_counter()
        schedule = self.schedule or real_schedule
        self._heap.clear()
        self._busy_gpu_s = 0.0
        self._build_cluster()
        prices = {card.name: card.price_per_gpu_hour for card in self.catalog}
        capacity = self.cluster.gpus_by_type()
        knobs = self.setup.knobs
        hold = self.setup.hold_gpus_for_data
        jobs: dict[int, _Job] = {}
        never_fits = 0
        for spec in self.jobs:
            fitting = fitting_types(self.catalog, spec.needs)
            if spec.gpus > max((capacity.get(card.name, 0) for card in fitting), default=0):
                never_fits += 1
                continue
            present = [card for card in fitting if capacity.get(card.name, 0) > 0]
            job = _Job(
                spec,
                est_run_s=spec.est_gpu_hours / spec.gpus * HOUR,
                remaining=spec.duration,
                cheapest_price=min(card.price_per_gpu_hour for card in present),
            )
            jobs[spec.id] = job
            self._push(spec.submit, ARRIVE, spec.id)
            if not hold and spec.ready_at > spec.submit:
                self._push(spec.ready_at, READY, spec.id)
            prices_here = {card.price_per_gpu_hour for card in present}
            if knobs.type_choice is TypeChoice.CHEAPEST and len(prices_here) > 1:
                wait = knobs.costlier_after_s + WAKE_SLACK_S
                self._push(spec.submit + wait, WAKE, spec.id)
                if spec.ready_at > spec.submit and not hold:
                    self._push(spec.ready_at + wait, WAKE, spec.id)

        pending: dict[int, _Job] = {}
        running: dict[int, _Job] = {}
        pending_view: dict[int, Pending] = {}  # what the policy sees, kept up to date
        running_view: dict[int, Running] = {}
        ready_sizes: Counter[int] = Counter()  # GPUs asked by ready pending jobs
        ready_core = 0
        idle_running = 0  # running idle-class jobs not yet asked to stop
        usage: dict[str, _Usage] = {}
        decay = HOUR * self.fair_share_half_life_hours
        calls = skipped = preemptions = finished = events = 0
        pass_total = pass_max = 0.0
        dirty = False
        total = len(jobs)

        def pending_obj(job: _Job) -> Pending:
            spec = job.spec
            return Pending(
                id=spec.id,
                priority=spec.priority,
                team=spec.team,
                owner=spec.owner,
                submitted_at=spec.submit,
                data_ready=job.ready or hold,
                gpus=spec.gpus,
                needs=spec.needs,
                est_gpu_hours=job.est_run_s * spec.gpus / HOUR,
            )

        def enqueue(job: _Job) -> None:
            nonlocal ready_core
            pending_view[job.spec.id] = pending_obj(job)
            pending[job.spec.id] = job
            if job.ready or hold:
                ready_sizes[job.spec.gpus] += 1
                ready_core += job.spec.priority == "core"

        def dequeue(job: _Job) -> None:
            nonlocal ready_core
            del pending[job.spec.id]
            del pending_view[job.spec.id]
            if job.ready or hold:
                ready_sizes[job.spec.gpus] -= 1
                if not ready_sizes[job.spec.gpus]:
                    del ready_sizes[job.spec.gpus]
                ready_core -= job.spec.priority == "core"

        def release(job: _Job, now: float) -> None:
            """Close the job's current run segment at `now` and free its GPUs."""
            nonlocal idle_running
            spec = job.spec
            assert job.gpu_type is not None
            held = (now - job.held_at) * spec.gpus
            busy = max(0.0, now - job.run_start) * spec.gpus
            job.held_gpu_s += held
            job.held_idle_gpu_s += held - busy
            price = prices[job.gpu_type]
            job.cost += held / HOUR * price
            if price > job.cheapest_price:
                job.costlier_gpu_s += held
            self._busy_gpu_s += busy
            if spec.priority == "idle" and not running_view[spec.id].preempting:
                idle_running -= 1
            self._free_gpus(job.gpu_ids)
            del running[spec.id]
            del running_view[spec.id]
            job.token += 1
            entry = usage.setdefault(spec.team, _Usage(at=now))
            entry.value = entry.value * 0.5 ** ((now - entry.at) / decay) + held / HOUR
            entry.at = now

        def start(plan_start: Start, now: float) -> None:
            nonlocal idle_running
            job = pending.get(plan_start.job_id)
            where = f"t={now:.0f}s: start of job {plan_start.job_id}"
            if job is None:
                raise PolicyViolation(f"{where}: the job is not pending")
            spec = job.spec
            if not (job.ready or hold):
                raise PolicyViolation(f"{where}: its data is not ready")
            if len(plan_start.gpu_ids) != spec.gpus or len(set(plan_start.gpu_ids)) != spec.gpus:
                raise PolicyViolation(
                    f"{where}: {len(set(plan_start.gpu_ids))} GPUs for a job of {spec.gpus}"
                )
            for gpu_id in plan_start.gpu_ids:
                if not 0 <= gpu_id < len(self._gpus):
                    raise PolicyViolation(f"{where}: no GPU {gpu_id}")
                gpu = self._gpus[gpu_id]
                if gpu.job_id is not None:
                    raise PolicyViolation(f"{where}: GPU {gpu_id} is held by job {gpu.job_id}")
                if gpu.gpu_type != plan_start.gpu_type:
                    raise PolicyViolation(
                        f"{where}: GPU {gpu_id} is a {gpu.gpu_type}, not {plan_start.gpu_type}"
                    )
            card = next(c for c in self.catalog if c.name == plan_start.gpu_type)
            if not spec.needs.admits(card):
                raise PolicyViolation(f"{where}: type {card.name} does not meet {spec.needs}")
            dequeue(job)
            self._hold_gpus(plan_start.gpu_ids, spec.id)
            job.gpu_ids = plan_start.gpu_ids
            job.gpu_type = plan_start.gpu_type
            job.held_at = now
            job.run_start = max(now, spec.ready_at) if hold else now
            if job.first_held is None:
                job.first_held = now
                job.first_run = job.run_start
            job.token += 1
            self._push(job.run_start + job.remaining, END, spec.id, job.token)
            running_view[spec.id] = Running(
                id=spec.id,
                priority=spec.priority,
                team=spec.team,
                gpu_ids=plan_start.gpu_ids,
                gpu_type=plan_start.gpu_type,
                started_at=now,
                expected_end=plan_start.expected_end,
            )
            running[spec.id] = job
            idle_running += spec.priority == "idle"

        def preempt(order: Preempt, now: float) -> None:
            nonlocal idle_running, preemptions
            job = running.get(order.job_id)
            if job is None:
                raise PolicyViolation(f"t={now:.0f}s: preempts job {order.job_id}, not running")
            r = running_view[order.job_id]
            if r.preempting:
                return
            if job.spec.priority == "idle":
                idle_running -= 1
            preemptions += 1
            job.preemptions += 1
            running_view[order.job_id] = Running(
                r.id, r.priority, r.team, r.gpu_ids, r.gpu_type, r.started_at, r.expected_end, True
            )
            self._push(max(order.deadline, now), STOP, job.spec.id, job.token)

        heap = self._heap
        while heap:
            now = heap[0][0]
            while heap and heap[0][0] == now:
                _, kind, _, job_id, token = heapq.heappop(heap)
                events += 1
                job = jobs[job_id]
                if kind == END:
                    if token != job.token or job_id not in running:
                        continue
                    job.remaining = 0.0
                    release(job, now)
                    job.end = now
                    finished += 1
                    dirty = True
                elif kind == STOP:
                    if token != job.token or job_id not in running:
                        continue
                    ran = max(0.0, now - job.run_start)
                    job.remaining = max(job.remaining - ran, 0.0)
                    release(job, now)
                    initial = job.spec.est_gpu_hours / job.spec.gpus * HOUR
                    job.est_run_s = max(job.est_run_s - ran, 0.1 * initial, 60.0)
                    if job.remaining <= 0.0:
                        job.end = now
                        finished += 1
                    else:
                        enqueue(job)
                    dirty = True
                elif kind == READY:
                    job.ready = True
                    if job_id in pending:
                        dequeue(job)
                        enqueue(job)
                        dirty = True
                elif kind == ARRIVE:
                    job.ready = hold or job.spec.ready_at <= job.spec.submit
                    enqueue(job)
                    dirty = dirty or job.ready
                elif job_id in pending and (job.ready or hold):  # WAKE
                    dirty = True
                if self.progress is not None and events % PROGRESS_EVERY == 0:
                    self.progress(finished, total)
            if not dirty or not ready_sizes:
                continue
            can_preempt = knobs.idle_preemption and ready_core > 0 and idle_running > 0
            if self._free < min(ready_sizes) and not can_preempt:
                skipped += 1
                continue
            snapshot = Snapshot(
                now=now,
                hosts=self._host_tuple(),
                running=tuple(running_view.values()),
                pending=tuple(pending_view.values()),
                catalog=self.catalog,
                knobs=knobs,
                team_usage={
                    team: entry.value * 0.5 ** ((now - entry.at) / decay)
                    for team, entry in usage.items()
                },
            )
            began = time.perf_counter()
            plan = schedule(snapshot)
            spent = time.perf_counter() - began
            calls += 1
            pass_total += spent
            pass_max = max(pass_max, spent)
            dirty = False
            for plan_start in plan.starts:
                start(plan_start, now)
            for order in plan.preemptions:
                preempt(order, now)
        if self.progress is not None:
            self.progress(finished, total)

        records = [self._record(job, hold) for job in jobs.values()]
        ends = [job.end for job in jobs.values() if job.end is not None]
        first_submit = min((spec.submit for spec in self.jobs), default=0.0)
        return RunResult(
            label=self.label,
            policy=self.setup.name,
            gpus=self.cluster.gpus,
            nodes=self.cluster.nodes,
            hold_gpus_for_data=hold,
            records=records,
            never_fits=never_fits,
            never_started=sum(1 for job in jobs.values() if job.first_held is None),
            first_submit=first_submit,
            makespan=max(ends) - first_submit if ends else 0.0,
            busy_gpu_s=self._busy_gpu_s,
            held_idle_gpu_s=sum(job.held_idle_gpu_s for job in jobs.values()),
            cost=sum(job.cost for job in jobs.values()),
            costlier_gpu_s=sum(job.costlier_gpu_s for job in jobs.values()),
            preemptions=preemptions,
            calls=calls,
            skipped=skipped,
            pass_total_s=pass_total,
            pass_max_s=pass_max,
            wall_s=time.perf_counter() - wall,
        )

    # -- the cluster ---------------------------------------------------------------------------

    def _build_cluster(self) -> None:
        memory = {card.name: card.memory_gib for card in self.catalog}
        self._gpus: list[Gpu] = []
        self._host_of: list[int] = []
        self._host_names: list[str] = []
        self._host_ranges: list[tuple[int, int]] = []
        for group in self.cluster.groups:
            if group.gpu_type not in memory:
                raise ValueError(
                    f"GPU type {group.gpu_type!r} of the cluster is not in the catalog"
                )
            for _ in range(group.count):
                host = len(self._host_names)
                name = f"{self.host_prefix}{host:04d}"
                first = len(self._gpus)
                for gpu_id in range(first, first + group.gpus_per_node):
                    self._gpus.append(Gpu(gpu_id, name, group.gpu_type, memory[group.gpu_type]))
                    self._host_of.append(host)
                self._host_names.append(name)
                self._host_ranges.append((first, len(self._gpus)))
        self._hosts: list[Host] = [
            Host(name, tuple(self._gpus[a:b]))
            for name, (a, b) in zip(self._host_names, self._host_ranges, strict=True)
        ]
        self._dirty_hosts: set[int] = set()
        self._hosts_cache: tuple[Host, ...] | None = None
        self._free = len(self._gpus)

    def _set_holder(self, gpu_ids: tuple[int, ...], job_id: int | None) -> None:
        for gpu_id in gpu_ids:
            gpu = self._gpus[gpu_id]
            self._gpus[gpu_id] = Gpu(gpu.id, gpu.host, gpu.gpu_type, gpu.memory_gib, job_id=job_id)
            self._dirty_hosts.add(self._host_of[gpu_id])

    def _hold_gpus(self, gpu_ids: tuple[int, ...], job_id: int) -> None:
        self._set_holder(gpu_ids, job_id)
        self._free -= len(gpu_ids)

    def _free_gpus(self, gpu_ids: tuple[int, ...]) -> None:
        self._set_holder(gpu_ids, None)
        self._free += len(gpu_ids)

    def _host_tuple(self) -> tuple[Host, ...]:
        if self._dirty_hosts or self._hosts_cache is None:
            for host in self._dirty_hosts:
                a, b = self._host_ranges[host]
                self._hosts[host] = Host(self._host_names[host], tuple(self._gpus[a:b]))
            self._dirty_hosts.clear()
            self._hosts_cache = tuple(self._hosts)
        return self._hosts_cache

    def _push(self, at: float, kind: int, job_id: int, token: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, kind, self._seq, job_id, token))

    @staticmethod
    def _record(job: _Job, hold: bool) -> JobRecord:
        spec = job.spec
        since = spec.submit if hold else max(spec.submit, spec.ready_at)
        return JobRecord(
            id=spec.id,
            priority=spec.priority,
            queue=spec.queue,
            gpus=spec.gpus,
            submit=spec.submit,
            ready_at=spec.ready_at,
            first_held=job.first_held,
            first_run=job.first_run,
            end=job.end,
            queue_delay=None if job.first_held is None else job.first_held - since,
            gpu_type=job.gpu_type,
            preemptions=job.preemptions,
            held_gpu_s=job.held_gpu_s,
            held_idle_gpu_s=job.held_idle_gpu_s,
            costlier_gpu_s=job.costlier_gpu_s,
            cost=job.cost,
        )
