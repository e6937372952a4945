"""Shared cards: which card a job that accepts one may join, and what part of it it holds.

A job with `share=yes` (one card, its memory declared, normal or idle class) may be placed
beside other such jobs on one card of a host that keeps shared jobs apart (MPS, MIG or
advisory caps: `Host.sharing`). A card shared is held while any of its jobs runs; whole-card
work never lands on it, and a core job may take it back (scheduler.py stops its jobs).

May a job join a card (`may_join`), in order, the first that refuses says why:
- no job on the card was kept apart from it (see Feedback below);
- the host shares cards and is up; the card is healthy, of a type the job accepts;
- the card has room for one more job (`share_max_jobs`) and for its memory: what its jobs
  declared plus this one's plus `share_reserve_gib` within the card's memory;
- every job already there may sit beside it (colocation.pair): two jobs that both press
  memory bandwidth or PCIe hard never share, nor a pair whose expected slowdown passes
  `share_max_slowdown`. A job whose earlier runs are unknown joins only cards whose jobs are
  all known to be light on bandwidth and PCIe, by its declared memory; a card with a job
  nobody knows takes nobody else.

Which card (`best_card`): never one kept for a waiting job (a reservation) that the job
would still hold when that job is to start, as for a whole card; the busiest that fits (the most memory declared), on the host with
the fewest free cards (whole hosts stay free for multi-card work), not beside another job that
presses PCIe hard on its host when the job does too and another host serves (带宽错开), then
the cheapest type, then the card's id. A job no shared card takes starts a new one on a free
card (scheduler.py), where it holds `share_milli` of it.

Feedback (`slowdown_seen`, `slowed`, `opportunistic`): a run on a shared card whose own SM
busy % falls below (1 - `share_max_slowdown`) of its fingerprint's, the SM busy % its earlier
runs showed alone, is slowed by its neighbour. Slowed for long enough (the shell keeps the
time: scheduler/share_watch.py), the opportunistic job of the pair, the one of the lower
class or, of the same class, the one that joined the card later, is stopped and queued again,
and the two are kept apart from then on (`Pending.apart_from`).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from scheduler.policy.colocation import Fingerprint, Pressure, bandwidth, pair, pcie
from scheduler.policy.priority_classes import CLASS_RANK
from scheduler.policy.snapshot import Gpu, Host, Knobs, Pending, Running

MIB_PER_GIB = 1024.0
WHOLE_CARD = 1000  # thousandths: the part of a card a whole-card job holds


class ShareCode(StrEnum):
    """Why a job may not join a shared card (the first rule that refused)."""

    FULL = "full"  # the card has as many jobs as it takes
    MEMORY = "memory"  # its memory would not fit with the reserve
    BANDWIDTH = "bandwidth"  # both press memory bandwidth hard
    PCIE = "pcie"  # both press PCIe hard
    ACCOUNT = "account"  # MPS: another Unix account's jobs are on the card
    SLOWDOWN = "slowdown"  # the slower would lose more than the policy allows
    UNKNOWN = "unknown"  # a job with no earlier run, beside one not known to be light
    APART = "apart"  # a job there once slowed it, or was slowed by it, on a shared card


@dataclass(frozen=True, slots=True)
class Tenant:
    """A job on a shared card: its memory declared and, when known, how it uses a card."""

    job_id: int
    memory_gib: float
    fingerprint: Fingerprint | None = None
    account: str | None = None  # the Unix account it runs as


# How a host keeps shared jobs apart where one card serves one Unix account at a time: NVIDIA's
# MPS runs one server per account and a second account's jobs wait for the first's to end,
# on paika's agents ("mps") and under Slurm's MPS GRES ("slurm-mps") alike.
ONE_ACCOUNT_MODES = frozenset({"mps", "slurm-mps"})


@dataclass(slots=True)
class SharedCard:
    """A card with jobs sharing it, during one pass (a start adds its job)."""

    gpu: Gpu
    tenants: list[Tenant] = field(default_factory=list)

    @property
    def declared_gib(self) -> float:
        return sum(tenant.memory_gib for tenant in self.tenants)


@dataclass(frozen=True, slots=True)
class Joining:
    """A job placed on a shared card: the card, the part of it the job holds, the jobs
    beside it, and the slowdown expected of the slower (None: not known)."""

    gpu: Gpu
    share_milli: int
    neighbours: tuple[Tenant, ...]
    slowdown: float | None
    declared_gib: float  # what the card's jobs declared, this one included


def share_milli(memory_gib: float, card_gib: float) -> int:
    """The part of a card of `card_gib` a job declaring `memory_gib` holds, in thousandths,
    rounded up: never nothing, never more than the card."""
    if card_gib <= 0:
        return WHOLE_CARD
    # Rounded up, but not by a float's last bit: 0.6 of a 24 GiB card is 600 thousandths, not
    # 601 (14.4 / 24 * 1000 is 600.0000000000001), or two parts that fill a card exactly would
    # not fit it.
    part = memory_gib / card_gib * WHOLE_CARD
    return max(1, min(WHOLE_CARD, math.ceil(part - 1e-6)))


def light(fingerprint: Fingerprint | None) -> bool:
    """Known, and light on memory bandwidth and PCIe."""
    return (
        fingerprint is not None
        and bandwidth(fingerprint) is Pressure.LIGHT
        and pcie(fingerprint) is Pressure.LIGHT
    )


def shared_cards(hosts: Iterable[Host], running: Iterable[Running]) -> dict[int, SharedCard]:
    """The cards jobs share now, by GPU id, each with its jobs."""
    by_id = {job.id: job for job in running}
    cards: dict[int, SharedCard] = {}
    for host in hosts:
        for gpu in host.gpus:
            if not gpu.tenants:
                continue
            # A card whose jobs are being stopped (a core job takes it back) takes no one new:
            # a job put there would be stopped in turn, and the core job would wait for it,
            # pass after pass.
            if any(by_id[j].preempting for j in gpu.tenants if j in by_id):
                continue
            card = cards[gpu.id] = SharedCard(gpu)
            for job_id in gpu.tenants:
                job = by_id.get(job_id)
                memory = job.share_gib if job is not None and job.share_gib is not None else 0.0
                fingerprint = job.fingerprint if job is not None else None
                account = job.account if job is not None else None
                card.tenants.append(Tenant(job_id, memory, fingerprint, account))
    return cards


def _fingerprint_of(job: Pending) -> Fingerprint | None:
    return job.fingerprint


def may_join(
    card: SharedCard, job: Pending, knobs: Knobs, *, one_account: bool = False
) -> tuple[ShareCode | None, float]:
    """Whether `job` may join `card`: None and the worst slowdown expected beside its jobs
    (0 when none is known), or the first rule that refuses and the slowdown it saw.
    `one_account`: the card serves one Unix account at a time (ONE_ACCOUNT_MODES)."""
    if any(tenant.job_id in job.apart_from for tenant in card.tenants):
        return ShareCode.APART, 0.0
    if one_account and any(tenant.account != job.account for tenant in card.tenants):
        return ShareCode.ACCOUNT, 0.0
    if len(card.tenants) >= knobs.share_max_jobs:
        return ShareCode.FULL, 0.0
    need = job.needs.min_memory_gib or 0.0
    if card.declared_gib + need + knobs.share_reserve_gib > card.gpu.memory_gib:
        return ShareCode.MEMORY, 0.0
    # The parts the database books, each rounded up, must fit the card too.
    card_gib = card.gpu.memory_gib
    parts = sum(share_milli(t.memory_gib, card_gib) for t in card.tenants)
    if parts + share_milli(need, card_gib) > WHOLE_CARD:
        return ShareCode.MEMORY, 0.0
    mine = _fingerprint_of(job)
    worst = 0.0
    for tenant in card.tenants:
        theirs = tenant.fingerprint
        if mine is None or theirs is None:
            if not (mine is None and light(theirs)) and not (theirs is None and light(mine)):
                return ShareCode.UNKNOWN, worst
            continue
        verdict = pair(
            mine,
            theirs,
            card_mib=math.inf,  # memory was weighed above, by what the jobs declared
            reserve_mib=0.0,
            max_slowdown=knobs.share_max_slowdown,
        )
        worst = max(worst, verdict.slowdown)
        if not verdict.share:
            return _CODES.get(verdict.why, ShareCode.SLOWDOWN), verdict.slowdown
    return None, worst


_CODES = {
    "bandwidth": ShareCode.BANDWIDTH,
    "pcie": ShareCode.PCIE,
    "compute": ShareCode.SLOWDOWN,
    "memory": ShareCode.MEMORY,
}


def best_card(
    cards: Mapping[int, SharedCard],
    job: Pending,
    *,
    types: list[str],
    sharing_hosts: Mapping[str, bool],
    free_cards: Mapping[str, int],
    knobs: Knobs,
    one_account_hosts: frozenset[str] = frozenset(),
    reserved: frozenset[int] = frozenset(),
) -> tuple[Joining | None, ShareCode | None]:
    """The shared card `job` joins (see the module's order), or None and the refusal seen
    most often among the cards of its types (None when there was no such card). A card in
    `reserved` is kept for a waiting job the joiner would delay (EASY's reservation): it
    joins no such card, as a whole-card job takes no such card."""
    rank = {name: i for i, name in enumerate(types)}
    avoid = job.avoid
    mine = _fingerprint_of(job)
    hosts_pressed = _pcie_pressed_hosts(cards)
    found: list[tuple[tuple[float, ...], Joining]] = []
    refused: dict[ShareCode, int] = {}
    for card in cards.values():
        gpu = card.gpu
        if gpu.gpu_type not in rank or not sharing_hosts.get(gpu.host, False):
            continue
        if gpu.host in avoid or not gpu.healthy or gpu.id in reserved:
            continue
        one_account = gpu.host in one_account_hosts
        code, slowdown = may_join(card, job, knobs, one_account=one_account)
        if code is not None:
            refused[code] = refused.get(code, 0) + 1
            continue
        known = mine is not None and all(t.fingerprint is not None for t in card.tenants)
        crowded = mine is not None and pcie(mine) is Pressure.HEAVY and gpu.host in hosts_pressed
        need = job.needs.min_memory_gib or 0.0
        key = (
            float(crowded),
            -card.declared_gib,
            float(free_cards.get(gpu.host, 0)),
            float(rank[gpu.gpu_type]),
            float(gpu.id),
        )
        joining = Joining(
            gpu,
            share_milli(need, gpu.memory_gib),
            tuple(card.tenants),
            slowdown if known else None,
            card.declared_gib + need,
        )
        found.append((key, joining))
    if found:
        return min(found, key=lambda item: item[0])[1], None
    if not refused:
        return None, None
    return None, max(refused, key=lambda code: (refused[code], code.value))


def _pcie_pressed_hosts(cards: Mapping[int, SharedCard]) -> frozenset[str]:
    """Hosts where a job on a shared card presses PCIe hard."""
    return frozenset(
        card.gpu.host
        for card in cards.values()
        if any(
            t.fingerprint is not None and pcie(t.fingerprint) is Pressure.HEAVY
            for t in card.tenants
        )
    )


# Below this SM busy % alone a run's pace cannot be read from its SM busy %: what little it
# shows is its data loader's and the driver's, and halves or doubles with no neighbour at all.
MIN_JUDGED_UTIL = 5.0


def slowdown_seen(sm_pct: float | None, fingerprint: Fingerprint | None) -> float | None:
    """The share of its pace a run on a shared card has lost: its own SM busy % now against
    its fingerprint's SM busy % alone (0.3: it runs at 70 % of it; 0 when at or above it).
    None when that cannot be told: no sample now, no fingerprint, or one too light to read."""
    if sm_pct is None or fingerprint is None or fingerprint.gpu_util < MIN_JUDGED_UTIL:
        return None
    return max(0.0, 1.0 - sm_pct / fingerprint.gpu_util)


def slowed(sm_pct: float | None, fingerprint: Fingerprint | None, knobs: Knobs) -> bool:
    """Whether the run is slowed by its neighbour: its SM busy % below (1 -
    `share_max_slowdown`) of what its fingerprint shows alone."""
    if sm_pct is None or fingerprint is None or slowdown_seen(sm_pct, fingerprint) is None:
        return False
    return sm_pct < (1.0 - knobs.share_max_slowdown) * fingerprint.gpu_util


@dataclass(frozen=True, slots=True)
class Sharer:
    """A job on a shared card, as feedback weighs it: its class and when it joined the card
    (POSIX seconds)."""

    job_id: int
    priority: str
    joined_at: float


def opportunistic(a: Sharer, b: Sharer) -> Sharer:
    """Which of two jobs on one card is the opportunistic one, the one to stop when either
    slows the other: the lower priority class; of one class, the one that joined the card
    later (the other was there first); at the same moment, the one submitted later."""

    def key(s: Sharer) -> tuple[int, float, int]:
        return (CLASS_RANK.get(s.priority, len(CLASS_RANK)), s.joined_at, s.job_id)

    return max(a, b, key=key)


__all__ = [
    "MIN_JUDGED_UTIL",
    "WHOLE_CARD",
    "Joining",
    "ShareCode",
    "SharedCard",
    "Sharer",
    "Tenant",
    "best_card",
    "light",
    "may_join",
    "opportunistic",
    "share_milli",
    "shared_cards",
    "slowdown_seen",
    "slowed",
]
