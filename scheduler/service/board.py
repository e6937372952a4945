"""The board: every GPU by host and type (free, busy with which job, idle but held, down),
and the queue in brief. Slack's `/gpu board`, the App Home and the digest all draw from it."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from scheduler import checkup
from scheduler.checkup import Checkup
from scheduler.config import PolicyConfig
from scheduler.credentials import travels_in_clear
from scheduler.policy.priority_classes import PriorityClass
from scheduler.results import Said
from scheduler.service import jobs, reservations
from scheduler.service.context import Context
from scheduler.service.jobs import JobView
from storage.models import ON_HOST_STATES, Gpu, Host, HostState, Job, JobState
from storage.models.cluster import WHOLE_CARD
from storage.queries import cluster as cluster_queries
from storage.queries import config as config_queries
from storage.queries import jobs as job_queries
from storage.queries import maintenance as maintenance_queries
from storage.queries.cluster import CardTenant


class CardState(StrEnum):
    """What one GPU is doing, as the board shows it."""

    FREE = "free"
    BUSY = "busy"  # held by a paika job
    IDLE_HELD = "idle_held"  # held by a paika job, utilization below the policy's idle threshold
    # No paika job, and processes paika did not start use more memory than the policy's
    # slack allows, so paika places nothing there (less than that: still FREE).
    FOREIGN = "foreign"
    # Unhealthy, or its host is down; a degraded host (a missed poll) still takes jobs.
    DOWN = "down"
    DRAINING = "draining"  # free, but its host takes no new jobs
    # Free, but its model is no GPU type of the policy's catalogue: no job can ask for it
    # until an admin adds the type (paika doctor prints the line). Not counted as free.
    UNLISTED = "unlisted"


@dataclass(frozen=True)
class CardJob:
    """One job on a card: the card's only job, or one of a shared card's."""

    job_id: int
    job_name: str
    owner: str
    priority: str
    since: datetime | None  # when it started
    share_milli: int = WHOLE_CARD  # its part of the card, in thousandths
    # Its memory of the card's (GiB): the whole card's, or on a shared card what it declared
    # (its part of the card's memory where it declared none).
    memory_gib: float = 0.0

    @property
    def shares(self) -> bool:
        return self.share_milli < WHOLE_CARD


@dataclass(frozen=True)
class CardView:
    """One GPU on the board. `job_*`, `owner`, `priority` and `since` name its first job;
    `jobs` names every job on it (a shared card holds several)."""

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
    jobs: tuple[CardJob, ...] = ()  # by job id

    @property
    def shared(self) -> bool:
        """Held in parts (share=yes jobs), however many of them are on it now."""
        return any(job.shares for job in self.jobs)


@dataclass(frozen=True)
class HostView:
    """One host and its GPUs, in index order."""

    name: str
    state: str  # HostState value: up, degraded, down, unknown
    draining: bool
    cards: tuple[CardView, ...]
    insecure: bool = False  # reached over plain HTTP across a network
    # Its planned maintenance under way, else its next one.
    maintenance: HostWindow | None = None


@dataclass(frozen=True)
class HostWindow:
    """A host's planned maintenance as the board shows it."""

    starts: datetime
    ends: datetime
    under_way: bool  # as of the board's moment


@dataclass(frozen=True)
class TypeSummary:
    """Counts of one GPU type's cards by state: the board's, and the digest's too (kept in its
    stored JSON), so every face draws the cards from this one model."""

    gpu_type: str
    total: int
    free: int
    busy: int
    idle_held: int
    down: int  # down, foreign, draining or unlisted: not available to paika now
    # Whether the type is one of the policy's catalogue (False: cards of a model no type
    # matches, shown under the name their agent reports).
    listed: bool = True
    # Of the busy and idle-held cards, those held in parts by share=yes jobs: each is one
    # card in use, whatever number of jobs it holds. A digest stored before it reads 0.
    shared: int = 0


@dataclass(frozen=True)
class BoardResult:
    """The whole board at one moment."""

    at: datetime
    hosts: tuple[HostView, ...]
    types: tuple[TypeSummary, ...]  # in catalog price order, cheapest first
    running: int
    waiting_by_class: dict[str, int]  # priority class -> pending jobs (core, normal, idle)
    waiting_for_data: int
    # The first waiting jobs that can start (none waiting for data: see jobs.can_start_next),
    # in queue order, with reasons and ETAs.
    next_up: tuple[JobView, ...]
    config_version: int | None = None  # the policy config version in force (none stored: None)
    # For an admin: what paika doctor's checks found wrong when this service last ran them
    # (None: not an admin, or no checks in this process, as in `paika cmd`).
    checkup: Checkup | None = None
    # Cards booked for teams, ahead or under way (`/gpu admin reserve`), soonest first.
    bookings: tuple[Said, ...] = ()


# How many waiting jobs the board names; the rest are only counted.
NEXT_UP = 5


def board(ctx: Context) -> BoardResult:
    """Every host's GPUs and what each is doing, with per-type counts and the queue in brief.

    Card states follow what the policy does with the card (scheduler/snapshots.py and the
    policy's capacity): DOWN is an unhealthy card or a card on a host that is down; a
    degraded host (one failed poll) is still scheduled on, so its cards show as they are.
    A card no paika job holds is FOREIGN only when foreign memory on it is above the slack
    the policy allows, so paika will not place work there; a little foreign memory leaves
    it FREE. A held card on a down host stays DOWN and still names its job.
    """
    session = ctx.session
    return replace(
        assemble(
            ctx.now,
            ctx.policy,
            hosts=cluster_queries.all_hosts(session=session),
            gpus=cluster_queries.all_gpus(session=session),
            tenants=cluster_queries.card_tenants(session=session),
            # The queue in brief: counted by the database, and only the first few jobs loaded.
            counts=job_queries.count_by_state_and_priority(session=session),
            next_up=jobs.next_waiting(ctx, NEXT_UP),
            config_version=config_queries.newest_number(session=session),
            windows=_windows(ctx),
        ),
        checkup=checkup.last() if ctx.actor.is_admin else None,
        bookings=tuple(reservations.upcoming(ctx)),
    )


def _window(found: tuple[datetime, datetime] | None, at: datetime) -> HostWindow | None:
    return None if found is None else HostWindow(found[0], found[1], found[0] <= at)


def _windows(ctx: Context) -> dict[str, tuple[datetime, datetime]]:
    """Each host's maintenance under way, else its next one planned."""
    found: dict[str, tuple[datetime, datetime]] = {}
    for window in maintenance_queries.not_over(session=ctx.session, now=ctx.now):
        found.setdefault(window.host, (window.starts_at, window.ends_at))
    return found


def assemble(
    at: datetime,
    policy: PolicyConfig,
    *,
    hosts: Sequence[Host],
    gpus: Iterable[Gpu],
    tenants: Mapping[int, Sequence[CardTenant]],
    counts: Mapping[tuple[str, str], int],
    next_up: tuple[JobView, ...],
    config_version: int | None = None,
    windows: Mapping[str, tuple[datetime, datetime]] | None = None,
) -> BoardResult:
    """The board from hosts (by name), their GPUs, the jobs on each held GPU with their parts
    (by GPU id; a shared card has several) and the jobs counted by (state, priority): from
    the database now, or from a snapshot."""
    by_host: dict[int, list[Gpu]] = defaultdict(list)
    for gpu in gpus:
        by_host[gpu.host_id].append(gpu)
    rules = _Rules(
        policy.reclaim.idle_utilization_pct,
        policy.knobs().foreign_memory_slack_gib,
        frozenset(policy.gpu_types),
        # Hosts inside a planned maintenance take no job: their free cards show as draining.
        frozenset(name for name, (starts, _) in (windows or {}).items() if starts <= at),
    )
    views = tuple(
        HostView(
            host.name,
            host.state,
            host.draining,
            tuple(
                _card(host, gpu, tenants.get(gpu.id or 0, ()), rules)
                for gpu in sorted(by_host.get(host.id or 0, ()), key=lambda g: g.index)
            ),
            travels_in_clear(host.url),
            _window((windows or {}).get(host.name), at),
        )
        for host in hosts
    )
    waiting_by_class = {priority.value: 0 for priority in PriorityClass}
    for (state, priority), n in counts.items():
        if state in jobs.PENDING_STATES:
            waiting_by_class[priority] = waiting_by_class.get(priority, 0) + n
    return BoardResult(
        at=at,
        hosts=views,
        types=_summaries(policy, views),
        running=sum(n for (state, _), n in counts.items() if state in ON_HOST_STATES),
        waiting_by_class=waiting_by_class,
        waiting_for_data=sum(n for (s, _), n in counts.items() if s == JobState.WAITING_DATA),
        next_up=next_up,
        config_version=config_version,
    )


@dataclass(frozen=True)
class _Rules:
    idle_below_pct: float
    foreign_slack_gib: float
    listed: frozenset[str]  # the catalogue's type names
    closed: frozenset[str] = frozenset()  # hosts inside a planned maintenance window


def _card(host: Host, gpu: Gpu, tenants: Sequence[CardTenant], rules: _Rules) -> CardView:
    ordered = sorted(tenants, key=lambda tenant: tenant.job.id or 0)
    job = ordered[0].job if ordered else None
    return CardView(
        host=host.name,
        index=gpu.index,
        gpu_type=gpu.gpu_type,
        memory_gib=gpu.memory_gib,
        state=_state(host, gpu, job, rules),
        utilization_pct=gpu.utilization_pct,
        job_id=job.id if job else None,
        job_name=job.name if job else None,
        owner=job.owner if job else None,
        priority=job.priority if job else None,
        since=job.started_at if job else None,
        jobs=tuple(_on_card(gpu, tenant) for tenant in ordered),
    )


def _on_card(gpu: Gpu, tenant: CardTenant) -> CardJob:
    job, milli = tenant.job, tenant.share_milli
    if milli >= WHOLE_CARD:
        memory = gpu.memory_gib
    elif job.min_memory_gib is not None:
        memory = job.min_memory_gib
    else:  # a part with no memory said: its part of the card's
        memory = round(gpu.memory_gib * milli / WHOLE_CARD, 1)
    return CardJob(job.id or 0, job.name, job.owner, job.priority, job.started_at, milli, memory)


def _state(host: Host, gpu: Gpu, job: Job | None, rules: _Rules) -> CardState:
    if not gpu.healthy or host.state == HostState.DOWN or host.untrusted:
        return CardState.DOWN
    if job is not None:
        # No reading is not a reading of zero: only a measured low utilization is idle.
        util = gpu.utilization_pct
        return (
            CardState.IDLE_HELD
            if util is not None and util < rules.idle_below_pct
            else CardState.BUSY
        )
    if gpu.foreign_memory_gib > rules.foreign_slack_gib:
        return CardState.FOREIGN
    if host.draining or host.name in rules.closed:
        return CardState.DRAINING
    if gpu.gpu_type not in rules.listed:
        return CardState.UNLISTED
    return CardState.FREE


def _summaries(policy: PolicyConfig, hosts: tuple[HostView, ...]) -> tuple[TypeSummary, ...]:
    """Counts per type that has cards: catalog types cheapest first, then unknown ones by name."""
    counts: dict[str, Counter[CardState]] = defaultdict(Counter)
    shared: Counter[str] = Counter()
    for host in hosts:
        for card in host.cards:
            counts[card.gpu_type][card.state] += 1
            if card.shared and card.state in (CardState.BUSY, CardState.IDLE_HELD):
                shared[card.gpu_type] += 1
    priced = sorted(policy.catalog(), key=lambda card_type: card_type.price_per_gpu_hour)
    order = [card_type.name for card_type in priced if card_type.name in counts]
    order += sorted(name for name in counts if name not in order)
    return tuple(
        TypeSummary(
            gpu_type=name,
            total=sum(counts[name].values()),
            free=counts[name][CardState.FREE],
            busy=counts[name][CardState.BUSY],
            idle_held=counts[name][CardState.IDLE_HELD],
            down=sum(counts[name][s] for s in _UNAVAILABLE),
            listed=name in policy.gpu_types,
            shared=shared[name],
        )
        for name in order
    )


_UNAVAILABLE = (CardState.DOWN, CardState.FOREIGN, CardState.DRAINING, CardState.UNLISTED)
