"""The digest's shape: plain frozen dataclasses of names, numbers and UTC times.

Nothing here refers to a database row, so a digest can be stored as JSON, read back by
another process and drawn there (Block Kit, text, a picture) exactly as it was built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from scheduler.digest.codec import decode, encode
from scheduler.policy.plan import Wait, WaitCode
from scheduler.service.board import TypeSummary

# One GPU type's cards now, by what they are doing: the board's own type, so the digest and
# the board are drawn from one model. A digest stored before it said `listed` reads back as
# listed (the field's default). TypeCount is the name the digest knew it by.
TypeCount = TypeSummary

# Bumped when a field changes meaning or goes away; a stored digest of another version is
# refused rather than drawn wrongly.
DIGEST_VERSION = 1


class SegmentKind:
    """What a GPU was doing during a stretch of the timeline."""

    JOB = "job"  # held by a job that was using it
    IDLE = "idle"  # held by a job, below the policy's idle utilization
    FREE = "free"
    DOWN = "down"  # no readings: its host did not answer, or the card was unhealthy


@dataclass(frozen=True)
class WaitInfo:
    """Why a job waits and when it should start: the policy's `Wait`, with its ETA as a time."""

    code: str
    position: int
    eta: datetime | None
    gpu_type: str | None = None
    higher: int = 0
    earlier: int = 0
    costlier: str = ""
    free_at: datetime | None = None
    left_hours: float = 0.0
    needs_hours: float = 0.0
    gpus: int = 0
    keeps_headroom: bool = False
    upstream: int | None = None  # the job it waits for (after=, data=after:)

    @classmethod
    def of(cls, wait: Wait) -> WaitInfo:
        return cls(
            wait.code.value,
            wait.position,
            _moment(wait.eta),
            wait.gpu_type,
            wait.higher,
            wait.earlier,
            wait.costlier,
            _moment(wait.free_at),
            wait.left_hours,
            wait.needs_hours,
            wait.gpus,
            wait.keeps_headroom,
            wait.upstream,
        )

    def to_wait(self, job_id: int) -> Wait:
        """The policy's `Wait` again, for the faces to say in words."""
        return Wait(
            job_id,
            WaitCode(self.code),
            self.position,
            None if self.eta is None else self.eta.timestamp(),
            self.gpu_type,
            self.higher,
            self.earlier,
            self.costlier,
            None if self.free_at is None else self.free_at.timestamp(),
            self.left_hours,
            self.needs_hours,
            self.gpus,
            self.keeps_headroom,
            upstream=self.upstream,
        )


def _moment(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


@dataclass(frozen=True)
class JobLine:
    """A waiting job as the digest names it."""

    job_id: int
    name: str
    team: str
    owner: str  # Slack user id
    priority: str
    state: str
    gpus: int
    gpu_type: str | None  # the type its estimate is for, else its cheapest fit
    est_gpu_hours: float
    submitted_at: datetime
    data_location: str | None = None
    wait: WaitInfo | None = None


@dataclass(frozen=True)
class UsageLine:
    """GPU-hours and cost of one team on one GPU type."""

    team: str
    gpu_type: str
    gpu_hours: float
    cost: float
    jobs: int


@dataclass(frozen=True)
class FinishedRuns:
    """Jobs that ended during the day in one way (succeeded, failed, cancelled), with what
    they cost over all their runs: the spend that outcome took."""

    state: str
    runs: int
    gpu_hours: float
    cost: float


@dataclass(frozen=True)
class BestMetric:
    """The best value of one metric reported in a project, and the job that reported it."""

    name: str
    value: float
    job_id: int
    lower_is_better: bool  # a loss or an error rate: the smallest is the best


@dataclass(frozen=True)
class ProjectLine:
    """One project's day: its GPU-hours and cost, its runs finished, its best metrics."""

    project: str | None  # None: jobs submitted without project=
    gpu_hours: float
    cost: float
    finished: int
    best: tuple[BestMetric, ...]  # by metric name


@dataclass(frozen=True)
class DayUsage:
    """The ledger of one calendar day in the policy's time zone."""

    day: date
    start: datetime
    end: datetime
    rows: tuple[UsageLine, ...]  # by team, then GPU type
    total_gpu_hours: float
    total_cost: float
    job_count: int
    # Spend linked to outputs (issue 15). Defaults keep digests stored before them readable.
    finished: tuple[FinishedRuns, ...] = ()  # succeeded, failed, cancelled: those that ended
    projects: tuple[ProjectLine, ...] = ()  # most GPU-hours first


@dataclass(frozen=True)
class IdleJob:
    """GPU-hours one job held a GPU type while it read idle."""

    job_id: int
    name: str
    team: str
    owner: str
    gpu_type: str
    gpu_hours: float


@dataclass(frozen=True)
class IdleUsage:
    """GPU-hours held by jobs below the idle threshold during one day, from the samples."""

    start: datetime
    end: datetime
    threshold_pct: float
    gpu_hours: float
    by_type: dict[str, float]
    jobs: tuple[IdleJob, ...]  # most idle first, the first few
    job_count: int


@dataclass(frozen=True)
class QuotaWarning:
    """A quota that expires soon or is mostly used, with what is left of it."""

    quota_id: int
    team: str
    gpu_type: str | None  # None: any type
    total_hours: float
    used_hours: float
    left_hours: float
    expires_on: date
    days_left: int  # in the policy's time zone
    owner: str  # Slack user id
    expiring: bool  # within the furthest expiry alert (alerts.quota_days_before)
    used_pct: float
    used_threshold: float | None  # the highest alerts.quota_used_pct it has passed


@dataclass(frozen=True)
class Segment:
    """One stretch of one GPU's timeline."""

    start: datetime
    end: datetime
    kind: str  # a SegmentKind value
    job_id: int | None = None
    job_name: str | None = None
    # The other jobs on the card during the stretch, by when they took it: a shared card
    # holds several (empty: the card's one job, or none).
    also: tuple[int, ...] = ()


@dataclass(frozen=True)
class GpuRow:
    """One GPU's last day, and the job on it now with the end its estimate promises."""

    host: str
    index: int
    gpu_type: str
    state: str  # the board's CardState value now
    segments: tuple[Segment, ...]
    job_id: int | None = None
    expected_end: datetime | None = None  # on a shared card, when its last job should end
    also: tuple[int, ...] = ()  # the other jobs on it now: a shared card holds several


@dataclass(frozen=True)
class MaintenanceAhead:
    """A host's planned maintenance not over yet (`/gpu admin maintenance add`)."""

    host: str
    starts: datetime
    ends: datetime
    reason: str


@dataclass(frozen=True)
class BookingAhead:
    """Cards booked for a team, not over yet (`/gpu admin reserve add`)."""

    team: str
    gpu_type: str
    gpus: int
    starts: datetime
    ends: datetime
    reason: str


@dataclass(frozen=True)
class Planned:
    """A waiting job's expected run: from its ETA for its estimated run time."""

    job_id: int
    name: str
    priority: str
    gpu_type: str
    gpus: int
    start: datetime
    end: datetime
    rows: tuple[int, ...]  # indexes into Timeline.rows where it is drawn (may be fewer than gpus)


@dataclass(frozen=True)
class Timeline:
    """The picture's data: every shown GPU from `start` to `now`, and planned runs until `end`."""

    start: datetime
    now: datetime
    end: datetime
    rows: tuple[GpuRow, ...]  # by host, then index
    more_gpus: int  # GPUs beyond the rows shown
    planned: tuple[Planned, ...]


@dataclass(frozen=True)
class TypeUtilization:
    """Mean utilization of one GPU type per hour of the last day, oldest hour first."""

    gpu_type: str
    hourly: tuple[float | None, ...]  # None: no readings that hour


@dataclass(frozen=True)
class Digest:
    """The daily readiness board: the cluster now, the queue, yesterday, quotas, the timeline."""

    day: date  # the day it is for, in the policy's time zone
    at: datetime
    timezone: str
    hosts: int
    types: tuple[TypeSummary, ...]  # cheapest first, as the board has them
    running: int
    waiting_by_class: dict[str, int]  # core, normal, idle → pending jobs
    waiting_for_data: int
    ready: tuple[JobLine, ...]  # data ready and waiting, in queue order (the first few)
    ready_total: int
    waiting_data: tuple[JobLine, ...]  # longest waiting first (the first few)
    next_up: tuple[JobLine, ...]  # the first waiting jobs that can start, in queue order
    yesterday: DayUsage
    idle: IdleUsage
    quota_warnings: tuple[QuotaWarning, ...]
    timeline: Timeline
    utilization: tuple[TypeUtilization, ...]
    config_version: int | None = None  # the policy config version it was made under
    # The calendar ahead, soonest first: each host's planned maintenance, the cards booked.
    maintenance: tuple[MaintenanceAhead, ...] = ()
    bookings: tuple[BookingAhead, ...] = ()

    @property
    def total_gpus(self) -> int:
        return sum(count.total for count in self.types)

    @property
    def free_gpus(self) -> int:
        return sum(count.free for count in self.types)

    @property
    def shared_gpus(self) -> int:
        """Cards in use held in parts by share=yes jobs (each counted once, as in use)."""
        return sum(count.shared for count in self.types)

    @property
    def waiting(self) -> int:
        return sum(self.waiting_by_class.values())

    def to_json(self) -> dict[str, Any]:
        """JSON-able data that `from_json` turns back into an equal digest."""
        return {"version": DIGEST_VERSION, **encode(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Digest:
        """A digest from `to_json`'s data; keys it does not know (an alert's subject) are ignored."""
        version = data.get("version")
        if version != DIGEST_VERSION:
            raise ValueError(
                f"digest data of version {version!r}; this paika reads {DIGEST_VERSION}"
            )
        return decode(cls, dict(data))
