"""Queue order and the reason each waiting job gives.

Order: priority class first (core > normal > idle), then submit time. A job whose data is
not ready keeps its place in the order but never counts as blocking a ready job.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

CLASS_RANK = {"core": 0, "normal": 1, "idle": 2}


@dataclass(frozen=True)
class PendingJob:
    """What the order needs to know of a job that has not started."""

    id: int
    priority: str
    submitted_at: datetime
    data_ready: bool


class WaitReason(StrEnum):
    """Why a job is not running; each has plain words in `explain`."""

    WAITING_FOR_DATA = "waiting_for_data"
    BEHIND_HIGHER_PRIORITY = "behind_higher_priority"
    BEHIND_SAME_PRIORITY = "behind_same_priority"
    NEXT_IN_LINE = "next_in_line"


@dataclass(frozen=True)
class Place:
    """A pending job's place: 1-based position in the whole queue, and why it waits."""

    job_id: int
    position: int
    reason: WaitReason
    ready_ahead: int
    higher_ahead: int

    def explain(self) -> str:
        """The reason in plain words."""
        if self.reason is WaitReason.WAITING_FOR_DATA:
            return "waiting for its data; it keeps its place and can start once marked ready"
        if self.reason is WaitReason.NEXT_IN_LINE:
            return "next in line; it starts when GPUs that fit it are free"
        if self.reason is WaitReason.BEHIND_HIGHER_PRIORITY:
            return f"behind {_jobs(self.ready_ahead)} ({self.higher_ahead} of higher priority)"
        return f"behind {_jobs(self.ready_ahead)} of the same priority submitted earlier"


def _jobs(count: int) -> str:
    return f"{count} job" if count == 1 else f"{count} jobs"


def sort_key(job: PendingJob) -> tuple[int, datetime, int]:
    """Priority class, then submit time, then id (so ties never reorder)."""
    return (CLASS_RANK.get(job.priority, len(CLASS_RANK)), job.submitted_at, job.id)


def queue_order(jobs: Iterable[PendingJob]) -> list[PendingJob]:
    """Pending jobs in the order the scheduler considers them."""
    return sorted(jobs, key=sort_key)


def places(jobs: Sequence[PendingJob]) -> dict[int, Place]:
    """Each pending job's position and reason; only ready jobs ahead count as blocking."""
    result: dict[int, Place] = {}
    ready_ahead: list[PendingJob] = []
    for position, job in enumerate(queue_order(jobs), start=1):
        higher = sum(
            1 for other in ready_ahead if CLASS_RANK[other.priority] < CLASS_RANK[job.priority]
        )
        result[job.id] = Place(
            job.id, position, _reason(job, ready_ahead, higher), len(ready_ahead), higher
        )
        if job.data_ready:
            ready_ahead.append(job)
    return result


def _reason(job: PendingJob, ready_ahead: Sequence[PendingJob], higher: int) -> WaitReason:
    if not job.data_ready:
        return WaitReason.WAITING_FOR_DATA
    if not ready_ahead:
        return WaitReason.NEXT_IN_LINE
    return WaitReason.BEHIND_HIGHER_PRIORITY if higher else WaitReason.BEHIND_SAME_PRIORITY
