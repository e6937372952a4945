"""The order in which pending jobs are considered.

Key, smallest first:
1. priority class (core < normal < idle), unless classes are ignored (baselines);
2. starving jobs first: a job waiting longer than `starve_after_hours` is ordered by submit
   time ahead of the rest of its class (the backstop: no job waits forever);
3. within the class, `shortest_first` orders by estimated GPU-seconds ÷ aging × fair share:
   aging = 2 ** (wait / aging_hours), capped at `max_aging_factor` when one is set;
   fair share = 1 + fair_share_weight × the team's share of recent usage;
   `submit_order` orders by submit time; `multifactor` by Slurm's multifactor priority
   (snapshot.Multifactor), highest first;
4. submit time, then id, so ties never reorder.

Uncapped aging bounds every wait: a job k times the size of another, submitted before it,
goes first once it has waited aging_hours × log2(k) — with the default 24 h, a job 1,000×
bigger waits at most ten days more behind a stream of small ones. (A cap stops aging, and
a big enough job then waits for as long as smaller ones keep arriving.) The order among
aged jobs still favours the shorter, where moving everything old to submit order would
make every long job wait behind every other. The key is compared in log2 space, so a
long wait never overflows.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from operator import attrgetter

from scheduler.policy.matching import CardNeeds, CardType
from scheduler.policy.priority_classes import CLASS_RANK
from scheduler.policy.snapshot import HOUR, Knobs, Multifactor, Pending, WithinClass

RankKey = tuple[int, int, float, float, int]
# The shortest aging doubling time a drained queue gives (a scale of zero would divide by it).
MIN_AGING_S = 60.0


@dataclass(frozen=True, slots=True)
class TimeScale:
    """The ordering's two times for one pass, in seconds: how long a wait doubles a job's aging,
    and the backstop (None: none)."""

    aging_s: float
    starve_after_s: float | None

    def starves(self, wait: float) -> bool:
        """Whether a job that has waited `wait` seconds is past the backstop."""
        return self.starve_after_s is not None and wait >= self.starve_after_s


@dataclass(frozen=True, slots=True)
class TimeScales:
    """A pass's TimeScale per class rank. Each class is measured by the drain time of its own
    ready work and that of the classes ordered before it — what FIFO would make a newcomer of
    that class wait — so work of a lower class never changes the order of a higher one.

    Aging is in the queue's own drain time (its work over the GPUs): how fast short work
    passes long work is a matter of the queue's sizes. The backstop is in the wait FIFO would
    give a newcomer, each GPU counted from when it frees (FreeGpus): a queue of minutes behind
    GPUs busy for days is not minutes deep, and measured by the queue alone every job would
    soon be past the backstop there, and the queue in submit order. A few week-long runs
    barely move it: the other GPUs free sooner and do the work.

    A job that can use only some of the cluster's types is measured on those cards, when the
    work that can only run there takes longer to drain than the whole queue (`by_job`: job
    id → its scale, for those jobs alone). A queue of jobs that want the one scarce type waits
    far longer than the cluster's drain time: measured against the cluster, every such job
    would soon be past the backstop, and that queue would run in submit order."""

    by_rank: tuple[TimeScale, ...]
    by_job: Mapping[int, TimeScale] = field(default_factory=dict)

    def of(self, rank: int) -> TimeScale:
        return self.by_rank[min(rank, len(self.by_rank) - 1)]

    def of_job(self, job_id: int, rank: int) -> TimeScale:
        """The scale of one job of class rank `rank` (its types' own, where they have one)."""
        scale = self.by_job.get(job_id)
        return scale if scale is not None else self.of(rank)


def time_scales(
    knobs: Knobs,
    pending: Sequence[Pending] = (),
    gpus: int = 0,
    cards: Sequence[tuple[CardType, Sequence[float]]] = (),
    sharing: bool = False,
) -> TimeScales:
    """The pass's time scales: the absolute knobs, or drain times per class (see TimeScales).
    `cards`, when given, are the cluster's types, each with the seconds until each of its
    usable GPUs is free (0 for a free one): the backstop then counts when the GPUs free up,
    and jobs that accept only some types are measured on those; without them, `gpus` GPUs
    all free now. `sharing`: some host shares cards, so a job that may share is work of its
    part of a card (see _Kinds.part_of), not of a whole one."""
    if knobs.aging_drains is None and knobs.starve_after_drains is None:
        return TimeScales((time_scale(knobs),))
    respect = knobs.respect_classes
    ranks = len(CLASS_RANK) + 1 if respect else 1
    rank_of, others = CLASS_RANK.get, len(CLASS_RANK)
    kinds = _Kinds(cards, knobs.share_reserve_gib)
    several = kinds.several
    parts = sharing and bool(cards)
    work = [0.0] * ranks
    typed: dict[frozenset[str], list[float]] = {}
    for job in pending:
        if job.data_ready and not job.waits_for:  # job.ready, without a call per job
            rank = rank_of(job.priority, others) if respect else 0
            amount = job.gpus * job.run_seconds
            if parts and job.share and job.shares:  # job.share first: no call for most jobs
                amount *= kinds.part_of(job.needs)
            work[rank] += amount
            if several:
                types = kinds.types_of(job.needs)
                if types is not None:
                    typed.setdefault(types, [0.0] * ranks)[rank] += amount
    every = kinds.gpus_of(None) if cards else None
    scales, drains, waits, total = [], [], [], 0.0
    for amount in work:
        total += amount
        drains.append(total / gpus if gpus > 0 else 0.0)
        waits.append(every.drain(total) if every is not None else drains[-1])
        scales.append(time_scale(knobs, drains[-1], waits[-1]))
    by_job: dict[int, TimeScale] = {}
    if several:
        own: dict[tuple[int, frozenset[str]], TimeScale | None] = {}
        for job in pending:
            types = kinds.types_of(job.needs)
            if types is None:
                continue
            rank = rank_of(job.priority, others) if respect else 0
            key = (rank, types)
            if key not in own:
                amount = sum(
                    sum(amounts[: rank + 1]) for kind, amounts in typed.items() if kind <= types
                )
                mine = kinds.gpus_of(types)
                drain = amount / mine.count if mine.count else 0.0
                wait = mine.drain(amount)
                own[key] = (
                    time_scale(knobs, max(drain, drains[rank]), max(wait, waits[rank]))
                    if drain > drains[rank] or wait > waits[rank]
                    else None
                )
            scale = own[key]
            if scale is not None:
                by_job[job.id] = scale
    return TimeScales(tuple(scales), by_job)


class FreeGpus:
    """GPUs by when each is free, in seconds from now: how long they need to work off an
    amount of work when each starts on it as it frees (a fluid fill, as FIFO would go)."""

    __slots__ = ("_reach", "_sums", "count")

    def __init__(self, free_in: Iterable[float]) -> None:
        delays = sorted(free_in)
        self.count = len(delays)
        # _sums[k]: the first k GPUs' delays added up; _reach[k - 1]: the work the first k
        # GPUs have done when the next one frees (k × its delay − _sums[k]), never falling.
        self._sums = list(accumulate(delays, initial=0.0))
        self._reach = [k * delays[k] - self._sums[k] for k in range(1, self.count)]

    def drain(self, work: float) -> float:
        """When `work` GPU-seconds are done, in seconds from now (0 with no GPUs)."""
        if self.count == 0:
            return 0.0
        working = bisect_left(self._reach, work) + 1  # GPUs at work when it is done
        return (work + self._sums[working]) / working


class _Kinds:
    """The types each kind of job may use, and the GPUs of a set of types."""

    def __init__(
        self, cards: Sequence[tuple[CardType, Sequence[float]]], reserve_gib: float = 0.0
    ) -> None:
        self._cards = [(card, free_in) for card, free_in in cards if free_in]
        self.several = len(self._cards) > 1
        self._reserve = reserve_gib
        self._types: dict[int, frozenset[str] | None] = {}  # by id(needs): stable for a pass
        self._parts: dict[int, float] = {}  # by id(needs), as _types
        self._gpus: dict[frozenset[str] | None, FreeGpus] = {}

    def part_of(self, needs: CardNeeds) -> float:
        """The part of a card a job that shares one takes: its memory and the reserve kept
        beside it, of the smallest card it may use (at most all of it). Counted whole, a
        queue of evaluations that each take a fifth of a card looks five times as deep as
        it is, and the backstop (and the reservations it brings) comes that much later for
        every job behind it; counted by what the largest card leaves, it would look shallower
        than it is on the small cards the jobs may also take."""
        key = id(needs)
        part = self._parts.get(key)
        if part is None:
            smallest = min(
                (card.memory_gib for card, _ in self._cards if needs.admits(card)), default=0.0
            )
            wanted = (needs.min_memory_gib or 0.0) + self._reserve
            part = min(1.0, wanted / smallest) if smallest > 0 else 1.0
            self._parts[key] = part
        return part

    def types_of(self, needs: CardNeeds) -> frozenset[str] | None:
        """The types a job with these needs may use; None: every type (or there is only one)."""
        key = id(needs)
        if key not in self._types:
            names = frozenset(card.name for card, _ in self._cards if needs.admits(card))
            self._types[key] = None if len(names) == len(self._cards) or not names else names
        return self._types[key]

    def gpus_of(self, types: frozenset[str] | None) -> FreeGpus:
        """The GPUs of `types` (None: of every type)."""
        if types not in self._gpus:
            self._gpus[types] = FreeGpus(
                delay
                for card, free_in in self._cards
                if types is None or card.name in types
                for delay in free_in
            )
        return self._gpus[types]


def time_scale(knobs: Knobs, drain_s: float = 0.0, wait_s: float | None = None) -> TimeScale:
    """The pass's aging and backstop: the absolute knobs, or in units of the drain time (the
    backstop in units of `wait_s`, when given: the drain counting when busy GPUs free)."""
    if knobs.aging_drains is not None:
        aging = max(MIN_AGING_S, knobs.aging_drains * drain_s)
    else:
        aging = knobs.aging_hours * HOUR
    limits = []
    if knobs.starve_after_hours is not None:
        limits.append(knobs.starve_after_hours * HOUR)
    if knobs.starve_after_drains is not None:
        limits.append(knobs.starve_after_drains * (drain_s if wait_s is None else wait_s))
    return TimeScale(aging, min(limits) if limits else None)


def rank_key(
    job: Pending,
    now: float,
    knobs: Knobs,
    shares: Mapping[str, float],
    *,
    cluster_gpus: int = 0,
    scales: TimeScales | None = None,
) -> RankKey:
    """The sort key of one pending job (`cluster_gpus` sizes the multifactor job size; `scales`
    are the pass's, by default from the absolute knobs)."""
    return rank_key_function(now, knobs, shares, cluster_gpus=cluster_gpus, scales=scales)(job)


def rank_key_function(
    now: float,
    knobs: Knobs,
    shares: Mapping[str, float],
    *,
    cluster_gpus: int = 0,
    scales: TimeScales | None = None,
) -> Callable[[Pending], RankKey]:
    """`rank_key` for one pass, with what every job shares worked out once (a pass sorts
    tens of thousands of jobs with it)."""
    scales = scales or time_scales(knobs)
    by_rank, own_of = scales.by_rank, scales.by_job.get if scales.by_job else None
    last = len(by_rank) - 1
    starve_at = [scale.starve_after_s for scale in by_rank]
    aging_s = [scale.aging_s for scale in by_rank]
    respect, within = knobs.respect_classes, knobs.within_class
    others = len(CLASS_RANK)
    cap = math.log2(knobs.max_aging_factor) if knobs.max_aging_factor is not None else None
    weight = knobs.fair_share_weight
    log2 = math.log2
    if respect and within is WithinClass.SHORTEST_FIRST and cap is None:
        return _shortest_first_key(now, starve_at, aging_s, weight, shares, own_of)

    def key(job: Pending) -> RankKey:
        rank = CLASS_RANK.get(job.priority, others) if respect else 0
        scale = rank if rank < last else last
        wait = now - job.submitted_at
        if wait < 0.0:
            wait = 0.0
        own = own_of(job.id) if own_of is not None else None
        limit = starve_at[scale] if own is None else own.starve_after_s
        starving = limit is not None and wait >= limit
        if starving or within is WithinClass.SUBMIT_ORDER:
            return (rank, 0 if starving else 1, job.submitted_at, job.submitted_at, job.id)
        if within is WithinClass.MULTIFACTOR:
            score = -multifactor_priority(job, wait, knobs.multifactor, shares, cluster_gpus)
            return (rank, 1, score, job.submitted_at, job.id)
        aging = wait / (aging_s[scale] if own is None else own.aging_s)  # log2 of the factor
        if cap is not None and aging > cap:
            aging = cap
        fair = 1.0 + weight * shares.get(job.team, 0.0)
        size = job.gpus * job.run_seconds
        if size < 1.0:
            size = 1.0
        return (rank, 1, log2(size * fair) - aging, job.submitted_at, job.id)

    return key


def _shortest_first_key(
    now: float,
    starve_at: list[float | None],
    aging_s: list[float],
    weight: float,
    shares: Mapping[str, float],
    own_of: Callable[[int], TimeScale | None] | None,
) -> Callable[[Pending], RankKey]:
    """rank_key_function's key for its default case (classes respected, shortest first, aging
    uncapped): the same floats, with the branches the case never takes left out (a pass
    sorts every waiting job with it). `own_of` gives the jobs measured on their own types
    their scale (TimeScales.by_job; None when there are none)."""
    last = len(aging_s) - 1
    rank_of, others = CLASS_RANK.get, len(CLASS_RANK)
    fair_of = {team: 1.0 + weight * share for team, share in shares.items()}.get
    log2 = math.log2

    def key(job: Pending) -> RankKey:
        rank = rank_of(job.priority, others)
        scale = rank if rank < last else last
        submitted = job.submitted_at
        wait = now - submitted
        if wait < 0.0:
            wait = 0.0
        own = own_of(job.id) if own_of is not None else None
        limit = starve_at[scale] if own is None else own.starve_after_s
        if limit is not None and wait >= limit:
            return (rank, 0, submitted, submitted, job.id)
        size = job.gpus * job.run_seconds
        if size < 1.0:
            size = 1.0
        fair = fair_of(job.team, 1.0)
        aging = aging_s[scale] if own is None else own.aging_s
        return (rank, 1, log2(size * fair) - wait / aging, submitted, job.id)

    return key


def multifactor_priority(
    job: Pending, wait: float, weights: Multifactor, shares: Mapping[str, float], cluster_gpus: int
) -> float:
    """Slurm's multifactor priority of a pending job (higher goes first)."""
    age = min(1.0, wait / weights.max_age_s) if weights.max_age_s > 0 else 1.0
    normalized_shares = 1.0 / max(1, len(shares))
    fairshare = math.pow(2.0, -shares.get(job.team, 0.0) / normalized_shares)
    size = min(1.0, job.gpus / cluster_gpus) if cluster_gpus > 0 else 0.0
    if weights.favor_small:
        size = 1.0 - size
    return (
        weights.weight_age * age
        + weights.weight_fairshare * fairshare
        + weights.weight_job_size * size
    )


def usage_shares(team_usage: Mapping[str, float]) -> dict[str, float]:
    """Each team's share (0..1) of recent usage."""
    total = sum(team_usage.values())
    if total <= 0:
        return {}
    return {team: hours / total for team, hours in team_usage.items()}


def ordered(
    jobs: Sequence[Pending],
    now: float,
    knobs: Knobs,
    team_usage: Mapping[str, float],
    *,
    cluster_gpus: int = 0,
    scales: TimeScales | None = None,
) -> list[Pending]:
    """Pending jobs in the order the scheduler considers them."""
    if knobs.within_class is WithinClass.SUBMIT_ORDER:
        # Starving jobs are the earliest submitted, so this is plain submit order within
        # each class; sorted with a C-level key, as FIFO queues get long.
        by_submit = sorted(jobs, key=attrgetter("submitted_at", "id"))
        if not knobs.respect_classes:
            return by_submit
        classes: list[list[Pending]] = [[] for _ in range(len(CLASS_RANK) + 1)]
        for job in by_submit:  # a stable split by class, cheaper than a second sort
            classes[CLASS_RANK.get(job.priority, len(CLASS_RANK))].append(job)
        return [job for jobs_of_class in classes for job in jobs_of_class]
    key = rank_key_function(
        now, knobs, usage_shares(team_usage), cluster_gpus=cluster_gpus, scales=scales
    )
    return sorted(jobs, key=key)


@dataclass(frozen=True, slots=True)
class RankTerms:
    """The terms one pending job's rank key is built from (`/gpu priority`, like Slurm's
    sprio): `key` composes them exactly as `rank_key` does, so the order they give is the
    policy's order."""

    job_id: int
    priority: str
    class_rank: int  # 0 for every class when classes are ignored
    submitted_at: float
    wait_s: float
    # The job has waited past `starve_after_hours`: ordered by submit time ahead of its class.
    starving: bool
    # Jobs of the class are in submit order (the policy's `submit_order`, or starving).
    by_submit: bool
    size_gpu_s: float  # estimated GPU-seconds (≥ 1), corrected by the owner's history
    # log2 of the aging factor 2 ** (wait / aging_hours), capped when the policy caps it: the
    # key is compared in log2 space, so a long wait never overflows.
    aging_log2: float
    aging_capped: bool
    team_share: float  # the team's share (0..1) of recent usage
    fair_share: float  # 1 + fair_share_weight × team_share
    # Ordered by Slurm's multifactor priority instead (a simulation baseline): that priority.
    multifactor: float | None = None

    @property
    def aging_factor(self) -> float:
        """How many times smaller the wait makes the job look (inf past ~1,000 doublings)."""
        return math.pow(2.0, self.aging_log2) if self.aging_log2 < 1000 else math.inf

    @property
    def score(self) -> float:
        """The within-class term, smaller first: log2(size × fair share ÷ aging)."""
        return math.log2(self.size_gpu_s * self.fair_share) - self.aging_log2

    @property
    def key(self) -> RankKey:
        if self.by_submit:
            first = 0 if self.starving else 1
            return (self.class_rank, first, self.submitted_at, self.submitted_at, self.job_id)
        if self.multifactor is not None:
            return (self.class_rank, 1, -self.multifactor, self.submitted_at, self.job_id)
        return (self.class_rank, 1, self.score, self.submitted_at, self.job_id)


def rank_terms(
    job: Pending,
    now: float,
    knobs: Knobs,
    shares: Mapping[str, float],
    *,
    cluster_gpus: int = 0,
    scales: TimeScales | None = None,
) -> RankTerms:
    """The terms of `rank_key(job, now, knobs, shares)`, each as people read it."""
    rank = CLASS_RANK.get(job.priority, len(CLASS_RANK)) if knobs.respect_classes else 0
    scale = (scales or time_scales(knobs)).of_job(job.id, rank)
    wait = max(0.0, now - job.submitted_at)
    starving = scale.starves(wait)
    log_aging = wait / scale.aging_s
    capped = knobs.max_aging_factor is not None and log_aging > math.log2(knobs.max_aging_factor)
    if capped and knobs.max_aging_factor is not None:
        log_aging = math.log2(knobs.max_aging_factor)
    share = shares.get(job.team, 0.0)
    return RankTerms(
        job_id=job.id,
        priority=job.priority,
        class_rank=rank,
        submitted_at=job.submitted_at,
        wait_s=wait,
        starving=starving,
        by_submit=starving or knobs.within_class is WithinClass.SUBMIT_ORDER,
        size_gpu_s=max(1.0, job.gpus * job.run_seconds),
        aging_log2=log_aging,
        aging_capped=capped,
        team_share=share,
        fair_share=1.0 + knobs.fair_share_weight * share,
        multifactor=multifactor_priority(job, wait, knobs.multifactor, shares, cluster_gpus)
        if knobs.within_class is WithinClass.MULTIFACTOR
        else None,
    )
