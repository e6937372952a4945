"""Step 5: why each waiting job waits, in plain words, and when it should start.

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
from scheduler.policy.snapshot import CLASS_RANK, Pending, Snapshot


@dataclass(frozen=True, slots=True)
class Note:
    """Why the admission step did not start a job, handed to the reasons step."""

    code: WaitCode
    detail: str = ""
    gpu_type: str | None = None
    eta: float | None = None


# Codes whose job cannot be given a start time.
_NO_ETA = (
    WaitCode.WAITING_FOR_DATA,
    WaitCode.NEVER_FITS,
    WaitCode.QUOTA_EXHAUSTED,
    WaitCode.QUOTA_EXPIRES,
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
    ahead: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # waiting jobs per type, per class
    waits: dict[int, Wait] = {}
    now = snapshot.now
    for position, job in enumerate(queue, start=1):
        if job.id in started:
            continue
        note = notes.get(job.id)
        code = note.code if note else None
        if note is not None and note.code in _NO_ETA:
            waits[job.id] = Wait(
                job.id,
                note.code,
                _words(job, note, now, None, 0, 0),
                position,
                None,
                detail=note.detail,
            )
            continue
        gpu_type, eta = shadow.place(job, types.get(job.id, []))
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
        waits[job.id] = Wait(
            job.id,
            code,
            _words(job, note, now, eta, higher, earlier, gpu_type),
            position,
            eta if eta < NEVER else None,
            gpu_type,
            higher,
            earlier,
            note.detail if note else "",
        )
        if gpu_type:
            counts[min(rank, 2)] += 1
    return waits


class _Shadow:
    """When each type's GPUs free up, as jobs are laid onto them in queue order."""

    def __init__(self, capacity: Capacity) -> None:
        self.now = capacity.now
        self.heaps: dict[str, list[float]] = {}
        for gpu_type, pool in capacity.pools.items():
            heap = [
                max(capacity.available_at[gpu], capacity.now)
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


def _words(
    job: Pending,
    note: Note | None,
    now: float,
    eta: float | None,
    higher: int,
    earlier: int,
    gpu_type: str | None = None,
) -> str:
    code = note.code if note else None
    detail = note.detail if note else ""
    if code is WaitCode.WAITING_FOR_DATA:
        return "waiting for its data; it keeps its place and can start once marked ready"
    if code is WaitCode.NEVER_FITS:
        extra = "" if job.priority == "core" else ", leaving the headroom kept for core work"
        return f"no host can ever fit this job ({job.gpus} GPUs of an allowed type{extra}); ask for fewer GPUs or other types"
    if code is WaitCode.QUOTA_EXHAUSTED:
        return f"quota exhausted: {detail}"
    if code is WaitCode.QUOTA_EXPIRES:
        return "its quota expires before the job would end; ask for a renewal or a shorter run"
    if code is WaitCode.HELD_FOR_HEADROOM:
        return f"{note.gpu_type if note else gpu_type} GPUs are free but held as headroom for core work"
    if code is WaitCode.WAITING_FOR_CHEAPER_TYPE:
        cheap_eta = note.eta if note else None
        return (
            f"waiting for a {note.gpu_type if note else ''}, one should be free {_within(cheap_eta, now)}, "
            f"rather than a costlier {detail}; it takes the costlier card if the wait grows too long"
        )
    if higher:
        return f"behind {_jobs(higher)} of higher priority for {gpu_type}"
    if earlier:
        return f"behind {_jobs(earlier)} ahead of it in the queue for {gpu_type}"
    return f"no {gpu_type} free {_in(eta, now)}" if eta and eta > now else f"next for {gpu_type}"


def _in(moment: float | None, now: float) -> str:
    if moment is None or moment >= NEVER:
        return "at any known time"
    return "for about " + _span(moment - now)


def _within(moment: float | None, now: float) -> str:
    if moment is None or moment >= NEVER:
        return "at no known time"
    return "in about " + _span(moment - now)


def _span(seconds: float) -> str:
    minutes = max(1, round(seconds / 60))
    return f"{minutes} min" if minutes < 90 else f"{minutes / 60:.1f} h"


def _jobs(count: int) -> str:
    return "1 job" if count == 1 else f"{count} jobs"
