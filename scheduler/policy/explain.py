"""Step 5: why each waiting job waits, as a code with its numbers, and when it should start.

ETAs come from a shadow plan: jobs are laid in queue order onto each type's GPUs as those
free up (running jobs end at their estimates). It ignores host boundaries and backfill, so
it errs late for small jobs; it is an estimate, and says so.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass

from scheduler.policy.capacity import NEVER, Capacity
from scheduler.policy.plan import Start, Wait, WaitCode
from scheduler.policy.priority_classes import CLASS_RANK
from scheduler.policy.snapshot import Pending, Snapshot


@dataclass(frozen=True, slots=True)
class Note:
    """Why the admission step did not start a job, handed to the reasons step."""

    code: WaitCode
    gpu_type: str | None = None
    eta: float | None = None  # when the cheaper type it waits for should be free
    costlier: str = ""  # the costlier type it could take instead
    left_hours: float = 0.0  # quota exhausted: GPU-hours left
    refused_by: str = ""  # refused by host: the host
    refusal: str = ""  # … and why (a refusal code)
    hosts: tuple[tuple[str, str], ...] = ()  # waiting for hosts: which, and why not now
    upstream: int | None = None  # waiting for a job, or held after it failed: which job
    array: int | None = None  # held back by its array's max_running: which array
    team: str = ""  # cards booked for another team: which team


# Codes whose job cannot be given a start time.
_NO_ETA = (
    WaitCode.WAITING_FOR_DATA,
    WaitCode.NEVER_FITS,
    WaitCode.QUOTA_EXHAUSTED,
    WaitCode.NO_LIVE_QUOTA,
    WaitCode.QUOTA_EXPIRES,
    WaitCode.REFUSED_BY_HOST,
    WaitCode.WAITING_FOR_HOSTS,
    WaitCode.WAITING_FOR_JOB,
    WaitCode.UPSTREAM_FAILED,
    WaitCode.ARRAY_THROTTLED,
    WaitCode.BOOKED_FOR_TEAM,
)


def explain_waits(
    snapshot: Snapshot,
    capacity: Capacity,
    queue: list[Pending],
    notes: dict[int, Note],
    types: dict[int, list[str]],
    starts: list[Start],
) -> dict[int, Wait]:
    """A Wait for every pending job not started in this pass."""
    started = {start.job_id for start in starts}
    shadow = _Shadow(capacity)
    # A job with a place kept starts there when its cards free up, whoever is ahead of it:
    # its ETA is that place's start. The shadow counts a type's cards, not the hosts they
    # are on, so it would say "now" to a job of one host while the free cards lie spread.
    kept = {
        r.job_id: (r.start, r.gpu_type)
        for pool in capacity.pools.values()
        for r in pool.reservations
    }
    # Core work may stop idle and preemptible work (scheduler.py's preemption step): its own
    # shadow frees those GPUs when they may be stopped, so its ETA counts on that.
    stoppable = _stoppable_at(snapshot)
    core_shadow = _Shadow(capacity, stoppable) if stoppable else shadow
    ahead: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # waiting jobs per type, per class
    # The first waiting job per class that could take each type, with its place: whom a job
    # waits behind. By the types a job fits, not the shadow's pick: that pick drifts from
    # cycle to cycle like an ETA, and whom a job waits behind should not.
    first: dict[str, list[tuple[int, int] | None]] = {}
    unfilled = 3 * len(capacity.pools)  # once every slot is taken, nothing more to note
    # Answers of _first_of for the slots as they are (jobs share a few sets of types).
    looked_up: dict[tuple[int, int, int], int | None] = {}
    waits: dict[int, Wait] = {}
    for position, job in enumerate(queue, start=1):
        if job.id in started:
            continue
        note = notes.get(job.id)
        code = note.code if note else None
        if note is not None and note.code in _NO_ETA:
            waits[job.id] = _unestimated(job, note, position, snapshot.now)
            continue
        gpu_type, eta = shadow.place(job, types.get(job.id, []))
        if job.priority == "core" and core_shadow is not shadow:
            sooner_type, sooner = core_shadow.place(job, types.get(job.id, []))
            if sooner < eta:
                gpu_type, eta = sooner_type, sooner
        place = kept.get(job.id)
        if place is not None:
            eta, gpu_type = place
        rank = CLASS_RANK.get(job.priority, 2)
        counts = ahead[gpu_type] if gpu_type else [0, 0, 0]
        higher = sum(counts[:rank]) if snapshot.knobs.respect_classes else 0
        earlier = sum(counts) - higher
        if code is None:
            code = (
                WaitCode.BEHIND_HIGHER_PRIORITY
                if higher
                else WaitCode.BEHIND_EARLIER
                if earlier
                else WaitCode.NO_TYPE_FREE
            )
        fits = types.get(job.id, ())
        behind = None
        if code is WaitCode.BEHIND_HIGHER_PRIORITY or code is WaitCode.BEHIND_EARLIER:
            # Higher classes; else its own class or lower (any class when classes are off).
            if code is WaitCode.BEHIND_HIGHER_PRIORITY:
                low, high = 0, rank
            else:
                low, high = (rank if snapshot.knobs.respect_classes else 0), 3
            key = (id(fits), low, high)  # jobs of one kind of need share their list
            if key in looked_up:
                behind = looked_up[key]
            else:
                behind = looked_up[key] = _first_of(first, fits, low, high)
        waits[job.id] = Wait(
            job.id,
            code,
            position,
            eta if eta < NEVER else None,
            note.gpu_type if note and note.gpu_type else gpu_type,
            higher,
            earlier,
            costlier=note.costlier if note else "",
            free_at=note.eta if note and note.eta is not None and note.eta < NEVER else None,
            as_of=snapshot.now,
            behind=behind,
        )
        if gpu_type:
            counts[min(rank, 2)] += 1
        if unfilled:
            for fit in fits:
                slots = first.setdefault(fit, [None, None, None])
                if slots[rank] is None:
                    slots[rank] = (position, job.id)
                    unfilled -= 1
                    looked_up.clear()
    return waits


def _first_of(
    first: dict[str, list[tuple[int, int] | None]],
    types: list[str] | tuple[()],
    low: int,
    high: int,
) -> int | None:
    """The earliest waiting job ahead, of a class ranked from `low` up to (not including)
    `high`, that could take one of `types`."""
    found = [entry for fit in types for entry in first.get(fit, [])[low:high] if entry is not None]
    return min(found)[1] if found else None


def _stoppable_at(snapshot: Snapshot) -> dict[int, float]:
    """GPUs of running work core work may stop, each with the moment it would be free: once
    the work has run its minimum (preemptible work) and its grace has passed."""
    knobs = snapshot.knobs
    found: dict[int, float] = {}
    for run in snapshot.running:
        if run.priority == "core":
            continue
        if run.priority == "idle" and knobs.idle_preemption:
            ready = snapshot.now
        elif (
            run.preemptible
            and knobs.preemptible_preemption
            and run.preemptions < knobs.preempt_max_per_job
        ):
            ready = max(snapshot.now, run.started_at + knobs.preempt_min_run_s)
        else:
            continue
        grace = run.grace_s if run.grace_s is not None else knobs.idle_grace_s
        free = min(run.expected_end, ready + grace)
        for gpu in run.gpu_ids:
            found[gpu] = free
    return found


class _Shadow:
    """When each type's GPUs free up, as jobs are laid onto them in queue order (`sooner`:
    GPUs that free up before their holder's expected end, for the work that may stop it)."""

    def __init__(self, capacity: Capacity, sooner: dict[int, float] | None = None) -> None:
        self.now = capacity.now
        self.heaps: dict[str, list[float]] = {}
        sooner = sooner or {}
        for gpu_type, pool in capacity.pools.items():
            heap = [
                max(min(capacity.available_at[gpu], sooner.get(gpu, NEVER)), capacity.now)
                for ids in pool.members.values()
                for gpu in ids
            ]
            heapq.heapify(heap)
            self.heaps[gpu_type] = heap

    def place(self, job: Pending, types: list[str]) -> tuple[str | None, float]:
        """Lay the job on the type where it starts soonest (cheapest on ties)."""
        best: tuple[float, str] | None = None
        for gpu_type in types:
            heap = self.heaps.get(gpu_type)
            if heap is None or len(heap) < job.gpus:
                continue
            taken = [heapq.heappop(heap) for _ in range(job.gpus)]
            start = taken[-1]
            for moment in taken:
                heapq.heappush(heap, moment)
            if best is None or start < best[0]:
                best = (start, gpu_type)
        if best is None:
            return None, NEVER
        start, gpu_type = best
        heap = self.heaps[gpu_type]
        for _ in range(job.gpus):
            heapq.heappop(heap)
        for _ in range(job.gpus):
            heapq.heappush(heap, start + job.run_seconds)
        return gpu_type, start


def _unestimated(job: Pending, note: Note, position: int, now: float) -> Wait:
    """The wait of a job that cannot be given a start time: data, quota, or no fit."""
    return Wait(
        job.id,
        note.code,
        position,
        None,
        note.gpu_type,
        left_hours=note.left_hours,
        needs_hours=job.est_gpu_hours,
        gpus=job.gpus,
        keeps_headroom=note.code is WaitCode.NEVER_FITS and job.priority != "core",
        as_of=now,
        refused_by=note.refused_by,
        refusal=note.refusal,
        hosts=note.hosts,
        upstream=note.upstream,
        array=note.array,
        team=note.team,
        free_at=note.eta if note.code is WaitCode.BOOKED_FOR_TEAM else None,
    )
