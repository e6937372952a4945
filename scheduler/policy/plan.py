"""What the policy decides: jobs to start where, jobs to preempt, and why the rest wait."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class Alternative:
    """A GPU type weighed for a job, and the verdict on it."""

    gpu_type: str
    price_per_gpu_hour: float
    verdict: str


@dataclass(frozen=True, slots=True)
class MatchDecision:
    """The type chosen for a job, the alternatives, and why (for the matches table)."""

    chosen: str
    alternatives: tuple[Alternative, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class Start:
    """Start a job now on these GPUs."""

    job_id: int
    gpu_ids: tuple[int, ...]
    hosts: tuple[str, ...]
    gpu_type: str
    match: MatchDecision
    expected_end: float
    quota_id: int | None = None


@dataclass(frozen=True, slots=True)
class Preempt:
    """Ask an idle-class job to checkpoint and stop, by `deadline`, for a blocked core job."""

    job_id: int
    for_job: int
    deadline: float
    reason: str


class WaitCode(StrEnum):
    """Why a job waits, as data; `Wait.words` says it in plain words."""

    WAITING_FOR_DATA = "waiting_for_data"
    BEHIND_HIGHER_PRIORITY = "behind_higher_priority"
    BEHIND_EARLIER = "behind_earlier"
    NO_TYPE_FREE = "no_type_free"
    WAITING_FOR_CHEAPER_TYPE = "waiting_for_cheaper_type"
    HELD_FOR_HEADROOM = "held_for_headroom"
    QUOTA_EXHAUSTED = "quota_exhausted"
    QUOTA_EXPIRES = "quota_expires"
    NEVER_FITS = "never_fits"
    STARTING = "starting"


@dataclass(frozen=True, slots=True)
class Wait:
    """Why one pending job waits, its place in the order, and its estimated start."""

    job_id: int
    code: WaitCode
    words: str
    position: int
    eta: float | None  # POSIX seconds; None when it cannot be estimated (data, quota, never fits)
    gpu_type: str | None = None  # the type its estimate is for
    # The numbers and names behind `words`, so a client can say them in another language.
    higher: int = 0  # waiting jobs of a higher class ahead of it for the same type
    earlier: int = 0  # waiting jobs of its own or a lower class ahead of it for that type
    detail: str = ""  # e.g. which quota ran out, or the costlier type it could take instead


@dataclass(frozen=True)
class Plan:
    """The decisions of one pass."""

    starts: tuple[Start, ...]
    preemptions: tuple[Preempt, ...]
    waits: dict[int, Wait]
