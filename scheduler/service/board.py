"""The board: every GPU by host and type (free, busy with which job, idle but held, down),
and the queue in brief. Slack's `/gpu board`, the App Home and the digest all draw from it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from scheduler.service.jobs import JobView


class CardState(StrEnum):
    """What one GPU is doing, as the board shows it."""

    FREE = "free"
    BUSY = "busy"  # held by a paika job
    IDLE_HELD = "idle_held"  # held by a paika job, utilization below the policy's idle threshold
    FOREIGN = "foreign"  # memory used by processes paika did not start, no paika job on it
    DOWN = "down"  # unhealthy, or its host is down/unreachable
    DRAINING = "draining"  # free, but its host takes no new jobs


@dataclass(frozen=True)
class CardView:
    """One GPU on the board."""

    host: str
    index: int
    gpu_type: str
    memory_gib: float
    state: CardState
    utilization_pct: float | None = None
    job_id: int | None = None
    job_name: str | None = None
    owner: str | None = None
    priority: str | None = None
    since: datetime | None = None  # when the job on it started


@dataclass(frozen=True)
class HostView:
    """One host and its GPUs, in index order."""

    name: str
    state: str  # HostState value: up, degraded, down, unknown
    draining: bool
    cards: tuple[CardView, ...]


@dataclass(frozen=True)
class TypeSummary:
    """Counts of one GPU type's cards by state."""

    gpu_type: str
    total: int
    free: int
    busy: int
    idle_held: int
    down: int  # down, foreign or draining: not available to paika now


@dataclass(frozen=True)
class BoardResult:
    """The whole board at one moment."""

    at: datetime
    hosts: tuple[HostView, ...]
    types: tuple[TypeSummary, ...]  # in catalog price order, cheapest first
    running: int
    waiting_by_class: dict[str, int]  # priority class -> pending jobs (core, normal, idle)
    waiting_for_data: int
    next_up: tuple[JobView, ...]  # the first waiting jobs in queue order, with reasons and ETAs
