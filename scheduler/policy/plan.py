"""What the policy decides: jobs to start where, jobs to preempt, and why the rest wait."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from scheduler.policy.reasons import Reason


@dataclass(frozen=True, slots=True)
class Alternative:
    """A GPU type weighed for a job, and the verdict on it."""

    gpu_type: str
    price_per_gpu_hour: float
    verdict: str  # in English, as logged and stored
    # An adequate cheaper type passed over for want of free GPUs: how long the job would have
    # waited for it (seconds, by the estimates then), so a review can say what the choice
    # saved. None where it does not apply or no start for it was in sight.
    wait_s: float | None = None
    # The verdict as a code and its values, for the faces (None: logged before codes).
    verdict_why: Reason | None = None


@dataclass(frozen=True, slots=True)
class MatchDecision:
    """The type chosen for a job, the alternatives, and why (for the matches table)."""

    chosen: str
    alternatives: tuple[Alternative, ...]
    reason: str  # in English, as logged and stored
    why: Reason | None = None  # the same as a code and its values, for the faces


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
    # On a shared card: the part of it the job holds (thousandths) and the jobs already
    # there. None: it holds its GPUs whole.
    share_milli: int | None = None
    shares_with: tuple[int, ...] = ()


class PreemptCode(StrEnum):
    """Why a running job is asked to checkpoint and stop (the faces say it in words)."""

    IDLE_FOR_CORE = "idle_for_core"  # an idle-class job, for a core job
    FOR_CORE = "for_core"  # a preemptible job, for a core job
    FOR_SHORTER = "for_shorter"  # a preemptible job, for much shorter work (SRTF-like)
    FOR_STARVING = "for_starving"  # a preemptible job, for one waiting past the backstop
    SHARED_FOR_CORE = "shared_for_core"  # a job on a shared card, for a core job taking it


@dataclass(frozen=True, slots=True)
class Preempt:
    """Ask a running job to checkpoint and stop by `deadline` (its grace), for `for_job`;
    it is requeued with its progress kept."""

    job_id: int
    for_job: int
    deadline: float
    reason: str
    code: PreemptCode = PreemptCode.IDLE_FOR_CORE


class HostOut(StrEnum):
    """Why a host takes no jobs now, where a job waits for it (the faces say it in words)."""

    DOWN = "down"
    DRAINING = "draining"
    UNTRUSTED = "untrusted"  # its certificate or token was refused
    UNSEEN = "unseen"  # not polled yet: its cards are not known
    CARDS_UNUSABLE = "cards_unusable"  # up, but the cards the job needs are unhealthy or crowded
    MAINTENANCE = "maintenance"  # in a planned maintenance window; back when it ends


class WaitCode(StrEnum):
    """Why a job waits, as data; the faces say it in words (`bot/messages.yml`, `wait.*`)."""

    WAITING_FOR_DATA = "waiting_for_data"
    BEHIND_HIGHER_PRIORITY = "behind_higher_priority"
    BEHIND_EARLIER = "behind_earlier"
    NO_TYPE_FREE = "no_type_free"
    WAITING_FOR_CHEAPER_TYPE = "waiting_for_cheaper_type"
    HELD_FOR_HEADROOM = "held_for_headroom"
    QUOTA_EXHAUSTED = "quota_exhausted"
    NO_LIVE_QUOTA = "no_live_quota"
    QUOTA_EXPIRES = "quota_expires"
    NEVER_FITS = "never_fits"
    NO_HOSTS = "no_hosts"  # never fits because no host is registered yet (a new install)
    # Fits no usable host now, but would fit on registered hosts that are down, draining,
    # not trusted, not yet seen, or whose cards are unusable (`hosts`): it waits for them.
    WAITING_FOR_HOSTS = "waiting_for_hosts"
    STARTING = "starting"
    # A host refused its start for good (no such account there, …): held off that host
    # until that changes (`refused_by`, `refusal`), with no other place to go now.
    REFUSED_BY_HOST = "refused_by_host"
    # It waits for another job (after=, afterany=, data=after:) to succeed or end (`upstream`).
    WAITING_FOR_JOB = "waiting_for_job"
    # A job it waits for to succeed failed or was cancelled (`upstream`): it is held until
    # its owner releases it (/gpu release) or cancels it.
    UPSTREAM_FAILED = "upstream_failed"
    # As many jobs of its array as may run at once run now (max_running=, `array`).
    ARRAY_THROTTLED = "array_throttled"
    # The free cards of its type are booked for another team (`/gpu admin reserve`): `team`,
    # `gpu_type`, until `free_at` (the booking's end).
    BOOKED_FOR_TEAM = "booked_for_team"


@dataclass(frozen=True, slots=True)
class Wait:
    """Why one pending job waits, its place in the order, and its estimated start."""

    job_id: int
    code: WaitCode
    position: int
    eta: float | None  # POSIX seconds; None when it cannot be estimated (data, quota, never fits)
    gpu_type: str | None = None  # the type its estimate is for
    # The numbers and names the reason names, for the faces to say in any language.
    higher: int = 0  # waiting jobs of a higher class ahead of it for the same type
    earlier: int = 0  # waiting jobs of its own or a lower class ahead of it for that type
    costlier: str = ""  # the costlier type it could take instead (waiting for a cheaper one)
    free_at: float | None = None  # when the cheaper type it waits for should be free
    left_hours: float = 0.0  # quota exhausted: GPU-hours left on the team's fullest quota
    needs_hours: float = 0.0  # … against what the job needs
    gpus: int = 0  # never fits: the GPUs it asks for
    keeps_headroom: bool = False  # never fits: counting the headroom kept for core work
    as_of: float = 0.0  # the moment the policy worked this out (POSIX seconds)
    # Waiting behind others: the first of them in the queue for its type (of a higher class
    # when it waits behind higher priority), so the decision log can say behind whom.
    behind: int | None = None
    # Refused by a host: which, and why (a refusal code the faces have words for).
    refused_by: str = ""
    refusal: str = ""
    # Waiting for hosts: each host that could run it, with why it cannot now (a HostOut).
    hosts: tuple[tuple[str, str], ...] = ()
    upstream: int | None = None  # waiting for a job, or held after it failed: which job
    array: int | None = None  # held back by its array's max_running: the array's number
    team: str = ""  # cards booked for another team: that team


@dataclass(frozen=True, slots=True)
class Reserved:
    """EASY backfill: GPUs of a type kept for a blocked job from `start` (POSIX seconds);
    others may use them only until then."""

    job_id: int
    gpu_type: str
    start: float
    gpus: int


@dataclass(frozen=True)
class Plan:
    """The decisions of one pass."""

    starts: tuple[Start, ...]
    preemptions: tuple[Preempt, ...]
    waits: dict[int, Wait]
    reservations: tuple[Reserved, ...] = ()
