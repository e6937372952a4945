"""The event-driven replay: simulated time, the real policy.

Events are kept in a heap: a job arrives, its data becomes ready, it ends, a preempted job's
deadline comes, or a waiting job's cheaper-type wait runs out. After each batch of events at
the same moment the engine builds a `Snapshot` and calls the policy once, then applies the
plan: a started job really runs its TRUE duration (its GPUs are busy until then), while the
policy only ever sees the ESTIMATED end. A preempted job stops at its deadline and waits again
with what is left of its run: a job that declared it checkpoints (`preemptible`) keeps the work
up to its last checkpoint (one every `checkpoint_s` of work since its run began) and loses the
rest, and pays `restart_s` again when it resumes; both are held GPU time, charged, and counted
apart as lost. An idle-class job that did not declare it keeps all its progress, as if it
checkpointed on the signal (the model of earlier rounds).

Shared cards (`Engine.sharing`, e.g. "mps": every simulated host shares): a job with a
`share_gib` asks the policy for a shared card (`Pending.share`), and a start with `share_milli`
puts it beside the card's other jobs. The engine keeps each card's jobs and their parts of it,
refuses a start that books a card past whole (a PolicyViolation, as for a card held whole),
and frees the card when its last job ends. Jobs on one card slow each other down by the model
the policy uses: while a job has neighbours its work advances at 1 / (1 + s), s the sum of
`colocation.expected_slowdown` with each neighbour whose fingerprint and its own are both
known (0 otherwise), and its end is worked out again whenever a neighbour arrives or leaves. A
shared job stopped for a core job keeps its progress as an idle-class job does (one that
declared it checkpoints goes back to its checkpoint). A shared card counts once in the GPU
time held and busy while any job holds it (`held_card_gpu_s`); a whole-card job its GPUs.

A calendar (`Engine.calendar`, calendar.py) adds planned maintenance and booked cards: each
window is known from its notice (the policy sees the host's `closes_at`, or, as the baseline,
the host drains), closes its host at its start, stopping what still runs there (a job that
checkpoints goes back to its checkpoint, an idle-class job keeps its progress, any other job
loses its run; each is queued again), and opens it at its end; each booking is in the
snapshot's `team_windows` from its notice to its end. The engine keeps each host's held GPU
time as it goes, to say how much of each notice held jobs.

A pass is skipped when it cannot change anything, which keeps an 80k-job replay to minutes:
no ready job waits; or nothing that matters changed since the last pass (a job whose data is
not ready arriving changes nothing); or fewer GPUs are free than the smallest ready job needs
and no ready core job could preempt a running idle one. The policy is asked for no reasons
and no reservations, so a pass where nothing can start but a job might be stopped (most of
them with preemptible work running) orders only the jobs a stop could serve, and decides the
same. Between events the policy is not called, so an effect that comes only from time passing
(aging, starvation order) shows at the next event; the wait for a cheaper card type (`costlier_after_s`) gets its own wake-up event.
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from scheduler.policy.colocation import Fingerprint, expected_slowdown
from scheduler.policy.matching import CardNeeds, CardType, fitting_types
from scheduler.policy.plan import HostOut, Plan, Preempt, Start
from scheduler.policy.priority_classes import CLASS_RANK
from scheduler.policy.scheduler import costlier_after
from scheduler.policy.scheduler import schedule as policy_schedule
from scheduler.policy.snapshot import (
    HOUR,
    Backfill,
    Gpu,
    Host,
    Pending,
    Running,
    Snapshot,
    TeamWindow,
    TypeChoice,
    WithinClass,
    wall_hours,
)
from scheduler.simulate.calendar import (
    BookingFigures,
    Calendar,
    WindowFigures,
    calendar_summary,
)
from scheduler.simulate.draw import DrawConfig, Drawn
from scheduler.simulate.policies import PolicySetup
from scheduler.simulate.shares import WHOLE_CARDS, ShareDraw
from scheduler.simulate.traces import ClusterSpec, TraceJob

ScheduleFn = Callable[[Snapshot], Plan]
ProgressFn = Callable[[int, int], None]

# Event kinds; at one moment ends are handled before stops, readiness and arrivals, and the
# calendar's after them (its events name a window or booking, not a job).
END, STOP, READY, ARRIVE, WAKE = range(5)
NOTICE, CLOSE, OPEN, BOOKING_NOTICE, BOOKING_START, BOOKING_END = range(5, 11)
WHOLE_MILLI = 1000  # thousandths: a whole card
WAKE_SLACK_S = 1.0  # wake a little after the cheaper-type wait runs out
PROGRESS_EVERY = 2000  # events


class PolicyViolation(RuntimeError):
    """The policy returned a plan the cluster cannot carry out (a bug in the policy)."""


def real_schedule(snapshot: Snapshot) -> Plan:
    """The one place the simulator calls the policy: without reasons, and without the places
    kept for blocked jobs (the replay only carries out starts and stops)."""
    return policy_schedule(snapshot, explain=False, reservations=False)


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
    preemptible: bool = False
    checkpoint_s: float = 1800.0  # a checkpoint every this much of its work
    restart_s: float = 300.0  # what resuming from a checkpoint costs
    grace_s: float = 60.0  # SIGTERM to exit
    # Sharing: the memory it declares when it may share a card (None: it holds whole cards),
    # how it uses a card (None: not known), and whether it asks for part of one card at all
    # (its class in the waits, with or without sharing).
    share_gib: float | None = None
    fingerprint: Fingerprint | None = None
    fraction: bool = False


def job_specs(
    jobs: Sequence[TraceJob],
    drawn: Sequence[Drawn],
    setup: PolicySetup,
    draws: DrawConfig | None = None,
    shares: Sequence[ShareDraw] | None = None,
) -> list[JobSpec]:
    """Trace jobs with their draws; the oracle's estimates are the true run times. A job that
    may share (`shares`) declares its memory (`CardNeeds.min_memory_gib`)."""
    config = draws or DrawConfig()
    specs: list[JobSpec] = []
    # One object per distinct need: the policy keys its per-pass caches on it, and equal
    # needs in one object are found without comparing them.
    kinds: dict[CardNeeds, CardNeeds] = {}
    for number, (job, extra) in enumerate(zip(jobs, drawn, strict=True)):
        true_hours = job.duration * job.gpus / HOUR
        share = shares[number] if shares is not None else WHOLE_CARDS
        needs = CardNeeds(allowed_types=job.gpu_types, min_memory_gib=share.share_gib)
        specs.append(
            JobSpec(
                id=job.id,
                submit=job.submit,
                duration=job.duration,
                gpus=job.gpus,
                needs=kinds.setdefault(needs, needs),
                priority=extra.priority,
                team=extra.team,
                owner=extra.user,
                ready_at=job.submit + extra.ready_delay,
                est_gpu_hours=true_hours if setup.oracle_estimates else extra.est_gpu_hours,
                queue=job.queue,
                preemptible=extra.preemptible,
                checkpoint_s=config.checkpoint_s,
                restart_s=config.restart_s,
                grace_s=config.preempt_grace_s,
                share_gib=share.share_gib,
                fingerprint=share.fingerprint,
                fraction=share.fraction,
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
    lost_gpu_s: float = 0.0  # work lost to preemption since the last checkpoint, and restarts
    rewait_s: float = 0.0  # time queued again after preemptions (ready, not running)
    maintenance_stops: int = 0  # times a maintenance window's start stopped it
    # Its class in the waits: "shared" (it asks for part of a card), "one_card", "multi_card"
    # or "core" (a core job, whatever its size).
    kind: str = "one_card"
    shared: bool = False  # it ran on a shared card
    neighboured: bool = False  # it ran beside another job on a card
    slowed_s: float = 0.0  # wall time its neighbours cost it

    @property
    def slowdown(self) -> float | None:
        """How much longer its run took for its neighbours (0.1: 10 %); None: it never ran
        on a shared card."""
        if not self.shared or self.end is None or self.first_run is None:
            return None
        ran = self.end - self.first_run - self.rewait_s
        return self.slowed_s / max(ran - self.slowed_s, 1e-9)

    @property
    def wait(self) -> float | None:
        """All its time queued while it could run: the first wait and every one after a stop."""
        return None if self.queue_delay is None else self.queue_delay + self.rewait_s

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
    # GPU time held: a shared card once while any job holds it, a whole-card job its GPUs.
    held_card_gpu_s: float = 0.0
    # The calendar's figures (calendar.calendar_summary's parts); empty without one.
    calendar_mode: str = ""
    windows: list[WindowFigures] = field(default_factory=list)
    bookings: list[BookingFigures] = field(default_factory=list)

    def calendar(self) -> dict[str, object] | None:
        """The calendar's figures of this replay, None without a calendar."""
        if not self.calendar_mode:
            return None
        return calendar_summary(self.calendar_mode, self.windows, self.bookings)


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
    overhead: float = 0.0  # restart time at the head of the current run
    requeued_at: float = 0.0
    rewait_s: float = 0.0
    lost_gpu_s: float = 0.0
    maintenance_stops: int = 0
    # On a shared card (share_milli > 0): how fast its work advances now (1: alone), from
    # when (`mark`), and the wall time its neighbours cost it in this run before `mark`.
    share_milli: int = 0
    rate: float = 1.0
    mark: float = 0.0
    slowed: float = 0.0
    slowed_s: float = 0.0  # over all its runs
    shared: bool = False
    neighboured: bool = False
    end_token: int = -1  # its pending END event (moved when its speed changes)


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
    # How the simulated hosts keep shared jobs apart ("mps", …); "": no card is shared.
    sharing: str = ""
    # Planned maintenance and booked cards (calendar.py); None: neither.
    calendar: Calendar | None = None

    def run(self) -> RunResult:
        """One replay from an empty cluster; every call starts afresh."""
        return _Replay(self).run()


class _Replay:
    """The state of one replay and its moves.

    The event loop, the handling of each event and the policy pass share a lot of state: the
    heap, the jobs, what the policy sees of them (kept up to date rather than rebuilt each
    pass), the counts that let a pass be skipped, and the figures of the result. It lives
    here as attributes, and each move (queue a job, take it off the queue, start, preempt,
    release) is a method.
    """

    def __init__(self, engine: Engine) -> None:
        self.wall = time.perf_counter()
        self.engine = engine
        self.schedule = engine.schedule or real_schedule
        self.catalog = engine.catalog
        self.knobs = engine.setup.knobs
        self.hold = engine.setup.hold_gpus_for_data
        self.decay = HOUR * engine.fair_share_half_life_hours
        self.cluster = _Cluster(engine.cluster, engine.catalog, engine.host_prefix, engine.sharing)
        self.prices = {card.name: card.price_per_gpu_hour for card in engine.catalog}
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.jobs: dict[int, _Job] = {}
        self.never_fits = 0
        self.pending: dict[int, _Job] = {}
        self.running: dict[int, _Job] = {}
        self.pending_view: dict[int, Pending] = {}  # what the policy sees, kept up to date
        self.running_view: dict[int, Running] = {}
        self.ready_sizes: Counter[int] = Counter()  # GPUs asked by ready pending jobs
        self.ready_core = 0
        self.idle_running = 0  # running idle-class jobs not yet asked to stop
        self.preemptible_running = 0  # running preemptible jobs not yet asked to stop
        self.shared_running = 0  # running jobs on shared cards not yet asked to stop
        self.ready_share = 0  # ready pending jobs that may share a card
        self.end_tokens = 0
        self.whole_held_gpu_s = 0.0  # held by whole-card runs (shared cards: the cluster's)
        self.usage: dict[str, _Usage] = {}
        self.busy_gpu_s = 0.0
        self.calls = self.skipped = self.preemptions = self.finished = self.events = 0
        self.pass_total = self.pass_max = 0.0
        self.dirty = False  # something that matters changed since the last pass
        # Strict submit order (fifo): nothing starts until the first ready job in that order
        # fits, so a pass is skipped while it cannot. Its candidates, (class, submit, id).
        knobs = self.knobs
        strict = knobs.backfill is Backfill.NONE and knobs.within_class is WithinClass.SUBMIT_ORDER
        self.fifo_heads: list[tuple[int, float, int]] | None = [] if strict else None
        self._admit(engine.jobs)
        self.total = len(self.jobs)
        self.calendar = engine.calendar
        self.team_windows: tuple[TeamWindow, ...] = ()
        self.window_figures: list[WindowFigures] = []
        self.notice_areas: dict[int, float] = {}  # window → its host's held GPU time at notice
        self.booking_figures: list[BookingFigures] = []
        if self.calendar is not None:
            self._plan_calendar(self.calendar)

    def _plan_calendar(self, calendar: Calendar) -> None:
        hosts = self.cluster.host_count
        for index, window in enumerate(calendar.windows):
            if not 0 <= window.host < hosts:
                raise ValueError(f"a maintenance window of host {window.host}: no such host")
            notice = self.cluster.host_gpus(window.host) * (window.starts - window.known_from)
            self.window_figures.append(WindowFigures(window.host, window.starts, notice))
            self._push(window.known_from, NOTICE, index)
            self._push(window.starts, CLOSE, index)
            self._push(window.ends, OPEN, index)
        for index, booking in enumerate(calendar.bookings):
            booked = booking.window
            self.booking_figures.append(BookingFigures(booked.id, booked.gpus))
            self._push(booking.known_from, BOOKING_NOTICE, index)
            self._push(booked.starts, BOOKING_START, index)
            self._push(booked.ends, BOOKING_END, index)

    def _admit(self, specs: Sequence[JobSpec]) -> None:
        """Every job that can ever fit, with its arrival, readiness and wake-up events."""
        capacity = self.engine.cluster.gpus_by_type()
        for spec in specs:
            fitting = fitting_types(self.catalog, spec.needs)
            if spec.gpus > max((capacity.get(card.name, 0) for card in fitting), default=0):
                self.never_fits += 1
                continue
            present = [card for card in fitting if capacity.get(card.name, 0) > 0]
            job = _Job(
                spec,
                est_run_s=wall_hours(spec.est_gpu_hours, spec.gpus) * HOUR,
                remaining=spec.duration,
                cheapest_price=min(card.price_per_gpu_hour for card in present),
            )
            self.jobs[spec.id] = job
            self._push(spec.submit, ARRIVE, spec.id)
            if not self.hold and spec.ready_at > spec.submit:
                self._push(spec.ready_at, READY, spec.id)
            prices_here = {card.price_per_gpu_hour for card in present}
            if self.knobs.type_choice is TypeChoice.CHEAPEST and len(prices_here) > 1:
                wait = costlier_after(self.knobs, job.est_run_s) + WAKE_SLACK_S
                self._push(spec.submit + wait, WAKE, spec.id)
                if spec.ready_at > spec.submit and not self.hold:
                    self._push(spec.ready_at + wait, WAKE, spec.id)

    def run(self) -> RunResult:
        progress = self.engine.progress
        heap = self.heap
        while heap:
            now = heap[0][0]
            self.cluster.now = now
            while heap and heap[0][0] == now:
                _, kind, _, job_id, token = heapq.heappop(heap)
                self.events += 1
                if kind >= NOTICE:
                    self._calendar_event(kind, job_id, now)
                    continue
                handled = self._handle(kind, self.jobs[job_id], token, now)
                if handled and progress is not None and self.events % PROGRESS_EVERY == 0:
                    progress(self.finished, self.total)
            if self.dirty and self.ready_sizes:
                self._pass(now)
        if progress is not None:
            progress(self.finished, self.total)
        return self._result()

    def _handle(self, kind: int, job: _Job, token: int, now: float) -> bool:
        """One event; False for the end or stop of a run that has since ended (a stale token)."""
        job_id = job.spec.id
        if kind == END:
            if token != job.end_token or job_id not in self.running:
                return False
            job.lost_gpu_s += job.overhead * job.spec.gpus  # the restart it paid, done
            job.remaining = 0.0
            self.release(job, now)
            job.end = now
            self.finished += 1
            self.dirty = True
        elif kind == STOP:
            if token != job.token or job_id not in self.running:
                return False
            self._stop(job, now)
        elif kind == READY:
            if job_id in self.pending and not (job.ready or self.hold):
                # In place: the view keeps its submit order, which the policy sorts fastest.
                job.ready = True
                self.pending_view[job_id] = self.pending_obj(job)
                self._count_ready(job, +1)
                self.dirty = True
            job.ready = True
        elif kind == ARRIVE:
            job.ready = self.hold or job.spec.ready_at <= job.spec.submit
            self.enqueue(job)
            self.dirty = self.dirty or job.ready
        elif job_id in self.pending and (job.ready or self.hold):  # WAKE
            self.dirty = True
        return True

    def _stop(self, job: _Job, now: float, *, loses_run: bool = False) -> float:
        """Stop a running job now and queue it again with what is left; the work thrown away
        (GPU-seconds). A job that checkpoints goes back to its last checkpoint; any other keeps
        its progress (the model of idle work), unless it `loses_run` (a maintenance window
        stopped a job that does not checkpoint)."""
        spec = job.spec
        ran = max(0.0, now - job.run_start)
        slowed = self._slowed(job, now)  # 0.0 for a job alone on its cards
        kept = ran - slowed
        lost_before = job.lost_gpu_s
        if spec.preemptible:
            work = max(0.0, ran - job.overhead - slowed)
            kept = min(work, job.remaining)
            if kept < job.remaining:  # it did not finish: back to its last checkpoint
                kept = work // spec.checkpoint_s * spec.checkpoint_s
            job.lost_gpu_s += (ran - kept) * spec.gpus
        elif loses_run and spec.priority != "idle" and ran - slowed < job.remaining:
            kept = 0.0
            job.lost_gpu_s += ran * spec.gpus
        job.remaining = max(job.remaining - kept, 0.0)
        self.release(job, now)
        initial = wall_hours(spec.est_gpu_hours, spec.gpus) * HOUR
        job.est_run_s = max(job.est_run_s - kept, 0.1 * initial, 60.0)
        if job.remaining <= 0.0:
            job.end = now
            self.finished += 1
        else:
            job.requeued_at = now
            self.enqueue(job)
        self.dirty = True
        return job.lost_gpu_s - lost_before

    def _calendar_event(self, kind: int, index: int, now: float) -> None:
        """A window's notice, start (its host's jobs stopped) or end; a booking's."""
        assert self.calendar is not None
        cluster, mode = self.cluster, self.calendar.mode
        if kind in (NOTICE, CLOSE, OPEN):
            window = self.calendar.windows[index]
            figures = self.window_figures[index]
            host = window.host
            if kind == NOTICE:
                self.notice_areas[index] = cluster.held_area(host)
                if mode == "plan":
                    cluster.set_state(host, closes_at=window.starts)
                elif mode == "drain":
                    cluster.set_state(host, out=HostOut.DRAINING)
            elif kind == CLOSE:
                figures.busy_gpu_s = cluster.held_area(host) - self.notice_areas.pop(index)
                if mode == "ignore":
                    return  # measured only: what the host does with no window at all
                cluster.set_state(host, out=HostOut.MAINTENANCE)
                on_host = cluster.host_gpu_range(host)
                for job in [
                    j for j in self.running.values() if any(g in on_host for g in j.gpu_ids)
                ]:
                    job.maintenance_stops += 1
                    figures.stopped += 1
                    in_notice = job.held_at >= window.known_from
                    thrown = self._stop(job, now, loses_run=True)
                    # A run begun in the notice is the plan's misjudgement; one begun before
                    # the window was known would have been stopped whatever the notice did.
                    if in_notice:
                        figures.thrown_gpu_s += thrown
                    else:
                        figures.unforeseen_gpu_s += thrown
            else:
                cluster.set_state(host)
        else:
            booking = self.calendar.bookings[index].window
            if kind == BOOKING_NOTICE and mode != "ignore":
                self.team_windows += (booking,)
            elif kind == BOOKING_START:  # (measured in every mode)
                held = sum(
                    len(job.gpu_ids)
                    for job in self.running.values()
                    if job.spec.team == booking.team and job.gpu_type == booking.gpu_type
                )
                free = cluster.free_of_type(booking.gpu_type)
                self.booking_figures[index].available = free + held
            elif kind == BOOKING_END:
                self.team_windows = tuple(w for w in self.team_windows if w.id != booking.id)
        self.dirty = True

    def _pass(self, now: float) -> None:
        """Call the policy and apply its plan, unless no ready job could start or preempt."""
        knobs = self.knobs
        can_preempt = self.ready_core > 0 and (
            (knobs.idle_preemption and self.idle_running > 0)
            or (knobs.preemptible_preemption and self.preemptible_running > 0)
        )
        can_preempt = can_preempt or (
            knobs.preemptible_preemption
            and knobs.shorter_factor is not None
            and self.preemptible_running > 0
        )
        can_preempt = can_preempt or (self.ready_core > 0 and self.shared_running > 0)
        # A job that may share can join a shared card with no card free.
        may_join = self.ready_share > 0 and self.cluster.shared_cards > 0
        if not can_preempt and not may_join:
            head = self._fifo_head() if self.fifo_heads is not None else None
            least = head.spec.gpus if head is not None else min(self.ready_sizes)
            if not self.cluster.could_fit(least):
                self.skipped += 1
                return
        snapshot = Snapshot(
            now=now,
            hosts=self.cluster.hosts(),
            running=tuple(self.running_view.values()),
            pending=tuple(self.pending_view.values()),
            catalog=self.catalog,
            knobs=self.knobs,
            team_usage={
                team: entry.value * 0.5 ** ((now - entry.at) / self.decay)
                for team, entry in self.usage.items()
            },
            team_windows=self.team_windows,
        )
        began = time.perf_counter()
        plan = self.schedule(snapshot)
        spent = time.perf_counter() - began
        self.calls += 1
        self.pass_total += spent
        self.pass_max = max(self.pass_max, spent)
        self.dirty = False
        for plan_start in plan.starts:
            self.start(plan_start, now)
        for order in plan.preemptions:
            self.preempt(order, now)

    # -- the moves -----------------------------------------------------------------------------

    def pending_obj(self, job: _Job) -> Pending:
        spec = job.spec
        return Pending(
            id=spec.id,
            priority=spec.priority,
            team=spec.team,
            owner=spec.owner,
            submitted_at=spec.submit,
            data_ready=job.ready or self.hold,
            gpus=spec.gpus,
            needs=spec.needs,
            est_gpu_hours=job.est_run_s * spec.gpus / HOUR,
            preemptible=spec.preemptible,
            preemptions=job.preemptions,
            share=spec.share_gib is not None,
            fingerprint=spec.fingerprint,
        )

    def enqueue(self, job: _Job) -> None:
        self.pending_view[job.spec.id] = self.pending_obj(job)
        self.pending[job.spec.id] = job
        if job.ready or self.hold:
            self._count_ready(job, +1)

    def dequeue(self, job: _Job) -> None:
        del self.pending[job.spec.id]
        del self.pending_view[job.spec.id]
        if job.ready or self.hold:
            self._count_ready(job, -1)

    def _count_ready(self, job: _Job, step: int) -> None:
        spec = job.spec
        self.ready_sizes[spec.gpus] += step
        if not self.ready_sizes[spec.gpus]:
            del self.ready_sizes[spec.gpus]
        self.ready_core += step * (spec.priority == "core")
        self.ready_share += step * (spec.share_gib is not None and spec.priority != "core")
        if step > 0 and self.fifo_heads is not None:
            rank = (
                CLASS_RANK.get(spec.priority, len(CLASS_RANK)) if self.knobs.respect_classes else 0
            )
            heapq.heappush(self.fifo_heads, (rank, spec.submit, spec.id))

    def _fifo_head(self) -> _Job | None:
        """The first ready pending job in strict submit order (stale candidates dropped)."""
        heads = self.fifo_heads
        while heads:
            job = self.pending.get(heads[0][2])
            if job is not None and (job.ready or self.hold):
                return job
            heapq.heappop(heads)
        return None

    def release(self, job: _Job, now: float) -> None:
        """Close the job's current run segment at `now` and free its GPUs."""
        spec = job.spec
        assert job.gpu_type is not None
        held = (now - job.held_at) * spec.gpus
        busy = max(0.0, now - job.run_start) * spec.gpus
        job.held_gpu_s += held
        job.held_idle_gpu_s += held - busy
        price = self.prices[job.gpu_type]
        job.cost += held / HOUR * price
        if price > job.cheapest_price:
            job.costlier_gpu_s += held
        if not self.running_view[spec.id].preempting:
            self._count_stoppable(job, -1)
        del self.running[spec.id]
        del self.running_view[spec.id]
        job.token += 1
        job.end_token = -1
        if job.share_milli:
            job.slowed_s += self._slowed(job, now)
            gpu_id = job.gpu_ids[0]
            # The card counts once, held and busy, while any of its jobs holds it.
            card_s = self.cluster.leave(gpu_id, spec.id, job.share_milli, now)
            self.busy_gpu_s += card_s
            job.share_milli = 0
            self._retime(gpu_id, now)
        else:
            self.busy_gpu_s += busy
            self.whole_held_gpu_s += held
            self.cluster.release(job.gpu_ids)
        entry = self.usage.setdefault(spec.team, _Usage(at=now))
        entry.value = entry.value * 0.5 ** ((now - entry.at) / self.decay) + held / HOUR
        entry.at = now

    def start(self, plan_start: Start, now: float) -> None:
        job = self.pending.get(plan_start.job_id)
        where = f"t={now:.0f}s: start of job {plan_start.job_id}"
        if job is None:
            raise PolicyViolation(f"{where}: the job is not pending")
        spec = job.spec
        if not (job.ready or self.hold):
            raise PolicyViolation(f"{where}: its data is not ready")
        if len(plan_start.gpu_ids) != spec.gpus or len(set(plan_start.gpu_ids)) != spec.gpus:
            raise PolicyViolation(
                f"{where}: {len(set(plan_start.gpu_ids))} GPUs for a job of {spec.gpus}"
            )
        gpus = self.cluster.gpus
        shared = plan_start.share_milli is not None
        if shared:
            self._check_share(plan_start, spec, where)
        for gpu_id in plan_start.gpu_ids:
            if not 0 <= gpu_id < len(gpus):
                raise PolicyViolation(f"{where}: no GPU {gpu_id}")
            gpu = gpus[gpu_id]
            if gpu.job_id is not None and not (shared and gpu.tenants):
                what = "shared by jobs" if gpu.tenants else "held by job"
                holders = ", ".join(map(str, gpu.tenants or (gpu.job_id,)))
                raise PolicyViolation(f"{where}: GPU {gpu_id} is {what} {holders}")
            if gpu.gpu_type != plan_start.gpu_type:
                raise PolicyViolation(
                    f"{where}: GPU {gpu_id} is a {gpu.gpu_type}, not {plan_start.gpu_type}"
                )
            out = self.cluster.out_of(gpu_id)
            if out:
                raise PolicyViolation(f"{where}: GPU {gpu_id} is on a host that is {out}")
        card = next(c for c in self.catalog if c.name == plan_start.gpu_type)
        if not spec.needs.admits(card):
            raise PolicyViolation(f"{where}: type {card.name} does not meet {spec.needs}")
        self.dequeue(job)
        if shared:
            assert plan_start.share_milli is not None
            job.share_milli = plan_start.share_milli
            job.shared = True
            self.cluster.join(plan_start.gpu_ids[0], spec.id, job.share_milli, now)
        else:
            self.cluster.hold(plan_start.gpu_ids, spec.id)
        job.gpu_ids = plan_start.gpu_ids
        job.gpu_type = plan_start.gpu_type
        job.held_at = now
        job.run_start = max(now, spec.ready_at) if self.hold else now
        if job.first_held is None:
            job.first_held = now
            job.first_run = job.run_start
        else:
            job.rewait_s += now - job.requeued_at
        # Resuming from a checkpoint costs its restart time, as held (and lost) GPU time.
        stopped_before = job.preemptions or job.maintenance_stops
        job.overhead = spec.restart_s if spec.preemptible and stopped_before else 0.0
        job.token += 1
        job.rate, job.mark, job.slowed = 1.0, job.run_start + job.overhead, 0.0
        self._push_end(job, job.run_start + job.overhead + job.remaining)
        self.running_view[spec.id] = Running(
            id=spec.id,
            priority=spec.priority,
            team=spec.team,
            gpu_ids=plan_start.gpu_ids,
            gpu_type=plan_start.gpu_type,
            started_at=now,
            expected_end=plan_start.expected_end,
            preemptible=spec.preemptible,
            preemptions=job.preemptions,
            grace_s=spec.grace_s if spec.preemptible else None,
            share_gib=spec.share_gib if shared else None,
            fingerprint=spec.fingerprint if shared else None,
        )
        self.running[spec.id] = job
        self._count_stoppable(job, +1)
        if shared:
            self._retime(plan_start.gpu_ids[0], now)

    def _check_share(self, plan_start: Start, spec: JobSpec, where: str) -> None:
        """A start on a shared card: a job that shares, one card, not booked past whole."""
        milli = plan_start.share_milli
        if spec.share_gib is None:
            raise PolicyViolation(f"{where}: a shared card for a job that does not share")
        if len(plan_start.gpu_ids) != 1 or milli is None or not 0 < milli <= WHOLE_MILLI:
            raise PolicyViolation(
                f"{where}: a share of {milli} thousandths of {len(plan_start.gpu_ids)} GPUs"
            )
        gpu_id = plan_start.gpu_ids[0]
        if 0 <= gpu_id < len(self.cluster.gpus):
            booked = self.cluster.booked(gpu_id)
            if booked + milli > WHOLE_MILLI:
                raise PolicyViolation(
                    f"{where}: GPU {gpu_id} would be over-booked: {booked} + {milli} "
                    f"thousandths (jobs {', '.join(map(str, self.cluster.gpus[gpu_id].tenants))})"
                )

    def _slowed(self, job: _Job, now: float) -> float:
        """Wall time its neighbours have cost the job in this run up to `now`."""
        if job.rate == 1.0:
            return job.slowed
        return job.slowed + max(0.0, now - job.mark) * (1.0 - job.rate)

    def _retime(self, gpu_id: int, now: float) -> None:
        """The jobs on a shared card after one arrived or left: each one's speed beside the
        others (colocation's expected slowdown, summed over its neighbours) and its end."""
        tenants = [self.jobs[job_id] for job_id in self.cluster.tenants(gpu_id)]
        for job in tenants:
            mine = job.spec.fingerprint
            slowdown = 0.0
            for other in tenants:
                theirs = other.spec.fingerprint
                if other is not job and mine is not None and theirs is not None:
                    slowdown += expected_slowdown(mine, theirs)
            if len(tenants) > 1:
                job.neighboured = True
            rate = 1.0 / (1.0 + slowdown)
            if rate == job.rate:
                continue
            if now > job.mark:  # what it did at the old speed
                job.slowed += (now - job.mark) * (1.0 - job.rate)
                job.mark = now
            job.rate = rate
            # Work done by `mark`: its time working, less what the neighbours cost it.
            done = job.mark - job.run_start - job.overhead - job.slowed
            self._push_end(job, job.mark + max(0.0, job.remaining - done) / rate)

    def _push_end(self, job: _Job, at: float) -> None:
        self.end_tokens += 1
        job.end_token = self.end_tokens
        self._push(at, END, job.spec.id, job.end_token)

    def _count_stoppable(self, job: _Job, step: int) -> None:
        """Running jobs a pass could ask to stop (not yet asked): idle-class, preemptible, and
        jobs on a shared card (a core job may take the card back)."""
        spec = job.spec
        if job.share_milli:
            self.shared_running += step
        if spec.preemptible:
            self.preemptible_running += step
        elif spec.priority == "idle":
            self.idle_running += step

    def preempt(self, order: Preempt, now: float) -> None:
        job = self.running.get(order.job_id)
        if job is None:
            raise PolicyViolation(f"t={now:.0f}s: preempts job {order.job_id}, not running")
        r = self.running_view[order.job_id]
        if r.preempting:
            return
        if not (job.spec.preemptible or job.spec.priority == "idle" or job.share_milli):
            raise PolicyViolation(
                f"t={now:.0f}s: preempts job {order.job_id}, which is neither preemptible nor "
                "idle nor on a shared card"
            )
        self._count_stoppable(job, -1)
        self.preemptions += 1
        job.preemptions += 1
        self.running_view[order.job_id] = replace(r, preempting=True)
        self._push(max(order.deadline, now), STOP, job.spec.id, job.token)

    def _push(self, at: float, kind: int, job_id: int, token: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (at, kind, self.seq, job_id, token))

    # -- the result ----------------------------------------------------------------------------

    def _result(self) -> RunResult:
        engine, jobs = self.engine, self.jobs.values()
        records = [self._record(job) for job in jobs]
        ends = [job.end for job in jobs if job.end is not None]
        first_submit = min((spec.submit for spec in engine.jobs), default=0.0)
        return RunResult(
            label=engine.label,
            policy=engine.setup.name,
            gpus=engine.cluster.gpus,
            nodes=engine.cluster.nodes,
            hold_gpus_for_data=self.hold,
            records=records,
            never_fits=self.never_fits,
            never_started=sum(1 for job in jobs if job.first_held is None),
            first_submit=first_submit,
            makespan=max(ends) - first_submit if ends else 0.0,
            busy_gpu_s=self.busy_gpu_s,
            held_idle_gpu_s=sum(job.held_idle_gpu_s for job in jobs),
            cost=sum(job.cost for job in jobs),
            costlier_gpu_s=sum(job.costlier_gpu_s for job in jobs),
            preemptions=self.preemptions,
            calls=self.calls,
            skipped=self.skipped,
            pass_total_s=self.pass_total,
            pass_max_s=self.pass_max,
            wall_s=time.perf_counter() - self.wall,
            held_card_gpu_s=self.whole_held_gpu_s + self.cluster.card_held_s,
            calendar_mode=self.calendar.mode if self.calendar is not None else "",
            windows=self.window_figures,
            bookings=self.booking_figures,
        )

    def _record(self, job: _Job) -> JobRecord:
        spec = job.spec
        since = spec.submit if self.hold else max(spec.submit, spec.ready_at)
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
            lost_gpu_s=job.lost_gpu_s,
            rewait_s=job.rewait_s,
            maintenance_stops=job.maintenance_stops,
            kind=_kind(spec),
            shared=job.shared,
            neighboured=job.neighboured,
            slowed_s=job.slowed_s,
        )


def _kind(spec: JobSpec) -> str:
    """The job's class in the waits."""
    if spec.priority == "core":
        return "core"
    if spec.fraction or spec.share_gib is not None:
        return "shared"
    return "one_card" if spec.gpus == 1 else "multi_card"


class _Cluster:
    """The replay's GPUs: which job holds each (or which jobs share it, with their parts of
    it), how many are free, the hosts the policy sees, which of them take no jobs (and why)
    or close soon, and each host's held GPU time so far (`held_area`).

    `Gpu` and `Host` are frozen, so a change of holder replaces the GPU, and a host's tuple is
    rebuilt only at the next snapshot after one of its GPUs changed hands.
    """

    def __init__(
        self,
        spec: ClusterSpec,
        catalog: tuple[CardType, ...],
        host_prefix: str,
        sharing: str = "",
    ) -> None:
        memory = {card.name: card.memory_gib for card in catalog}
        self.sharing = sharing
        self.gpus: list[Gpu] = []
        self._host_of: list[int] = []
        self._host_names: list[str] = []
        self._host_ranges: list[tuple[int, int]] = []
        for group in spec.groups:
            if group.gpu_type not in memory:
                raise ValueError(
                    f"GPU type {group.gpu_type!r} of the cluster is not in the catalog"
                )
            for _ in range(group.count):
                host = len(self._host_names)
                name = f"{host_prefix}{host:04d}"
                first = len(self.gpus)
                for gpu_id in range(first, first + group.gpus_per_node):
                    self.gpus.append(Gpu(gpu_id, name, group.gpu_type, memory[group.gpu_type]))
                    self._host_of.append(host)
                self._host_names.append(name)
                self._host_ranges.append((first, len(self.gpus)))
        self._hosts: list[Host] = [
            Host(name, tuple(self.gpus[a:b]), sharing=sharing)
            for name, (a, b) in zip(self._host_names, self._host_ranges, strict=True)
        ]
        self._dirty_hosts: set[int] = set()
        self._hosts_cache: tuple[Host, ...] | None = None
        self.free = len(self.gpus)
        self._host_free = [b - a for a, b in self._host_ranges]
        self._host_size = max(self._host_free, default=0)
        # Shared cards: each one's jobs with their parts (thousandths), and since when it is
        # held; the GPU time shared cards were held so far.
        self._shares: dict[int, dict[int, int]] = {}
        self._shared_since: dict[int, float] = {}
        self.card_held_s = 0.0
        # The calendar: hosts that take no jobs (why), hosts closing at a time; the replay's
        # clock, and each host's GPU-seconds held up to `_area_at`.
        self._out: dict[int, str] = {}
        self._closes: dict[int, float] = {}
        self.now = 0.0
        self._area = [0.0] * len(self._host_names)
        self._area_at = [0.0] * len(self._host_names)

    @property
    def host_count(self) -> int:
        return len(self._host_names)

    def host_gpus(self, host: int) -> int:
        a, b = self._host_ranges[host]
        return b - a

    def host_gpu_range(self, host: int) -> range:
        return range(*self._host_ranges[host])

    def held_area(self, host: int) -> float:
        """The host's GPU-seconds held by jobs from the replay's start to `now` (a shared
        card once)."""
        held = self.host_gpus(host) - self._host_free[host]
        return self._area[host] + held * (self.now - self._area_at[host])

    def _tick(self, host: int) -> None:
        """Bring the host's held GPU time up to `now` before its held count changes."""
        self._area[host] = self.held_area(host)
        self._area_at[host] = self.now

    def set_state(self, host: int, *, out: str = "", closes_at: float | None = None) -> None:
        """The host takes no jobs (`out` says why), or closes at `closes_at`, or neither."""
        if out:
            self._out[host] = out
        else:
            self._out.pop(host, None)
        if closes_at is None:
            self._closes.pop(host, None)
        else:
            self._closes[host] = closes_at
        self._dirty_hosts.add(host)

    def out_of(self, gpu_id: int) -> str:
        """Why the GPU's host takes no jobs now ("": it does)."""
        return self._out.get(self._host_of[gpu_id], "") if self._out else ""

    def free_of_type(self, gpu_type: str) -> int:
        """Free GPUs of the type on hosts that take jobs."""
        return sum(
            1
            for gpu in self.gpus
            if gpu.gpu_type == gpu_type
            and gpu.job_id is None
            and self._host_of[gpu.id] not in self._out
        )

    @property
    def shared_cards(self) -> int:
        """Cards jobs share now."""
        return len(self._shares)

    def could_fit(self, gpus: int) -> bool:
        """Whether `gpus` GPUs could be free for one job (on one host when a host is that
        big; type and memory aside, so a False is sure and a True only possible)."""
        free, host_free = self.free, self._host_free
        if self._out:  # hosts that take no jobs: their free GPUs are not
            free -= sum(host_free[host] for host in self._out)
            host_free = [n for host, n in enumerate(host_free) if host not in self._out]
        if gpus > self._host_size:
            return free >= gpus
        return free >= gpus and max(host_free, default=0) >= gpus

    def hold(self, gpu_ids: tuple[int, ...], job_id: int) -> None:
        self._set_holder(gpu_ids, job_id)
        self.free -= len(gpu_ids)

    def release(self, gpu_ids: tuple[int, ...]) -> None:
        self._set_holder(gpu_ids, None)
        self.free += len(gpu_ids)

    def tenants(self, gpu_id: int) -> tuple[int, ...]:
        return tuple(self._shares.get(gpu_id, {}))

    def booked(self, gpu_id: int) -> int:
        """Thousandths of the card its jobs hold: 1000 when held whole, 0 when free."""
        parts = self._shares.get(gpu_id)
        if parts is not None:
            return sum(parts.values())
        return 0 if self.gpus[gpu_id].job_id is None else 1000

    def join(self, gpu_id: int, job_id: int, milli: int, now: float) -> None:
        """`job_id` takes `milli` of the card, beside the jobs already there (a free card
        becomes a shared one)."""
        parts = self._shares.get(gpu_id)
        if parts is None:
            parts = self._shares[gpu_id] = {}
            self._shared_since[gpu_id] = now
            self.free -= 1
            self._tick(self._host_of[gpu_id])
            self._host_free[self._host_of[gpu_id]] -= 1
        parts[job_id] = milli
        self._set_tenants(gpu_id, tuple(parts))

    def leave(self, gpu_id: int, job_id: int, milli: int, now: float) -> float:
        """`job_id` leaves its shared card; the GPU time the card was held when it was the
        last (the card is free again), else 0."""
        parts = self._shares[gpu_id]
        del parts[job_id]
        if parts:
            self._set_tenants(gpu_id, tuple(parts))
            return 0.0
        del self._shares[gpu_id]
        held = now - self._shared_since.pop(gpu_id)
        self.card_held_s += held
        self.free += 1
        self._tick(self._host_of[gpu_id])
        self._host_free[self._host_of[gpu_id]] += 1
        self._set_tenants(gpu_id, ())
        return held

    def hosts(self) -> tuple[Host, ...]:
        if self._dirty_hosts or self._hosts_cache is None:
            for host in self._dirty_hosts:
                a, b = self._host_ranges[host]
                out = self._out.get(host, "")
                self._hosts[host] = Host(
                    self._host_names[host],
                    tuple(self.gpus[a:b]),
                    schedulable=not out,
                    out=out,
                    sharing=self.sharing,
                    closes_at=self._closes.get(host),
                )
            self._dirty_hosts.clear()
            self._hosts_cache = tuple(self._hosts)
        return self._hosts_cache

    def _set_tenants(self, gpu_id: int, tenants: tuple[int, ...]) -> None:
        gpu = self.gpus[gpu_id]
        holder = tenants[0] if tenants else None
        self.gpus[gpu_id] = replace(gpu, job_id=holder, tenants=tenants)
        self._dirty_hosts.add(self._host_of[gpu_id])

    def _set_holder(self, gpu_ids: tuple[int, ...], job_id: int | None) -> None:
        for gpu_id in gpu_ids:
            gpu = self.gpus[gpu_id]
            self.gpus[gpu_id] = Gpu(gpu.id, gpu.host, gpu.gpu_type, gpu.memory_gib, job_id=job_id)
            host = self._host_of[gpu_id]
            self._dirty_hosts.add(host)
            self._tick(host)
            self._host_free[host] += 1 if job_id is None else -1
