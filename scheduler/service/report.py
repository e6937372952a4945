"""The ledger report: GPU-hours and cost by team and type over a period, and what each job produced."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class UsageRow:
    """GPU-hours and cost of one team on one GPU type in the period."""

    team: str
    gpu_type: str
    gpu_hours: float
    cost: float
    jobs: int


@dataclass(frozen=True)
class JobOutcome:
    """One job that used GPUs in the period: its cost against what it produced."""

    job_id: int
    name: str
    team: str
    owner: str
    state: str
    gpu_hours: float
    cost: float
    output: str | None
    metrics: dict[str, float]


@dataclass(frozen=True)
class ReportResult:
    """The ledger between `start` and `end` (charges are split at the period's edges)."""

    start: datetime
    end: datetime
    team: str | None  # None: all teams
    rows: tuple[UsageRow, ...]  # by team, then by GPU type
    jobs: tuple[JobOutcome, ...]  # costliest first
    total_gpu_hours: float
    total_cost: float
