"""One scheduling pass: a snapshot and its `now` in, decisions with reasons out.

1. order the pending jobs (ranking.py)
2. build the pass's view of free GPUs (capacity.py)
3. admit in order: cheapest adequate type, quota, headroom, backfill around reservations
4. ask idle-class and preemptible jobs to stop where they block a core job, or, SRTF-like,
   much shorter work
5. reasons and ETAs for every job still waiting (explain.py), when asked
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from scheduler.policy.capacity import NEVER, Capacity, Placement, Reservation
from scheduler.policy.colocation import Fingerprint, bandwidth
from scheduler.policy.explain import Note, explain_waits
from scheduler.policy.matching import CardNeeds, CardType, fitting_types
from scheduler.policy.plan import (
    Alternative,
    HostOut,
    MatchDecision,
    Plan,
    Preempt,
    PreemptCode,
    Reserved,
    Start,
    WaitCode,
)
from scheduler.policy.priority_classes import CLASS_RANK
from scheduler.policy.quota import QuotaCheck, check_quota
from scheduler.policy.ranking import TimeScales, ordered, time_scales
from scheduler.policy.reasons import Reason, ReasonCode, because
from scheduler.policy.sharing import (
    ONE_ACCOUNT_MODES,
    Joining,
    SharedCard,
    Tenant,
    best_card,
    light,
    share_milli,
    shared_cards,
)
from scheduler.policy.snapshot import (
    HOUR,
    UPSTREAM_BROKEN,
    Backfill,
    Gpu,
    Knobs,
    Pending,
    Running,
    Snapshot,
    TypeChoice,
)

# Why no quota can pay for a job (policy.quota's problems), as the reason it waits.
_QUOTA_WAITS = {
    "none_live": WaitCode.NO_LIVE_QUOTA,
    "exhausted": WaitCode.QUOTA_EXHAUSTED,
    "expires": WaitCode.QUOTA_EXPIRES,
}


def schedule(snapshot: Snapshot, *, explain: bool = False, reservations: bool = True) -> Plan:
    """Decide what starts now, what is preempted and (if `explain`) why the rest wait; the
    plan lists the places kept for blocked jobs unless `reservations` is False (a replay
    never reads them, and without them a pass where nothing can start is a short one)."""
    capacity = Capacity(snapshot)
    if (
        not explain
        and not _may_join(snapshot)
        and (not capacity.any_free or (not reservations and _none_fits(snapshot, capacity)))
    ):
        return _stops_only(snapshot, capacity)
    queue, scales = queue_order(snapshot, capacity)
    admission = _Admission(snapshot, capacity, explain=explain, scales=scales)
    # With nobody to stop and no reasons asked, the jobs past the last that could start need
    # no types or notes: the walk ends when the cards run out.
    may_stop = _may_stop(snapshot)
    starts = admission.run(queue, every_job=explain or bool(may_stop))
    preemptions = _preemptions(snapshot, capacity, admission, queue, starts, may_stop=may_stop)
    waits = {}
    if explain:
        waits = explain_waits(snapshot, capacity, queue, admission.notes, admission.types, starts)
    return Plan(tuple(starts), tuple(preemptions), waits, _reservations(capacity))


def _may_join(snapshot: Snapshot) -> bool:
    """Whether a ready job may join a shared card in this pass (a start with no card free)."""
    return any(host.sharing for host in snapshot.hosts) and any(
        job.shares and job.ready for job in snapshot.pending
    )


def _none_fits(snapshot: Snapshot, capacity: Capacity) -> bool:
    """Whether no ready job could start for want of free GPUs alone: too few free on any one
    host for each size that fits a host, too few free of the type for each bigger one."""
    pools = [
        (pool.max_free(), pool.max_host_size, pool.free_count) for pool in capacity.pools.values()
    ]
    tried: set[int] = set()
    for job in snapshot.pending:  # (job.ready, without a call per job of a long queue)
        gpus = job.gpus
        if gpus in tried or not job.data_ready or job.waits_for:
            continue
        tried.add(gpus)
        for most, host_size, count in pools:
            if (most if gpus <= host_size else count) >= gpus:
                return False
    return True


def _stops_only(snapshot: Snapshot, capacity: Capacity) -> Plan:
    """The pass when nothing can start (no card free, or too few for any ready job with
    `reservations` off) and no job may join a shared card: only a job some running job may be
    stopped for can change the plan. The same decisions as the whole pass (ordered by the
    same key, each job's types and notes from the same admission), with only those jobs
    ordered and admitted: most of a full cluster's passes are these, and most of their queue
    could stop nobody."""
    stoppable, left, most_left = _stoppable(snapshot, capacity)
    if not stoppable:
        return Plan((), (), {}, _reservations(capacity))
    knobs = snapshot.knobs
    gpus = capacity.total_gpus
    scales = _time_scales(snapshot, capacity)
    factor = knobs.shorter_factor if knobs.preemptible_preemption else None
    respect = knobs.respect_classes
    others = len(CLASS_RANK)
    now = snapshot.now
    # Each class rank's backstop (scales.of(rank).starves, without two calls per job).
    limits = [scales.of(rank).starve_after_s for rank in range(others + 1)]
    own_of = scales.by_job.get if scales.by_job else None
    candidates = []
    for job in snapshot.pending:
        if not job.data_ready or job.waits_for:  # not job.ready
            continue
        if job.priority == "core" or (factor is not None and factor * job.run_seconds <= most_left):
            candidates.append(job)
            continue
        if knobs.preemptible_preemption:
            limit = limits[CLASS_RANK.get(job.priority, others) if respect else 0]
            own = own_of(job.id) if own_of is not None else None
            if own is not None:
                limit = own.starve_after_s
            if limit is not None and now - job.submitted_at >= limit:
                candidates.append(job)
    if not candidates:
        return Plan((), (), {}, _reservations(capacity))
    queue = ordered(candidates, now, knobs, snapshot.team_usage, cluster_gpus=gpus, scales=scales)
    admission = _Admission(snapshot, capacity, explain=False, scales=scales)
    admission.run(queue)
    # Nothing started, so what may stop and what each has left are as worked out above.
    found = (stoppable, left, most_left)
    preemptions = _preemptions(snapshot, capacity, admission, queue, [], stoppable=found)
    return Plan((), tuple(preemptions), {}, _reservations(capacity))


def could_act(snapshot: Snapshot) -> bool:
    """Whether a pass over `snapshot` could start or stop anything, at this moment or any
    later one while the state stays the same: a ready job, and either enough usable free GPUs
    of types it accepts or a running job the policy may ever ask to stop. When not, the pass's decisions are known
    without running it (none); only the waiting jobs' reasons and ETAs move with the clock."""
    ready = [job for job in snapshot.pending if job.ready]
    if not ready:
        return False
    knobs = snapshot.knobs
    slack = knobs.foreign_memory_slack_gib
    free: Counter[str] = Counter(
        gpu.gpu_type
        for host in snapshot.hosts
        if host.schedulable
        for gpu in host.gpus
        if gpu.job_id is None and gpu.healthy and gpu.foreign_memory_gib <= slack
    )
    if any(job.shares for job in ready) and any(
        host.sharing and host.schedulable for host in snapshot.hosts
    ):
        return True  # a shared card may take it with no card free
    cards = [card for card in snapshot.catalog if free[card.name]]
    enough: dict[tuple[CardNeeds, int], bool] = {}
    for job in ready:  # a free card no ready job could use (another type) starts nothing
        key = (job.needs, job.gpus)
        if key not in enough:
            usable = sum(free[card.name] for card in cards if job.needs.admits(card))
            enough[key] = usable >= job.gpus
        if enough[key]:
            return True
    # Time-blind on purpose: a job within its minimum run is one the clock alone makes
    # stoppable later, with nothing else changing.
    return any(
        job.preempting
        or (
            job.priority != "core"
            and (
                job.share_gib is not None
                or (job.priority == "idle" and knobs.idle_preemption)
                or (
                    job.preemptible
                    and knobs.preemptible_preemption
                    and job.preemptions < knobs.preempt_max_per_job
                )
            )
        )
        for job in snapshot.running
    )


def queue_order(
    snapshot: Snapshot, capacity: Capacity | None = None
) -> tuple[list[Pending], TimeScales]:
    """The pending jobs in the order this pass considers them, and the pass's time scales
    (what `/gpu priority` and positions show is what the pass does)."""
    capacity = capacity or Capacity(snapshot)
    gpus = capacity.total_gpus
    scales = _time_scales(snapshot, capacity)
    queue = ordered(
        snapshot.pending,
        snapshot.now,
        snapshot.knobs,
        snapshot.team_usage,
        cluster_gpus=gpus,
        scales=scales,
    )
    return queue, scales


def _time_scales(snapshot: Snapshot, capacity: Capacity) -> TimeScales:
    """The pass's time scales, with each type's usable GPUs and when each is free."""
    knobs = snapshot.knobs
    if knobs.aging_drains is None and knobs.starve_after_drains is None:
        return time_scales(knobs)  # absolute hours: no GPU's time is read
    now, at = snapshot.now, capacity.available_at.flat()
    cards = []
    for card in snapshot.catalog:
        pool = capacity.pools.get(card.name)
        if pool is not None:
            times = [at.get(gpu, now) for ids in pool.members.values() for gpu in ids]
            cards.append((card, [t - now if t > now else 0.0 for t in times if t < NEVER]))
    sharing = any(host.sharing and host.schedulable for host in snapshot.hosts)
    return time_scales(knobs, snapshot.pending, capacity.total_gpus, cards, sharing)


def _reservations(capacity: Capacity) -> tuple[Reserved, ...]:
    """The reservations admission made: EASY's, one per pool, and one per starving job."""
    return tuple(
        Reserved(held.job_id, held.gpu_type, held.start, len(held.gpu_ids))
        for pool in capacity.pools.values()
        for held in pool.reservations
    )


class _Admission:
    """Step 3: walks the queue once, starting what may start and noting why the rest wait."""

    def __init__(
        self,
        snapshot: Snapshot,
        capacity: Capacity,
        *,
        explain: bool = True,
        scales: TimeScales | None = None,
    ) -> None:
        self.explain = explain
        self._scales = scales or time_scales(snapshot.knobs)
        self._respect_classes = snapshot.knobs.respect_classes
        # Each class rank's backstop (asked of every job, twice a pass).
        self.starve_limits = [
            self._scales.of(rank).starve_after_s for rank in range(len(CLASS_RANK) + 1)
        ]
        # The backstops of the jobs measured on their own types (TimeScales.by_job).
        self.own_limits = {job: scale.starve_after_s for job, scale in self._scales.by_job.items()}
        self._core_first = snapshot.knobs.core_reservations
        self._spread_places = snapshot.knobs.spread_reservations
        self._host_rank: dict[str, int] | None = None
        self.snapshot = snapshot
        self.knobs = snapshot.knobs
        self.capacity = capacity
        self.notes: dict[int, Note] = {}
        self.types: dict[int, list[str]] = {}  # adequate, quota-ok types per job, cheapest first
        self.spent: dict[int, float] = {}  # quota hours promised this pass
        self._fits: dict[CardNeeds, list[CardType]] = {}
        self._fits_here: dict[tuple[CardNeeds, int, bool], list[CardType]] = {}
        self._fits_by_id: dict[tuple[int, int, bool], list[CardType]] = {}
        self._needs_kept: list[CardNeeds] = []  # the needs whose ids _fits_by_id holds
        self._names: dict[int, list[str]] = {}  # type names of each cached _fits_here list
        self._quota_ends = dict(snapshot.quota_ends)
        self._waited_for: dict[tuple[CardNeeds, int, bool], tuple[tuple[str, str], ...]] = {}
        self._registered: dict[str, dict[str, int]] | None = None  # type → host → GPUs
        self._out: dict[str, str] = {}  # host → why it takes no jobs ("" when it does)
        # Shared cards (sharing.py), built when a job that accepts one is first considered.
        self._shared: dict[int, SharedCard] | None = None
        self._gpus: dict[int, Gpu] | None = None
        self._sharing_hosts = {
            host.name: host.schedulable and bool(host.sharing) for host in snapshot.hosts
        }
        self._sharing = any(self._sharing_hosts.values())  # a shared card may take a job
        # Jobs of each array running, or asked to stop and not gone yet (their cards are
        # not back, and max_running counts runs, not cards).
        self._array_running: Counter[int] = Counter(
            r.array_id for r in snapshot.running if r.array_id is not None
        )
        self._one_account = frozenset(
            host.name for host in snapshot.hosts if host.sharing in ONE_ACCOUNT_MODES
        )
        # The queue being walked and, built when a job first weighs a costlier type (see
        # _needed_more), the GPUs its ready jobs not yet started want, by the types they fit
        # and class rank (each job's entry: its types and rank).
        self._queue: list[Pending] = []
        self._started: set[int] = set()
        self._demand: dict[frozenset[str], list[int]] | None = None
        self._demand_of: dict[int, tuple[frozenset[str], int]] = {}
        self._demand_for: dict[tuple[str, str, int], int] = {}  # (costlier, cheapest, rank)
        self._name_sets: dict[int, frozenset[str]] = {}  # as _names, as sets
        self._declined = False  # the last job tried passed over cards others need more
        # Share jobs of one kind that found no shared card to join in this pass, with the
        # shortest run refused: one as alike that runs as long finds none either (joins only
        # fill cards, places kept and hosts closing for maintenance only refuse more, and
        # longer runs), until a new shared card is opened.
        self._no_card_to_join: dict[tuple[object, ...], float] = {}

    def run(self, queue: list[Pending], *, every_job: bool = True) -> list[Start]:
        """Start what may start, in queue order; the starts. Each job the walk reaches gets its
        types or a note. Not `every_job`: the walk ends once nothing more can start (no card
        free, none to join), as the jobs after need neither."""
        starts: list[Start] = []
        self._queue, self._demand = queue, None
        self._demand_for.clear()
        any_free = self.capacity.any_free  # changes only when a job starts
        # With no card free a whole-card job cannot start, and is passed over, unless a job
        # may join a shared card in this pass: then each blocked job still keeps its place
        # (its reservation), or the joins would take the cards that free first for it, pass
        # after pass.
        joins = self._sharing and any(job.shares and job.ready for job in queue)
        # Once no card is free (and none can be joined), later jobs only get types and notes.
        ends_when_full = not every_job and not joins and self.knobs.backfill is not Backfill.NONE
        if ends_when_full and not any_free:
            return starts
        # Placements that failed since the last start, per (types, core): (GPUs, run time).
        # A job of the same types needing as many GPUs for as long cannot be placed either
        # (free GPUs, headroom and the reservation only ever refuse a bigger or longer job),
        # so it is passed over without a look at every host: long queues behind a blocked job
        # stay cheap. Only failures on every type count (a job waiting for a cheaper type had
        # a place). Not when reasons are asked for (each job's own reason is worked out).
        failed: dict[tuple[object, ...], list[tuple[int, float]]] | None = (
            None if self.explain else {}
        )
        notes, types = self.notes, self.types
        quotas = self.snapshot.quotas
        # What _eligible found for a job no quota limits, per (needs, GPUs, core): its types,
        # or the note saying why none fits. A long queue holds few kinds of job.
        plain: dict[tuple[int, int, bool], list[str] | Note] = {}
        shape_team = bool(self.capacity.team_windows)
        sharing = self._sharing
        starve_limits, respect, now = self.starve_limits, self._respect_classes, self.snapshot.now
        own_limits = self.own_limits
        class_rank, others = CLASS_RANK.get, len(CLASS_RANK)
        for job in queue:
            if job.waits_for:
                notes[job.id] = _upstream_note(job)
                continue
            if not job.data_ready:
                notes[job.id] = _WAITING_FOR_DATA
                continue
            if job.array_id is not None and self._throttled(job):
                notes[job.id] = Note(WaitCode.ARRAY_THROTTLED, array=job.array_id)
                continue
            core = job.priority == "core"
            if job.team in quotas:
                if not self._eligible(job):
                    continue
            else:
                kind = (id(job.needs), job.gpus, core)
                found = plain.get(kind)
                if found is None:
                    found = plain[kind] = types[job.id] if self._eligible(job) else notes[job.id]
                elif isinstance(found, list):
                    types[job.id] = found
                else:
                    notes[job.id] = found
                if not isinstance(found, list):
                    continue
            if (
                not any_free
                and self.knobs.backfill is not Backfill.NONE
                and not (sharing and job.shares)
                and not joins
            ):
                continue  # nothing can start; later steps still see this job as waiting
            shape = None
            if own_limits and job.id in own_limits:
                limit = own_limits[job.id]
            else:
                limit = starve_limits[class_rank(job.priority, others) if respect else 0]
            starving = limit is not None and now - job.submitted_at >= limit  # self.starving
            # Core jobs, starving ones and those the free cards are too spread for each keep
            # a place (see _reserve).
            conservative = (
                starving or (core and self._core_first) or self._cards_spread(job, types[job.id])
            )
            if failed is not None and not conservative and not job.holds:
                # A job that shares may join a shared card where a whole-card job fits nowhere,
                # and whether it may join one depends on its memory, its fingerprint, its
                # account and the jobs it is kept apart from: they are part of it. Cards
                # booked for a team refuse other teams only: the team is part of it.
                share = (
                    (job.needs.min_memory_gib, job.fingerprint, job.account, job.apart_from)
                    if job.shares
                    else None
                )
                shape = (id(types[job.id]), core, share, job.team if shape_team else "")
                tried = failed.get(shape)
                if tried:
                    gpus, run = job.gpus, job.run_seconds
                    if any(g <= gpus and r <= run for g, r in tried):
                        continue  # as blocked as one already tried (its reservation is made)
            start, placeable = self._try_start(job)
            if start is not None:
                starts.append(start)
                self._started.add(job.id)
                if self._demand is not None and job.id in self._demand_of:
                    names, rank = self._demand_of.pop(job.id)
                    self._demand[names][rank] -= job.gpus
                    self._demand_for.clear()
                if job.array_id is not None:
                    self._array_running[job.array_id] += 1
                any_free = self.capacity.any_free
                if ends_when_full and not any_free:
                    break
                if failed:
                    failed.clear()
                continue
            if job.holds:
                # Held off some hosts: nobody waits behind it, nor is a place kept for it
                # (the hosts it may use are not the pool's); a note says who refused it.
                self.notes.setdefault(job.id, _held(job))
                continue
            # A whole-card job that passed over costlier cards only because others need them
            # more is as blocked for the jobs of its shape after it (a later one of its class
            # or a lower one, as big or bigger, is refused them too), though its place is kept
            # on its cheapest type. Not a share job: one needing less memory may still join a
            # shared card it could not.
            declined = self._declined and not job.shares
            if failed is not None and shape is not None and (not placeable or declined):
                # Keep only the failures no other one covers: a handful of shapes at most.
                kept = [
                    (g, r)
                    for g, r in failed.get(shape, ())
                    if not (g >= job.gpus and r >= job.run_seconds)
                ]
                kept.append((job.gpus, job.run_seconds))
                failed[shape] = kept
            if self.knobs.backfill is Backfill.NONE:
                break  # strict order: nobody passes a blocked job
            note = self.notes.get(job.id)
            if note is not None and note.code is WaitCode.BOOKED_FOR_TEAM:
                # Held back by cards booked for another team: a place kept for it now would
                # be on those very cards and hold back the team they are booked for. It
                # waits for the booking (its note says until when).
                continue
            if self.knobs.backfill is Backfill.EASY:
                # A job waiting for a cheaper type is kept a place on that type, not on the
                # costlier one it declined (which would sit idle for it meanwhile).
                self._reserve(job, conservative, cheapest_only=placeable)
        return starts

    def _cards_spread(self, job: Pending, types: list[str]) -> bool:
        """Whether what keeps the job waiting is where the free cards are, not how many: it
        fits on one host and its cheapest type has as many free as it needs, but not on one
        host (or some are kept for others). Such a job keeps a place as a starving one does.
        Otherwise, with cards freeing one at a time on many hosts, each goes to the next job
        that fits it while only the first blocked job's host is kept: on Philly, jobs of one
        whole host waited for days beside a fifth of the cluster's cards idle in pieces."""
        if job.gpus < 2 or not self._spread_places:
            return False
        pool = self.capacity.pools.get(types[0])
        return pool is not None and job.gpus <= min(pool.max_host_size, pool.free_count)

    def starving(self, job: Pending) -> bool:
        """Whether the job has waited past its class's backstop."""
        if job.id in self.own_limits:
            limit = self.own_limits[job.id]
        else:
            rank = CLASS_RANK.get(job.priority, len(CLASS_RANK)) if self._respect_classes else 0
            limit = self.starve_limits[rank]  # as TimeScale.starves, without a call per job
        return limit is not None and self.snapshot.now - job.submitted_at >= limit

    def _note_booking(self, job: Pending) -> None:
        """When cards booked for another team held the job's placement back, say so (the
        first such booking; a later reason of its own, a cheaper type's, wins)."""
        booked = self.capacity.booked_for
        if booked is not None:
            self.notes.setdefault(
                job.id,
                Note(
                    WaitCode.BOOKED_FOR_TEAM,
                    gpu_type=booked.gpu_type,
                    team=booked.team,
                    eta=booked.ends,
                ),
            )

    def _throttled(self, job: Pending) -> bool:
        """Whether as many jobs of its array as may run at once already run (or start in
        this pass)."""
        if job.array_id is None or job.array_limit is None:
            return False
        return self._array_running[job.array_id] >= job.array_limit

    def _eligible(self, job: Pending) -> bool:
        """Types that fit the job and its quota; notes never-fits and quota problems."""
        fitting = self._fitting_here(job.needs, job.gpus, job.priority == "core")
        if not fitting:
            hosts = self._hosts_to_wait_for(job.needs, job.gpus, job.priority == "core")
            if hosts:
                self.notes[job.id] = Note(WaitCode.WAITING_FOR_HOSTS, hosts=hosts)
            else:
                self.notes[job.id] = Note(WaitCode.NEVER_FITS)
            return False
        if job.team not in self.snapshot.quotas:  # not limited by quota
            # One shared list per kind of need: nobody changes it, and explain keys on it.
            names = self._names.get(id(fitting))
            if names is None:
                names = self._names[id(fitting)] = [card.name for card in fitting]
            self.types[job.id] = names
            return True
        run_end = self.snapshot.now + job.run_seconds
        ok: list[str] = []
        problem: tuple[str, QuotaCheck] | None = None  # the first type refused, and why
        for card in fitting:
            check = self._quota(job, card.name, run_end)
            if check.problem is None:
                ok.append(card.name)
            elif problem is None:
                problem = (card.name, check)
        if not ok and problem is not None:
            gpu_type, check = problem
            self.notes[job.id] = Note(
                _QUOTA_WAITS[check.problem or "exhausted"],
                gpu_type=gpu_type,
                left_hours=check.left_hours,
            )
            return False
        self.types[job.id] = ok
        return True

    def _fitting_here(self, needs: CardNeeds, gpus: int, core: bool) -> list[CardType]:
        """Adequate types this cluster has enough GPUs of, cheapest first (cached)."""
        # First by the needs' identity: many jobs share one object, and hashing it per job
        # costs more than the lookup. (Its id cannot be reused while the pass keeps it.)
        by_id = (id(needs), gpus, core)
        found = self._fits_by_id.get(by_id)
        if found is None:
            key = (needs, gpus, core)
            found = self._fits_here.get(key)
            if found is None:
                found = self._fits_here[key] = [
                    c
                    for c in self._fitting(needs)
                    if self.capacity.could_ever_fit(c.name, gpus, core=core)
                ]
            self._fits_by_id[by_id] = found
            self._needs_kept.append(needs)
        return found

    def _hosts_to_wait_for(
        self, needs: CardNeeds, gpus: int, core: bool
    ) -> tuple[tuple[str, str], ...]:
        """For a job no usable GPUs could ever fit: the registered hosts it could run on once
        they are back (down, draining, untrusted, cards unusable), with why each is not usable
        now, and the hosts not seen yet (their cards are not known); in host order. None: no
        registered host could ever fit it (cached per kind of need)."""
        key = (needs, gpus, core)
        found = self._waited_for.get(key)
        if found is not None:
            return found
        registered = self._registered_gpus()
        why: dict[str, str] = {}
        for card in self._fitting(needs):
            per_host = registered.get(card.name, {})
            size = sum(per_host.values())
            amount = self.knobs.headroom.get(card.name, 0.0)
            headroom = 0 if core else int(amount) if amount >= 1 else math.ceil(amount * size)
            if gpus > size - headroom:
                continue  # not even with every card of the type back
            usable = self.capacity.pools.get(card.name)
            for name in per_host:
                members = len(usable.members.get(name, ())) if usable else 0
                if members < per_host[name]:
                    why.setdefault(name, self._out[name] or HostOut.CARDS_UNUSABLE)
        for host in self.snapshot.hosts:
            if not host.gpus:
                why.setdefault(host.name, host.out or HostOut.UNSEEN)
        found = self._waited_for[key] = tuple(
            (host.name, why[host.name]) for host in self.snapshot.hosts if host.name in why
        )
        return found

    def _registered_gpus(self) -> dict[str, dict[str, int]]:
        """Every registered GPU by type and host, usable now or not."""
        if self._registered is None:
            self._registered = {}
            self._out = {
                host.name: host.out or ("" if host.schedulable else HostOut.DOWN)
                for host in self.snapshot.hosts
            }
            for host in self.snapshot.hosts:
                for gpu in host.gpus:
                    per_host = self._registered.setdefault(gpu.gpu_type, {})
                    per_host[host.name] = per_host.get(host.name, 0) + 1
        return self._registered

    def _fitting(self, needs: CardNeeds) -> list[CardType]:
        if needs not in self._fits:
            self._fits[needs] = fitting_types(self.snapshot.catalog, needs)
        return self._fits[needs]

    def _quota(self, job: Pending, gpu_type: str, run_end: float) -> QuotaCheck:
        return check_quota(
            self.snapshot.quotas.get(job.team),
            self._quota_ends,
            gpu_type=gpu_type,
            gpu_hours=job.est_gpu_hours,
            now=self.snapshot.now,
            run_end=run_end,
            spent=self.spent,
        )

    def _try_start(self, job: Pending) -> tuple[Start | None, bool]:
        """The job's start if it may start now, and whether any type had a place for it (a
        job waiting for a cheaper type had one)."""
        types = self.types[job.id]
        core = job.priority == "core"
        self._declined = False
        if job.shares and self._sharing:
            shared = self._start_shared(job, types)
            if shared is not None:
                return shared, True
        reason: Reason | None
        if self.knobs.type_choice is TypeChoice.FIRST_FIT:
            placement = self._first_fit(job, types, core)
            reason = Reason(ReasonCode.MATCH_FIRST_FIT)
        else:
            placement, reason = self._cheapest(job, types, core)
        if placement is None:
            if any(self.capacity.held_by_headroom(t, job.gpus) for t in types) and not core:
                self.notes.setdefault(job.id, Note(WaitCode.HELD_FOR_HEADROOM, gpu_type=types[0]))
            return None, reason is _FOR_A_CHEAPER_TYPE
        return self._admit(job, placement, reason), True

    def _first_fit(self, job: Pending, types: list[str], core: bool) -> Placement | None:
        order = self._host_rank
        if order is None:  # once a pass: a long queue tries it job after job
            order = self._host_rank = {h: i for i, h in enumerate(self.capacity.host_order)}
        found = []
        for t in types:
            p = self.capacity.place_now(
                t, job.gpus, core=core, run_seconds=job.run_seconds, avoid=job.avoid, team=job.team
            )
            self._note_booking(job)
            if p is not None:
                found.append(p)
        return min(found, key=lambda p: order[p.hosts[0]], default=None)

    def _cheapest(
        self, job: Pending, types: list[str], core: bool
    ) -> tuple[Placement | None, Reason | None]:
        capacity = self.capacity
        cheapest = types[0]
        avoid = job.avoid
        placement = capacity.place_now(
            cheapest, job.gpus, core=core, run_seconds=job.run_seconds, avoid=avoid, team=job.team
        )
        if placement is not None:
            return placement, Reason(ReasonCode.MATCH_CHEAPEST_FREE)
        self._note_booking(job)
        passed_over: str | None = None  # a costlier type free to it that others need more
        for costlier in types[1:]:
            if passed_over is not None and self._needed_more(job, costlier, cheapest):
                continue  # its note names a costlier type already
            placement = capacity.place_now(
                costlier,
                job.gpus,
                core=core,
                run_seconds=job.run_seconds,
                avoid=avoid,
                team=job.team,
            )
            self._note_booking(job)
            if placement is None:
                continue
            if self._needed_more(job, costlier, cheapest):
                passed_over = passed_over or costlier
                continue
            reason, cheap_at = self._costlier_allowed(job, cheapest)
            if reason is not None:
                return placement, reason
            return self._waits_for_cheaper(job, cheapest, costlier, cheap_at)
        if passed_over is not None:
            # Every costlier type free to it is needed by jobs that cannot use its cheapest:
            # it waits for that (a place is kept for it there once it starves).
            self._declined = True
            cheap_at, _ = capacity.earliest_start(cheapest, job.gpus, run_seconds=job.run_seconds)
            return self._waits_for_cheaper(job, cheapest, passed_over, cheap_at)
        return None, None

    def _costlier_allowed(self, job: Pending, cheapest: str) -> tuple[Reason | None, float]:
        """Why `job` may take a costlier type than its `cheapest` now, or None and when its
        cheapest type should free up (0 when not asked): the rules of the wait for a cheaper
        card, whatever others need."""
        now, limit = self.snapshot.now, costlier_after(self.knobs, job.run_seconds)
        if job.avoid:  # the cheaper type's GPUs it waits for may be on a host that refused it
            return Reason(ReasonCode.MATCH_CHEAPER_REFUSED), 0.0
        if now - job.submitted_at >= limit:
            return because(ReasonCode.MATCH_WAITED_FOR_CHEAPER, minutes=limit / 60), 0.0
        cheap_at, _ = self.capacity.earliest_start(cheapest, job.gpus, run_seconds=job.run_seconds)
        if cheap_at > now + limit:
            said = because(ReasonCode.MATCH_CHEAPER_NOT_SOON, gpu_type=cheapest, minutes=limit / 60)
            return said, cheap_at
        return None, cheap_at

    def _waits_for_cheaper(
        self, job: Pending, cheapest: str, costlier: str, cheap_at: float
    ) -> tuple[None, Reason]:
        """`job` waits for its cheapest type (due at `cheap_at`) rather than take `costlier`."""
        self.notes[job.id] = Note(
            WaitCode.WAITING_FOR_CHEAPER_TYPE, gpu_type=cheapest, eta=cheap_at, costlier=costlier
        )
        return None, _FOR_A_CHEAPER_TYPE

    def _may_take_costlier(self, job: Pending, costlier: str, cheapest: str) -> bool:
        """Whether `job` may take a free GPU of `costlier` now rather than wait for one of
        its `cheapest` type, by _cheapest's rules (without its notes)."""
        if self._needed_more(job, costlier, cheapest):
            return False
        return self._costlier_allowed(job, cheapest)[0] is not None

    def _needed_more(self, job: Pending, costlier: str, cheapest: str) -> bool:
        """Whether the free GPUs of `costlier` that `job` would take are needed by waiting
        jobs of its class or a higher one that cannot use `cheapest`: it could wait for its
        cheaper type, which they cannot use (among the types the cluster has enough of).
        Otherwise a job that may use any type, once it has waited for its cheaper one long
        enough, takes the one scarce type others can run on alone, and they wait its whole
        run: on openb's typed nodes an 8-card job that could run on V100s took the G3 host
        three G3-only 8-card jobs waited for, and they waited 18 hours more."""
        respect, rank_of, others = self._respect_classes, CLASS_RANK.get, len(CLASS_RANK)
        demand_by = self._demand
        if demand_by is None:
            demand_by, self._demand_of = {}, {}
            for other in self._queue:
                if other.ready and other.id not in self._started:
                    core = other.priority == "core"
                    fitting = self._fitting_here(other.needs, other.gpus, core)
                    names = self._name_sets.get(id(fitting))  # one per kind of job, as _names
                    if names is None:
                        names = self._name_sets[id(fitting)] = frozenset(c.name for c in fitting)
                    rank = rank_of(other.priority, others) if respect else 0
                    demand_by.setdefault(names, [0] * (others + 1))[rank] += other.gpus
                    self._demand_of[other.id] = (names, rank)
            self._demand = demand_by
        mine = rank_of(job.priority, others) if respect else 0
        key = (costlier, cheapest, mine)
        demand = self._demand_for.get(key)
        if demand is None:
            # `job` itself is in none of these: it can use `cheapest`.
            demand = self._demand_for[key] = sum(
                sum(by_rank[: mine + 1])
                for names, by_rank in demand_by.items()
                if costlier in names and cheapest not in names
            )
        if not demand:
            return False
        return self.capacity.pools[costlier].free_count - job.gpus < demand

    def _start_shared(self, job: Pending, types: list[str]) -> Start | None:
        """A job that accepts a shared card: beside others on the best card that takes it,
        else the first job of a new shared card (a free card of a host that shares, the
        cheapest type first). None: neither; it may still take whole cards elsewhere."""
        cards = self._cards()
        closing = self.capacity.closing_before(job.run_seconds)
        sharing_hosts = (
            {name: ok and name not in closing for name, ok in self._sharing_hosts.items()}
            if closing
            else self._sharing_hosts
        )
        kind = (
            id(types),
            job.needs.min_memory_gib,
            job.fingerprint,
            job.account,
            job.avoid,
            job.apart_from,
        )
        refused = self._no_card_to_join.get(kind)
        if refused is None or job.run_seconds < refused:
            joining, _ = best_card(
                cards,
                job,
                types=types,
                sharing_hosts=sharing_hosts,
                free_cards=self._free_per_host(),
                knobs=self.knobs,
                one_account_hosts=self._one_account,
                reserved=self.capacity.reserved_cards(types, job.run_seconds),
            )
            if joining is not None:
                return self._join(job, joining)
            self._no_card_to_join[kind] = min(job.run_seconds, refused or math.inf)
        avoid = job.avoid | {name for name, ok in self._sharing_hosts.items() if not ok}
        for gpu_type in types:
            placement = self.capacity.place_now(
                gpu_type, 1, core=False, run_seconds=job.run_seconds, avoid=avoid, team=job.team
            )
            self._note_booking(job)
            if placement is None:
                continue
            if gpu_type != types[0] and not self._may_take_costlier(job, gpu_type, types[0]):
                # A costlier card is opened for sharing as one is taken whole (_cheapest):
                # else the share jobs that may use any card settle on the scarce costly
                # hosts the moment the cheap cards are full, and keep them in pieces.
                continue
            gpu = self._gpu(placement.gpu_ids[0])
            need = job.needs.min_memory_gib or 0.0
            if need + self.knobs.share_reserve_gib > gpu.memory_gib:
                continue  # no room beside it: it takes a card whole, below
            reason = because(
                ReasonCode.MATCH_SHARES_NEW_CARD,
                gpu_type=gpu.gpu_type,
                card=gpu.host,
                memory=need,
                total=gpu.memory_gib,
            )
            start = self._admit(job, placement, reason)
            milli = share_milli(need, gpu.memory_gib)
            cards[gpu.id] = SharedCard(gpu, [Tenant(job.id, need, job.fingerprint, job.account)])
            self._no_card_to_join.clear()  # a card to join that was not there before
            return replace(start, share_milli=milli)
        return None

    def _join(self, job: Pending, joining: Joining) -> Start:
        """Start `job` beside the jobs of a shared card; the card stays held until the last
        of them is expected to end."""
        gpu, now = joining.gpu, self.snapshot.now
        end = now + job.run_seconds
        available = self.capacity.available_at
        available[gpu.id] = max(available.get(gpu.id, now), end)
        need = job.needs.min_memory_gib or 0.0
        beside = ", ".join(f"#{tenant.job_id}" for tenant in joining.neighbours)
        pressure = (
            " + ".join(_pressure(tenant.fingerprint) for tenant in (*joining.neighbours,))
            + f" + {_pressure(job.fingerprint)}"
        )
        reason = because(
            ReasonCode.MATCH_SHARES,
            gpu_type=gpu.gpu_type,
            card=gpu.host,
            beside=beside,
            memory=need,
            used=joining.declared_gib - need,
            total=gpu.memory_gib,
            pressure=pressure,
        )
        check = self._quota(job, gpu.gpu_type, end)
        if check.quota is not None:
            self.spent[check.quota.id] = self.spent.get(check.quota.id, 0.0) + job.est_gpu_hours
        match = MatchDecision(
            gpu.gpu_type, self._alternatives(job, gpu.gpu_type), reason.english(), reason
        )
        self._cards()[gpu.id].tenants.append(Tenant(job.id, need, job.fingerprint, job.account))
        return Start(
            job.id,
            (gpu.id,),
            (gpu.host,),
            gpu.gpu_type,
            match,
            end,
            check.quota.id if check.quota else None,
            share_milli=joining.share_milli,
            shares_with=tuple(tenant.job_id for tenant in joining.neighbours),
        )

    def _cards(self) -> dict[int, SharedCard]:
        if self._shared is None:
            self._shared = shared_cards(self.snapshot.hosts, self.snapshot.running)
        return self._shared

    def _gpu(self, gpu_id: int) -> Gpu:
        if self._gpus is None:  # only when a job starts a shared card: once a pass
            self._gpus = {gpu.id: gpu for host in self.snapshot.hosts for gpu in host.gpus}
        return self._gpus[gpu_id]

    def _free_per_host(self) -> dict[str, int]:
        """Free cards per host, as the pass's view has them now."""
        counts: dict[str, int] = {}
        for pool in self.capacity.pools.values():
            for host, ids in pool.free.items():
                counts[host] = counts.get(host, 0) + len(ids)
        return counts

    def _admit(self, job: Pending, placement: Placement, reason: Reason | None) -> Start:
        end = self.snapshot.now + job.run_seconds
        self.capacity.assume(placement, end, core=job.priority == "core")
        check = self._quota(job, placement.gpu_type, end)
        if check.quota is not None:
            self.spent[check.quota.id] = self.spent.get(check.quota.id, 0.0) + job.est_gpu_hours
        why = reason or Reason(ReasonCode.MATCH_CHEAPEST_FREE)  # a placement always has one
        match = MatchDecision(
            placement.gpu_type, self._alternatives(job, placement.gpu_type), why.english(), why
        )
        quota_id = check.quota.id if check.quota else None
        return Start(
            job.id, placement.gpu_ids, placement.hosts, placement.gpu_type, match, end, quota_id
        )

    def _alternatives(self, job: Pending, chosen: str) -> tuple[Alternative, ...]:
        ok = self.types.get(job.id, [])
        adequate = {card.name for card in self._fitting(job.needs)}
        verdicts = []
        for card in sorted(self.snapshot.catalog, key=lambda c: (c.price_per_gpu_hour, c.name)):
            if card.name == chosen:
                verdict = Reason(ReasonCode.VERDICT_CHOSEN)
            elif card.name not in adequate:
                verdict = _inadequate(card, job.needs)
            elif card.name not in ok:
                verdict = Reason(
                    ReasonCode.VERDICT_QUOTA_CANNOT_PAY
                    if self.capacity.could_ever_fit(card.name, job.gpus)
                    else ReasonCode.VERDICT_NO_HOST_HAS_ENOUGH
                )
            else:
                verdict = Reason(
                    ReasonCode.VERDICT_COSTLIER
                    if card.price_per_gpu_hour > _price(self.snapshot, chosen)
                    else ReasonCode.VERDICT_NOT_ENOUGH_FREE
                )
            wait = None
            if verdict.code is ReasonCode.VERDICT_NOT_ENOUGH_FREE:
                free_at, _ = self.capacity.earliest_start(
                    card.name, job.gpus, run_seconds=job.run_seconds
                )
                wait = max(0.0, free_at - self.snapshot.now) if free_at < NEVER else None
            verdicts.append(
                Alternative(card.name, card.price_per_gpu_hour, verdict.english(), wait, verdict)
            )
        return tuple(verdicts)

    def _reserve(self, job: Pending, conservative: bool, *, cheapest_only: bool = False) -> None:
        """EASY: the first blocked job of a pool gets a reservation at its earliest start.

        Conservatively (`conservative`): every core job, every job waiting past its backstop
        and every job the free cards are too spread for gets one too (up to one per host of
        the pool). Core work first: work that would run
        past the start of any waiting core job does not take the cards that free first for
        it, not only for the first of them. The backstop: starving jobs drain hosts side by
        side rather than one after another while short work refills the rest.
        """
        best: tuple[float, str, frozenset[int]] | None = None
        types = self.types[job.id]
        for gpu_type in types[:1] if cheapest_only else types:
            pool = self.capacity.pools[gpu_type]
            full = len(pool.reservations) >= len(pool.members)
            if pool.reservations and (not conservative or full):
                return  # an earlier job already holds this pool's reservation
            start, gpus = self.capacity.earliest_start(
                gpu_type, job.gpus, past_reservations=conservative, run_seconds=job.run_seconds
            )
            if start < NEVER and (best is None or start < best[0]):
                best = (start, gpu_type, gpus)
        if best is not None:
            start, gpu_type, gpus = best
            self.capacity.reserve(
                Reservation(job.id, gpu_type, start, gpus), start + job.run_seconds
            )


# What _cheapest says when it had a place but waits for a cheaper type: compared by identity,
# never shown (no start, so no match).
_FOR_A_CHEAPER_TYPE = Reason(ReasonCode.MATCH_CHEAPEST_FREE)


# One note for every job whose data is not ready (notes are never changed): a third of a
# long queue, every pass.
_WAITING_FOR_DATA = Note(WaitCode.WAITING_FOR_DATA)

# Waits no stop of another job ends.
_NOT_STARTABLE = (
    WaitCode.NEVER_FITS,
    WaitCode.WAITING_FOR_DATA,
    WaitCode.WAITING_FOR_JOB,
    WaitCode.UPSTREAM_FAILED,
    WaitCode.ARRAY_THROTTLED,
)


def _upstream_note(job: Pending) -> Note:
    """Why a job that waits for other jobs waits: the first that failed or was cancelled
    (it is held for a person to release or cancel), else the first still to come."""
    broken = [upstream for upstream, state in job.waits_for if state == UPSTREAM_BROKEN]
    if broken:
        return Note(WaitCode.UPSTREAM_FAILED, upstream=broken[0])
    return Note(WaitCode.WAITING_FOR_JOB, upstream=job.waits_for[0][0])


def _held(job: Pending) -> Note:
    """Why a job held off the hosts that refused it waits: the first of them, and why."""
    host, refusal = job.holds[0]
    return Note(WaitCode.REFUSED_BY_HOST, refused_by=host, refusal=refusal)


def _preemptions(
    snapshot: Snapshot,
    capacity: Capacity,
    admission: _Admission,
    queue: list[Pending],
    starts: list[Start],
    *,
    stoppable: tuple[list[Running], dict[int, float], float] | None = None,
    may_stop: list[Running] | None = None,
) -> list[Preempt]:
    """Step 4: running jobs asked to checkpoint and stop for a waiting job that cannot start.

    - for a ready core job: idle-class jobs (`idle_preemption`), then jobs that declared they
      checkpoint and resume (`preemptible`), of a lower class;
    - SRTF-like, for any ready job (`shorter_factor`): preemptible jobs of its own or a lower
      class whose estimated time left is at least `shorter_factor` × its run time, when it
      would otherwise wait longer than its own run time for GPUs.
    A preemptible job is never stopped more than `preempt_max_per_job` times, nor within
    `preempt_min_run_s` of its last start; a core job is never stopped for anyone.
    """
    knobs = snapshot.knobs
    may_stop, left, most_left = stoppable or _stoppable(snapshot, capacity, may_stop)
    if not may_stop:
        return []
    started = {start.job_id for start in starts}
    by_place: dict[tuple[str, str], list[Running]] = {}
    # Already stopping first (they cost nothing more), then idle before preemptible work, the
    # lower class first, then the most work left (it gains least from running on now).
    for victim in sorted(
        may_stop,
        key=lambda r: (
            not r.preempting,
            r.priority != "idle" or r.preemptible,
            -CLASS_RANK.get(r.priority, len(CLASS_RANK)),
            -left.get(r.id, 0.0),
            r.id,
        ),
    ):
        if victim.gpu_ids:
            gpu = capacity.gpus.get(victim.gpu_ids[0])
            place = (victim.gpu_type, gpu.host if gpu is not None else "")
            by_place.setdefault(place, []).append(victim)
    # A shared card frees only when all its jobs stop: job id → every job of its card.
    cards: dict[int, tuple[Running, ...]] = {}
    tenanted = (
        [gpu.tenants for host in snapshot.hosts for gpu in host.gpus if gpu.tenants]
        if capacity.tenanted
        else []
    )
    if tenanted:
        by_id = {r.id: r for r in snapshot.running}
        for tenants in tenanted:
            group = tuple(by_id[j] for j in tenants if j in by_id)
            for tenant in group:
                cards[tenant.id] = group
    chosen: list[Preempt] = []
    taken: set[int] = set()  # stoppable jobs already counted for an earlier waiting job
    factor = knobs.shorter_factor if knobs.preemptible_preemption else None
    # admission.starving, for each job of a long queue without a call per job
    limits, ranked, others = admission.starve_limits, knobs.respect_classes, len(CLASS_RANK)
    own_limits = admission.own_limits
    now, everyone = snapshot.now, len(may_stop)
    # Jobs no stop could make room for since the last stop chosen, per (types, GPUs, which
    # victims it may have: core, starving or shorter, and its class): the lowest floor on the
    # victims' time left that failed. A job of the same kind with as high a floor finds no
    # room either (it may stop the same jobs or fewer, on the same hosts), so it is passed over
    # without a walk of every host: most of a long queue, pass after pass.
    failed: dict[tuple[int, int, int, int], float] = {}
    # When each kind of job could start at the soonest: stops do not change it, and without
    # a host closing, nor does a job's run time.
    soonest_of: dict[tuple[int, int], float] | None = None if capacity.closes_at else {}
    for job in queue:
        if job.priority != "core" and (factor is None or factor * job.run_seconds > most_left):
            # What _victims_for would refuse unless the job starves, passed over cheaply
            # (most of a long queue).
            if not knobs.preemptible_preemption:
                continue
            if own_limits and job.id in own_limits:
                limit = own_limits[job.id]
            else:
                limit = limits[CLASS_RANK.get(job.priority, others) if ranked else 0]
            if limit is None or now - job.submitted_at < limit:
                continue
            starving = True
        else:
            starving = admission.starving(job)
        if job.id in started or job.id not in admission.types:
            continue
        note = admission.notes.get(job.id)
        if note is not None and note.code in _NOT_STARTABLE:
            continue
        types = admission.types[job.id]
        # The kind of victims _victims_for allows it (floor: the time left it asks of them).
        if job.priority == "core":
            kind, floor = (id(types), job.gpus, -1, 0), 0.0
        else:
            rank = CLASS_RANK.get(job.priority, others)
            if starving:
                kind, floor = (id(types), job.gpus, rank, 0), 0.0
            else:
                kind, floor = (id(types), job.gpus, rank, 1), (factor or 0.0) * job.run_seconds
        lowest = failed.get(kind)
        if lowest is not None and floor >= lowest:
            continue
        may = _victims_for(job, types, snapshot, capacity, left, most_left, starving, soonest_of)
        if may is None:
            continue
        plan = _to_stop(job, types, capacity, by_place, taken, may, cards)
        if plan is None:
            failed[kind] = floor if lowest is None else min(lowest, floor)
            continue
        failed.clear()  # stops taken and free GPUs claimed: room may be found anew
        for victim in plan:
            taken.add(victim.id)
            if not victim.preempting:
                chosen.append(_preempt(victim, job, snapshot, starving))
        if len(taken) == everyone:
            break  # nobody is left to stop
    return chosen


def _stoppable(
    snapshot: Snapshot, capacity: Capacity, may_stop: list[Running] | None = None
) -> tuple[list[Running], dict[int, float], float]:
    """The running jobs the pass may stop (or that already stop; `may_stop` when known), the
    time each has left by its estimate, and the most any preemptible one not yet stopping
    has left."""
    now = snapshot.now
    stoppable = _may_stop(snapshot) if may_stop is None else may_stop
    left = {
        r.id: max(0.0, capacity.available_at.get(r.gpu_ids[0], now) - now)
        for r in stoppable
        if r.gpu_ids
    }
    most_left = max(
        (left.get(r.id, 0.0) for r in stoppable if r.preemptible and not r.preempting), default=0.0
    )
    return stoppable, left, most_left


def _may_stop(snapshot: Snapshot) -> list[Running]:
    """The running jobs the pass may stop (or that already stop)."""
    knobs, now = snapshot.knobs, snapshot.now
    idle, preemptible = knobs.idle_preemption, knobs.preemptible_preemption
    most, min_run = knobs.preempt_max_per_job, knobs.preempt_min_run_s
    # Who the policy may ask to stop at all (for someone), asked of every running job every
    # pass: never a core job; a job on a shared card always (for a core job taking its card
    # back); an idle one when idle work yields; a preemptible one within its limits.
    return [
        r
        for r in snapshot.running
        if r.preempting
        or (
            r.priority != "core"
            and (
                r.share_gib is not None
                or (r.priority == "idle" and idle and not r.preemptible)
                or (
                    r.preemptible
                    and preemptible
                    and r.preemptions < most
                    and now - r.started_at >= min_run
                )
            )
        )
    ]


def _victims_for(
    job: Pending,
    types: list[str],
    snapshot: Snapshot,
    capacity: Capacity,
    left: dict[int, float],
    most_left: float,
    starving: bool,
    soonest_of: dict[tuple[int, int], float] | None = None,
) -> Callable[[Running], bool] | None:
    """Which stoppable jobs this waiting job may have stopped, or None for none
    (`soonest_of`: the soonest start per job types and GPUs, kept by the caller for a pass in
    which no host closes, when the job's run time does not change it)."""
    knobs = snapshot.knobs
    if job.priority == "core":
        return lambda r: r.preempting or r.priority != "core"
    if not knobs.preemptible_preemption:
        return None
    rank = CLASS_RANK.get(job.priority, len(CLASS_RANK))
    if starving:
        # The backstop is a promise: work that can resume yields to a job waiting past it.
        return lambda r: (
            r.preempting or (r.preemptible and CLASS_RANK.get(r.priority, len(CLASS_RANK)) >= rank)
        )
    if knobs.shorter_factor is None:
        return None
    run = job.run_seconds
    floor = knobs.shorter_factor * run
    if floor > most_left:
        return None  # no running job has that much left
    # Only for work that would otherwise wait longer than it runs: a short job waits at most
    # about its own length before it stops a long one, so the stops stay few.
    shape = (id(types), job.gpus)
    soonest = soonest_of.get(shape) if soonest_of is not None else None
    if soonest is None:
        soonest = min(
            (capacity.earliest_start(t, job.gpus, run_seconds=run)[0] for t in types),
            default=NEVER,
        )
        if soonest_of is not None:
            soonest_of[shape] = soonest
    if soonest <= snapshot.now + run:
        return None

    def may(r: Running) -> bool:
        if r.preempting:
            return True
        return (
            r.preemptible
            and CLASS_RANK.get(r.priority, len(CLASS_RANK)) >= rank
            and left.get(r.id, 0.0) >= floor
        )

    return may


def _to_stop(
    job: Pending,
    types: list[str],
    capacity: Capacity,
    by_place: dict[tuple[str, str], list[Running]],
    taken: set[int],
    may: Callable[[Running], bool],
    cards: dict[int, tuple[Running, ...]] | None = None,
) -> list[Running] | None:
    """The fewest GPUs to stop on one host so that, with its free GPUs, the job fits. A job
    on a shared card counts only with every other job of its card, all stoppable."""
    best: tuple[int, list[Running], str, str] | None = None
    cards = cards or {}
    for (gpu_type, host), candidates in by_place.items():
        pool = capacity.pools.get(gpu_type)
        if pool is None or gpu_type not in types or job.gpus > pool.max_host_size:
            continue
        have = len(pool.free.get(host, []))
        stop: list[Running] = []
        stopping: set[int] = set()
        for victim in candidates:  # already stopping first, then the cheapest to stop
            if have >= job.gpus:
                break
            if victim.id in taken or victim.id in stopping or not may(victim):
                continue
            group = cards.get(victim.id)
            if group is None:
                stop.append(victim)
                stopping.add(victim.id)
                have += len(victim.gpu_ids)
            elif all(t.id not in taken and may(t) for t in group):
                stop.extend(t for t in group if t.id not in stopping)
                stopping.update(t.id for t in group)
                have += 1
        if have >= job.gpus and stop:
            cost = sum(len(v.gpu_ids) for v in stop if not v.preempting)
            if best is None or cost < best[0]:
                best = (cost, stop, host, gpu_type)
    if best is None:
        return None
    _, stop, host, gpu_type = best
    # The free GPUs on that host are now spoken for by this job.
    capacity.claim_free(gpu_type, host)
    return stop


def _preempt(victim: Running, job: Pending, snapshot: Snapshot, starving: bool) -> Preempt:
    knobs = snapshot.knobs
    grace = victim.grace_s if victim.grace_s is not None else knobs.idle_grace_s
    if victim.share_gib is not None and job.priority == "core":
        code, reason = (
            PreemptCode.SHARED_FOR_CORE,
            f"shared job stopped so core job #{job.id} can have its card",
        )
    elif victim.priority == "idle" and not victim.preemptible:
        code, reason = (
            PreemptCode.IDLE_FOR_CORE,
            f"idle-class job stopped so core job #{job.id} can start",
        )
    elif job.priority == "core":
        code, reason = (
            PreemptCode.FOR_CORE,
            f"preemptible job stopped so core job #{job.id} can start",
        )
    elif starving:
        code, reason = (
            PreemptCode.FOR_STARVING,
            f"preemptible job stopped for job #{job.id}, waiting past the backstop",
        )
    else:
        code, reason = (
            PreemptCode.FOR_SHORTER,
            f"preemptible job stopped for much shorter job #{job.id}",
        )
    return Preempt(victim.id, job.id, snapshot.now + grace, reason, code)


def costlier_after(knobs: Knobs, run_seconds: float) -> float:
    """How long a job of this run time waits for a cheaper type before a costlier one."""
    if knobs.costlier_after_runs is None:
        return knobs.costlier_after_s
    return min(knobs.costlier_after_s, knobs.costlier_after_runs * run_seconds)


def _pressure(fingerprint: Fingerprint | None) -> str:
    """A job's pressure on memory bandwidth in a word, "unknown" without earlier runs."""
    if fingerprint is None:
        return "unknown"
    return "light" if light(fingerprint) else str(bandwidth(fingerprint))


def _inadequate(card: CardType, needs: CardNeeds) -> Reason:
    if needs.allowed_types is not None and card.name not in needs.allowed_types:
        return Reason(ReasonCode.VERDICT_NOT_ALLOWED)
    if needs.min_memory_gib is not None and card.memory_gib < needs.min_memory_gib:
        memory = ReasonCode.VERDICT_TOO_LITTLE_MEMORY
        return because(memory, memory=card.memory_gib, needed=needs.min_memory_gib)
    return because(ReasonCode.VERDICT_TOO_SLOW, speed=card.speed, needed=needs.min_speed)


def _price(snapshot: Snapshot, gpu_type: str) -> float:
    return next((c.price_per_gpu_hour for c in snapshot.catalog if c.name == gpu_type), 0.0)


__all__ = ["HOUR", "Note", "could_act", "queue_order", "schedule"]
