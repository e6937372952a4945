"""What the policy is given: a snapshot of the cluster and the queue at one moment.

Times are POSIX seconds (floats) so the policy never touches a clock or a time zone;
the shell converts at the boundary. Everything here is immutable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from scheduler.policy.colocation import Fingerprint
from scheduler.policy.matching import CardNeeds, CardType
from scheduler.policy.quota import QuotaState

HOUR = 3600.0


def wall_hours(gpu_hours: float, gpus: int, ratio: float = 1.0) -> float:
    """A run's wall time from its GPU-hours: spread over its GPUs, times how its owner's runs
    usually compare with their estimates (`ratio`, 1.0: as estimated). The one place that
    turns an estimate into time: the plan, a running job's expected end, Slurm's --time and
    the overrun check all ask here."""
    return gpu_hours / max(1, gpus) * ratio


class WithinClass(StrEnum):
    """How jobs of one priority class are ordered."""

    SHORTEST_FIRST = "shortest_first"
    SUBMIT_ORDER = "submit_order"
    # Slurm's priority/multifactor (a baseline for `paika simulate`; see `Multifactor`).
    MULTIFACTOR = "multifactor"


class Backfill(StrEnum):
    """What jobs behind a blocked one may do."""

    EASY = "easy"  # start only if they do not delay the blocked job's reservation
    GREEDY = "greedy"  # start whenever they fit (no reservation)
    NONE = "none"  # nobody passes a blocked job


class TypeChoice(StrEnum):
    """How a job's GPU type is picked among those that fit it."""

    CHEAPEST = "cheapest"  # cheapest adequate type, then least wasted memory
    FIRST_FIT = "first_fit"  # type-blind: the first free adequate GPUs in host order


@dataclass(frozen=True, slots=True)
class Multifactor:
    """Slurm's priority/multifactor plugin, as its documentation's configuration example sets
    it (priority_multifactor.html, "Configuration Example"): the weights of each factor, every
    factor between 0 and 1, the higher priority first.

    - age: the wait ÷ `max_age_s` (PriorityMaxAge=14-0), at most 1;
    - fair share (classic): 2 ** (-usage share ÷ normalized shares), every team with an equal
      share; usage decays with PriorityDecayHalfLife=14-0 (the simulator's half-life);
    - job size: the job's GPUs ÷ the cluster's, larger first (PriorityFavorSmall=NO), or
      1 − that with `favor_small`;
    - partition and QOS: one partition, QOS weight 0, as in the example. paika's priority
      classes stand for partitions with their own PriorityTier, which Slurm considers first.
    """

    weight_age: float = 1000.0
    weight_fairshare: float = 10000.0
    weight_job_size: float = 1000.0
    max_age_s: float = 14 * 24 * HOUR
    favor_small: bool = False


@dataclass(frozen=True, slots=True)
class Knobs:
    """The policy's tunables (the shell builds them from the policy file)."""

    respect_classes: bool = True
    # Core work first: every waiting core job keeps its place (a reservation), not only the
    # first blocked job EASY keeps one for. The simulator's baselines (EASY, Slurm) keep only
    # EASY's.
    core_reservations: bool = True
    # A job that fits on one host and finds as many cards of its type free as it needs, but
    # not on one host (spread over hosts, or kept for others), keeps its place too: hosts
    # then drain for it side by side, instead of one card at a time going to whatever came
    # next while only the first blocked job's host is kept. The baselines keep EASY's only.
    spread_reservations: bool = True
    within_class: WithinClass = WithinClass.SHORTEST_FIRST
    multifactor: Multifactor = Multifactor()  # with WithinClass.MULTIFACTOR
    # Aging and the backstop are scale-free (ranking.py): in units of the queue's drain time,
    # the time the cluster's GPUs need to work off the jobs ready and waiting now (a job that
    # accepts only some types: those types' GPUs and the work only they can do, when longer).
    # A job's aging doubles every `aging_drains` drain times; a job that has waited
    # `starve_after_drains` times what FIFO would make a newcomer wait (the drain with each
    # GPU counted from when it frees) is starving: ordered by submit time ahead of the rest
    # of its class, given a reservation of its own, and preemptible work yields to it.
    aging_drains: float | None = 0.25
    starve_after_drains: float | None = 6.0
    # Absolute versions: `aging_hours` is used when `aging_drains` is None; the backstop is
    # whichever of `starve_after_hours` and `starve_after_drains` comes first.
    aging_hours: float = 24.0
    starve_after_hours: float | None = None
    max_aging_factor: float | None = None  # None: aging never stops (see ranking.py)
    fair_share_weight: float = 0.5
    backfill: Backfill = Backfill.EASY
    type_choice: TypeChoice = TypeChoice.CHEAPEST
    # How long a job may wait for the cheapest adequate type before it takes a costlier
    # one: a share of its own run time (the saving grows with it), never over
    # `costlier_after_s`. None: `costlier_after_s` alone.
    costlier_after_runs: float | None = 0.25
    costlier_after_s: float = 3600.0
    headroom: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    idle_preemption: bool = True
    idle_grace_s: float = 600.0
    # Jobs that declared they checkpoint and resume (`preemptible=yes`) may be stopped, after
    # their own grace period, and requeued with their progress kept: for a core job, or for
    # much shorter work (below). Never more than `preempt_max_per_job` times per job, and never
    # within `preempt_min_run_s` of the job's last start.
    preemptible_preemption: bool = True
    preempt_max_per_job: int = 3
    preempt_min_run_s: float = 1800.0
    # SRTF-like: a ready job that cannot start may stop a preemptible job of its own or a lower
    # class whose estimated time left is at least this many times the waiting job's run time.
    # None: only core jobs preempt.
    shorter_factor: float | None = 8.0
    # Free memory a GPU must keep beyond what foreign processes use before paika places work there.
    foreign_memory_slack_gib: float = 1.0
    # Sharing a card (sharing.py): memory kept free on a shared card beyond what its jobs
    # declared, the most slowdown a share may cost the slower job, and how many jobs one card
    # takes at most.
    share_reserve_gib: float = 2.0
    share_max_slowdown: float = 0.15
    share_max_jobs: int = 2


@dataclass(frozen=True, slots=True)
class Gpu:
    """One card: its type, memory, health, and who holds it."""

    id: int
    host: str
    gpu_type: str
    memory_gib: float
    healthy: bool = True
    foreign_memory_gib: float = 0.0  # used by processes paika did not start
    # The paika job holding it; on a shared card one of its jobs (the card is held while any
    # of them runs), all of them in `tenants`.
    job_id: int | None = None
    tenants: tuple[int, ...] = ()  # the jobs sharing it (empty: held whole, or free)


@dataclass(frozen=True, slots=True)
class Host:
    """A GPU host; `schedulable` is False when it is down or draining (`out` says which:
    "down", "draining" or "untrusted"). A host with no GPUs has not been seen yet: its cards
    are not known."""

    name: str
    gpus: tuple[Gpu, ...]
    schedulable: bool = True
    out: str = ""
    # How the host keeps jobs that share a card apart ("mps", "advisory"); "": it
    # shares no card.
    sharing: str = ""
    # When its next planned maintenance starts (POSIX seconds; None: none planned): no job
    # is started there that would still run then (capacity.py, MAINTENANCE_MARGIN).
    closes_at: float | None = None


@dataclass(frozen=True, slots=True)
class Running:
    """A job holding GPUs, with the end its estimate promises."""

    id: int
    priority: str
    team: str
    gpu_ids: tuple[int, ...]
    gpu_type: str
    started_at: float
    expected_end: float
    preempting: bool = False  # already asked to stop
    # It declared that it checkpoints and resumes: paika may stop and requeue it.
    preemptible: bool = False
    preemptions: int = 0  # times it was stopped by preemption so far
    grace_s: float | None = None  # its own grace between SIGTERM and the kill; None: idle_grace_s
    # On a shared card: the memory it declared (GiB) and, when earlier runs show it, how it
    # uses the card. None: it holds its cards whole.
    share_gib: float | None = None
    fingerprint: Fingerprint | None = None
    account: str | None = None  # the Unix account it runs as (None: its host's agent's own)
    array_id: int | None = None  # one job of an array: its number


@dataclass(frozen=True, slots=True)
class Pending:
    """A job that has not started (or was preempted and waits again)."""

    id: int
    priority: str
    team: str
    owner: str
    submitted_at: float
    data_ready: bool
    gpus: int
    needs: CardNeeds
    est_gpu_hours: float
    # The owner's historic actual ÷ estimated run time; corrects the estimate.
    estimate_ratio: float = 1.0
    preemptible: bool = False  # it checkpoints and resumes (see Running)
    preemptions: int = 0  # times it was stopped by preemption so far
    # Hosts that refused its start for good, each with why (a refusal code): it is placed
    # anywhere but there, until the hold is released (scheduler/holds.py).
    holds: tuple[tuple[str, str], ...] = ()
    # It accepts a shared card (`share=yes`: one card, `needs.min_memory_gib` of its memory),
    # and how its earlier runs used a card, when known.
    share: bool = False
    fingerprint: Fingerprint | None = None
    account: str | None = None  # the Unix account it will run as (None: its host's agent's own)
    # Jobs it once slowed, or was slowed by, on a shared card (sharing.py, "Feedback"): it
    # never joins a card one of them is on.
    apart_from: frozenset[int] = frozenset()
    # Jobs it waits for (after=, afterany=, data=after:) that have not yet come to what it
    # waits for: (upstream id, UPSTREAM_WAITING or UPSTREAM_BROKEN: that job failed or was
    # cancelled, and this one is held until someone releases or cancels it).
    waits_for: tuple[tuple[int, str], ...] = ()
    # One job of an array (count=, sweep=): the array's number, and how many of its jobs may
    # run at once (None: any; Slurm's %N).
    array_id: int | None = None
    array_limit: int | None = None
    # Expected wall time on a reference card: GPU-hours ÷ GPUs, corrected by history. Worked
    # out once, and a plain field, not a property: a pass reads it many times a job, and the
    # simulator keeps a job's Pending between passes.
    run_seconds: float = field(init=False, repr=False, compare=False, default=0.0)

    def __post_init__(self) -> None:
        run = wall_hours(self.est_gpu_hours, self.gpus, self.estimate_ratio) * HOUR
        object.__setattr__(self, "run_seconds", run)

    @property
    def ready(self) -> bool:
        """Whether it may take GPUs at all: its data is ready and it waits for no other job."""
        return self.data_ready and not self.waits_for

    @property
    def shares(self) -> bool:
        """Whether the policy may place it on a shared card: a one-card job that asked, with
        its memory said, of a class that shares (a core job keeps whole cards)."""
        return (
            self.share
            and self.gpus == 1
            and self.needs.min_memory_gib is not None
            and self.priority != "core"
        )

    @property
    def avoid(self) -> frozenset[str]:
        """The hosts it is not to be placed on."""
        return frozenset(host for host, _ in self.holds)


@dataclass(frozen=True, slots=True)
class TeamWindow:
    """`gpus` cards of `gpu_type` booked for `team` from `starts` to `ends` (POSIX seconds):
    no other team's job is started on them that would still run when it opens, and inside
    it other teams leave that many free for the team (capacity.py, `reserved_against`)."""

    id: int
    gpu_type: str
    gpus: int
    team: str
    starts: float
    ends: float


# Where a job an upstream dependency names stands (Pending.waits_for).
UPSTREAM_WAITING = "waiting"
UPSTREAM_BROKEN = "broken"


@dataclass(frozen=True)
class Snapshot:
    """Everything one scheduling pass may look at."""

    now: float
    hosts: tuple[Host, ...]
    running: tuple[Running, ...]
    pending: tuple[Pending, ...]
    catalog: tuple[CardType, ...]
    knobs: Knobs = Knobs()
    # Quotas per team; a team with no entry is not limited by quota.
    quotas: Mapping[str, tuple[QuotaState, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    # Quota expiry as POSIX seconds (end of the expiry day in the install's zone), by quota id.
    quota_ends: Mapping[int, float] = field(default_factory=lambda: MappingProxyType({}))
    # Recent GPU-hours per team, decayed; drives fair share.
    team_usage: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    # Cards booked ahead for a team (`/gpu admin reserve`), not yet over.
    team_windows: tuple[TeamWindow, ...] = ()
