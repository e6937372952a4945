"""Free GPUs by type and host during one pass, placement, and when GPUs will be free.

The pass takes GPUs from here as it admits jobs ("assume" in memory); nothing is written
anywhere until the shell persists the plan.

Built incrementally: what a host contributes (its usable GPUs by type, the free ones, who
holds the rest) is worked out once per `Host` object and reused while the caller passes the
same object again — a host is immutable, so the same object means the same GPUs and holders.
A replay rebuilds only the hosts whose GPUs changed hands; a pass over a cluster of thousands
of GPUs no longer visits every GPU. When GPUs free up is looked up per GPU as asked.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import repeat
from typing import cast

from scheduler.policy.snapshot import Gpu, Host, Knobs, Snapshot, TeamWindow

NEVER = math.inf
_FREE = -1  # holder of a free GPU in a host's layout


@dataclass(frozen=True, slots=True)
class _HostLayout:
    """What one host contributes to a pass, for one foreign-memory slack."""

    # (type, usable GPU ids, the free ones among them), types in first-seen order
    pools: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...]
    holders: dict[int, int]  # every GPU id → the job holding it, or _FREE
    unusable: frozenset[int]  # down, unhealthy, or crowded by foreign processes
    gpus: dict[int, Gpu]
    # Shared cards with more than one job: GPU id → its jobs (the card frees when the last ends)
    shared: dict[int, tuple[int, ...]] = field(default_factory=dict)
    tenanted: bool = False  # a card of it has a job that shares it (one or more)


# id(host) → (the host, the slack it was laid out for, its layout). The host itself is kept, so
# its id cannot be reused for another object while the entry lives. Cleared when it outgrows
# what recent passes used (a caller that builds new hosts every pass never hits it).
_LAYOUTS: dict[int, tuple[Host, float, _HostLayout]] = {}
_LAYOUTS_MAX = 20_000


def _layout(host: Host, slack: float) -> _HostLayout:
    cached = _LAYOUTS.get(id(host))
    if cached is not None and cached[0] is host and cached[1] == slack:
        return cached[2]
    pools: dict[str, tuple[list[int], list[int]]] = {}
    holders: dict[int, int] = {}
    unusable: set[int] = set()
    shared: dict[int, tuple[int, ...]] = {}
    tenanted = False
    for gpu in host.gpus:
        holders[gpu.id] = _FREE if gpu.job_id is None else gpu.job_id
        if gpu.tenants:
            tenanted = True
            if len(gpu.tenants) > 1:
                shared[gpu.id] = gpu.tenants
        if not (host.schedulable and gpu.healthy and gpu.foreign_memory_gib <= slack):
            unusable.add(gpu.id)
            continue
        usable, free = pools.setdefault(gpu.gpu_type, ([], []))
        usable.append(gpu.id)
        if gpu.job_id is None:
            free.append(gpu.id)
    layout = _HostLayout(
        tuple((name, tuple(usable), tuple(free)) for name, (usable, free) in pools.items()),
        holders,
        frozenset(unusable),
        {gpu.id: gpu for gpu in host.gpus},
        shared,
        tenanted,
    )
    if len(_LAYOUTS) >= _LAYOUTS_MAX:
        _LAYOUTS.clear()
    _LAYOUTS[id(host)] = (host, slack, layout)
    return layout


@dataclass(frozen=True, slots=True)
class _ClusterLayout:
    """What every host contributes to a pass, together: read, never changed, by the passes
    that use it (each pool copies the one dict it changes)."""

    hosts: tuple[Host, ...]
    slack: float
    layouts: tuple[_HostLayout, ...]
    gpus: dict[int, Gpu]
    holders: dict[int, int]
    unusable: frozenset[int]
    shared: dict[int, tuple[int, ...]]
    # type → host → its usable GPU ids, and the free ones among them (types and hosts in
    # first-seen order)
    members: dict[str, dict[str, list[int]]]
    free: dict[str, dict[str, list[int]]]
    # Some card has a job that shares it (from the hosts' layouts).
    tenanted: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenanted", any(layout.tenanted for layout in self.layouts))

    @staticmethod
    def build(hosts: tuple[Host, ...], slack: float) -> _ClusterLayout:
        layouts = tuple(_layout(host, slack) for host in hosts)
        gpus: dict[int, Gpu] = {}
        holders: dict[int, int] = {}
        unusable: set[int] = set()
        shared: dict[int, tuple[int, ...]] = {}
        members: dict[str, dict[str, list[int]]] = {}
        free: dict[str, dict[str, list[int]]] = {}
        for host, layout in zip(hosts, layouts, strict=True):
            gpus.update(layout.gpus)
            holders.update(layout.holders)
            unusable.update(layout.unusable)
            shared.update(layout.shared)
            for gpu_type, usable, idle in layout.pools:
                members.setdefault(gpu_type, {})[host.name] = list(usable)
                free.setdefault(gpu_type, {})[host.name] = list(idle)
        return _ClusterLayout(
            hosts, slack, layouts, gpus, holders, frozenset(unusable), shared, members, free
        )

    def patched(self, hosts: tuple[Host, ...]) -> _ClusterLayout | None:
        """This layout with the hosts that are new objects laid out again; None when one
        changed name or types (the pools' order would change: built afresh instead)."""
        changed = [
            i for i, (was, now) in enumerate(zip(self.hosts, hosts, strict=True)) if was is not now
        ]
        if len(changed) * 4 > len(hosts):
            return None  # most hosts changed: as cheap to build afresh
        layouts = list(self.layouts)
        gpus, holders, shared = dict(self.gpus), dict(self.holders), dict(self.shared)
        unusable = set(self.unusable)
        members = {gpu_type: dict(by_host) for gpu_type, by_host in self.members.items()}
        free = {gpu_type: dict(by_host) for gpu_type, by_host in self.free.items()}
        for i in changed:
            host, was = hosts[i], layouts[i]
            layout = layouts[i] = _layout(host, self.slack)
            if host.name != self.hosts[i].name or [p[0] for p in was.pools] != [
                p[0] for p in layout.pools
            ]:
                return None
            for gpu in was.gpus:
                del gpus[gpu], holders[gpu]
                shared.pop(gpu, None)
            unusable.difference_update(was.unusable)
            gpus.update(layout.gpus)
            holders.update(layout.holders)
            unusable.update(layout.unusable)
            shared.update(layout.shared)
            for gpu_type, usable, idle in layout.pools:
                members[gpu_type][host.name] = list(usable)
                free[gpu_type][host.name] = list(idle)
        return _ClusterLayout(
            hosts,
            self.slack,
            tuple(layouts),
            gpus,
            holders,
            frozenset(unusable),
            shared,
            members,
            free,
        )


# The cluster the last pass laid out. A replay's next pass shares most of its hosts (only
# those whose cards changed are new objects), so it lays out only those.
_LAST_CLUSTER: list[_ClusterLayout] = []


def _cluster_layout(hosts: tuple[Host, ...], slack: float) -> _ClusterLayout:
    found = None
    if _LAST_CLUSTER:
        last = _LAST_CLUSTER[0]
        if last.hosts is hosts and last.slack == slack:
            return last
        if len(last.hosts) == len(hosts) and last.slack == slack:
            found = last.patched(hosts)
    if found is None:
        found = _ClusterLayout.build(hosts, slack)
    _LAST_CLUSTER[:] = [found]
    return found


class _Availability:
    """When each GPU is expected to be free: now for a free one, its holder's expected end
    for a held one, never for an unusable free one; `assume` overrides. Read per GPU."""

    __slots__ = ("_ends", "_flat", "_holders", "_now", "_set", "_shared", "_unusable")

    def __init__(self, now: float, ends: dict[int, float]) -> None:
        self._now = now
        self._ends = ends
        self._holders: dict[int, int] = {}
        self._unusable: frozenset[int] = frozenset()
        self._set: dict[int, float] = {}
        self._shared: dict[int, tuple[int, ...]] = {}
        self._flat: dict[int, float] | None = None

    def use(self, cluster: _ClusterLayout) -> None:
        """Read the cluster's holders, unusable and shared cards (never changed here)."""
        self._flat = None
        self._holders = cluster.holders
        self._unusable = cluster.unusable
        self._shared = cluster.shared

    def __getitem__(self, gpu: int) -> float:
        if gpu not in self._set and gpu not in self._holders:
            raise KeyError(gpu)
        return self.get(gpu, NEVER)

    def get(self, gpu: int, default: float) -> float:
        if self._set:
            at = self._set.get(gpu)
            if at is not None:
                return at
        job = self._holders.get(gpu)
        if job is None:
            return default
        if job < 0:  # _FREE
            return NEVER if gpu in self._unusable else self._now
        if self._shared:
            jobs = self._shared.get(gpu)
            if jobs is not None:  # a shared card frees when its last job ends
                return max(self._ends.get(j, self._now) for j in jobs)
        return self._ends.get(job, NEVER if gpu in self._unusable else self._now)

    def __setitem__(self, gpu: int, at: float) -> None:
        self._set[gpu] = at
        if self._flat is not None:
            self._flat[gpu] = at

    def flat(self) -> dict[int, float]:
        """Every known GPU's time, worked out once a pass: what sorting every host's GPUs by
        when they free up reads, many times a pass."""
        if self._flat is None:
            # get() for every GPU at once: a held card's time is its job's end, read in C;
            # free cards, unusable ones, jobs with no end and shared cards are set after.
            now, ends, unusable, shared = self._now, self._ends, self._unusable, self._shared
            holders = self._holders
            read: dict[int, float | None] = dict(
                zip(holders, map(ends.get, holders.values()), strict=True)
            )
            if _FREE in ends:  # (no job has that id; if one did, _FREE's cards would read it)
                read.update((gpu, None) for gpu, job in holders.items() if job == _FREE)
            for gpu in [gpu for gpu, at in read.items() if at is None]:
                read[gpu] = NEVER if gpu in unusable else now
            flat = cast(dict[int, float], read)
            for gpu, jobs in shared.items():  # a shared card frees when its last job ends
                if holders.get(gpu, _FREE) != _FREE:
                    flat[gpu] = max(ends.get(j, now) for j in jobs)
            flat.update(self._set)
            self._flat = flat
        return self._flat


@dataclass(frozen=True, slots=True)
class Placement:
    """GPUs chosen for a job: ids, the hosts they are on, their type."""

    gpu_type: str
    gpu_ids: tuple[int, ...]
    hosts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Reservation:
    """EASY: the GPUs a blocked job will take at `start`; others may use them only until then."""

    job_id: int
    gpu_type: str
    start: float
    gpu_ids: frozenset[int]


@dataclass
class Pool:
    """The GPUs of one type: which are free on which host, and the type's headroom."""

    gpu_type: str
    free: dict[str, list[int]] = field(default_factory=dict)
    members: dict[str, list[int]] = field(default_factory=dict)  # usable GPUs per host
    headroom: int = 0
    core_in_use: int = 0  # core work on this type counts against the headroom
    # EASY: the first blocked job's; the backstop adds one per starving job (ranking.py).
    reservations: list[Reservation] = field(default_factory=list)
    _max_free: int | None = None
    _free_count: int | None = None

    @property
    def free_count(self) -> int:
        """Free GPUs of the type (cached until the pool changes: asked for every job)."""
        if self._free_count is None:
            self._free_count = sum(len(ids) for ids in self.free.values())
        return self._free_count

    @property
    def reservation(self) -> Reservation | None:
        """The pool's first reservation (EASY's), if any."""
        return self.reservations[0] if self.reservations else None

    @property
    def spare_headroom(self) -> int:
        """Free GPUs that must stay free for core work not yet running."""
        return max(0, self.headroom - self.core_in_use)

    max_host_size: int = 0  # the most usable GPUs of this type on one host
    size: int = 0  # usable GPUs of this type in all

    def max_free(self) -> int:
        """The most free GPUs on any one host (cached until the pool changes)."""
        if self._max_free is None:
            self._max_free = max((len(ids) for ids in self.free.values()), default=0)
        return self._max_free

    def take(self, ids: Iterable[int], hosts: Iterable[str]) -> None:
        chosen = set(ids)
        for host in set(hosts):
            self.free[host] = [gpu for gpu in self.free[host] if gpu not in chosen]
        self._max_free = self._free_count = None


class Capacity:
    """Every pool, and when each GPU is expected to be free."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.now = snapshot.now
        self.knobs: Knobs = snapshot.knobs
        self.pools: dict[str, Pool] = {}
        self.available_at = _Availability(self.now, _expected_ends(snapshot))
        self.host_order: list[str] = []
        self.gpus: dict[int, Gpu] = {}
        # (type, GPUs) → earliest start: asked for many waiting jobs of the same shape; cleared
        # whenever a placement changes when GPUs free up.
        self._soonest: dict[
            tuple[str, int, bool, frozenset[str]], tuple[float, frozenset[int]]
        ] = {}
        self._reserved_until: dict[int, float] = {}  # GPUs kept for reserved jobs, until
        # When each GPU is free past those reservations (built when first asked).
        self._past_reservations: dict[int, float] | None = None
        # (type, host, past reservations) → those GPUs by when they are free, soonest first:
        # what earliest_start reads for every host; dropped when one of them changes.
        self._host_times: dict[tuple[str, str, bool], list[tuple[float, int]]] = {}
        # The same times alone, without the GPUs (what most hosts are asked): built and
        # dropped with them.
        self._host_soonest: dict[tuple[str, str, bool], list[float]] = {}
        # (type, GPUs, past reservations) → per host of the pool, in its order, when that many
        # of its GPUs are free (None: to be read again): the soonest host is then found in C,
        # and a placement or reservation rereads its own host only.
        self._kth: dict[tuple[str, int, bool], list[float | None]] = {}
        self._pool_hosts: dict[str, tuple[list[str], dict[str, int]]] = {}
        # Hosts with a planned maintenance ahead: when it starts.
        self.closes_at = {h.name: h.closes_at for h in snapshot.hosts if h.closes_at is not None}
        self.booked_for: TeamWindow | None = None  # what held the last placement back
        # Cards booked for teams, and the cards each team holds per type now.
        self.team_windows = tuple(w for w in snapshot.team_windows if w.ends > self.now)
        self._team_held: Counter[tuple[str, str]] = Counter()
        if self.team_windows:
            for run in snapshot.running:
                if not run.preempting:
                    self._team_held[(run.gpu_type, run.team)] += len(run.gpu_ids)
        cluster = _cluster_layout(snapshot.hosts, self.knobs.foreign_memory_slack_gib)
        self.host_order = [host.name for host in snapshot.hosts]
        self.gpus = cluster.gpus
        self.tenanted = cluster.tenanted  # some card has a job that shares it
        self.available_at.use(cluster)
        for gpu_type, members in cluster.members.items():
            # A pool replaces its free lists when it takes GPUs, never changes one in place.
            pool = self.pools[gpu_type] = Pool(gpu_type, free=dict(cluster.free[gpu_type]))
            pool.members = members
        for pool in self.pools.values():
            pool.max_host_size = max((len(ids) for ids in pool.members.values()), default=0)
            pool.size = sum(len(ids) for ids in pool.members.values())
            pool.headroom = _headroom(snapshot.knobs, pool)
        for job in snapshot.running:
            if job.priority == "core" and job.gpu_type in self.pools:
                self.pools[job.gpu_type].core_in_use += len(job.gpu_ids)

    @property
    def total_gpus(self) -> int:
        """Usable GPUs of every type."""
        return sum(pool.size for pool in self.pools.values())

    @property
    def any_free(self) -> bool:
        return any(pool.max_free() > 0 for pool in self.pools.values())

    def could_ever_fit(self, gpu_type: str, gpus: int, *, core: bool = True) -> bool:
        """Whether the pool is big enough for the job at all (on one host, or whole hosts);
        non-core work must also leave the type's headroom free."""
        pool = self.pools.get(gpu_type)
        if pool is None:
            return False
        if not core and gpus > pool.size - pool.headroom:
            return False
        return gpus <= pool.max_host_size or gpus <= pool.size

    def place_now(
        self,
        gpu_type: str,
        gpus: int,
        *,
        core: bool,
        run_seconds: float,
        avoid: frozenset[str] = frozenset(),
        team: str | None = None,
    ) -> Placement | None:
        """Free GPUs for a job of `gpus` GPUs now, or None; honours headroom, reservations and
        the cards booked for other teams than `team` (`booked_for` says which booking held it
        back), and never places it on the hosts it must `avoid` (they refused it)."""
        self.booked_for = None
        pool = self.pools.get(gpu_type)
        if pool is None or pool.free_count < gpus:
            return None
        if not core and pool.free_count - gpus < pool.spare_headroom:
            return None
        if team is not None and self.team_windows:
            self.booked_for = self.reserved_against(gpu_type, gpus, run_seconds, team)
            if self.booked_for is not None:
                return None
        blocked = self._reserved_for_others(pool, run_seconds)
        closing = self.closing_before(run_seconds)
        if closing:
            avoid = avoid | closing
        if avoid:
            refused = (pool.free.get(host, ()) for host in avoid)
            blocked = blocked.union(gpu for ids in refused for gpu in ids)
        if gpus <= pool.max_host_size:
            return self._on_one_host(pool, gpus, blocked)
        return self._across_hosts(pool, gpus, blocked)

    def reserved_against(
        self, gpu_type: str, gpus: int, run_seconds: float, team: str
    ) -> TeamWindow | None:
        """The booking for another team that a job of `team` taking `gpus` cards of the type
        now for `run_seconds` would break, or None. Before a window, a job that would still
        run at its start (with MAINTENANCE_MARGIN) must leave as many of the type's cards free
        by then as it books; inside it, as many free as the team does not hold yet."""
        pool = self.pools.get(gpu_type)
        if pool is None:
            return None
        end = self.now + run_seconds * MAINTENANCE_MARGIN
        for window in self.team_windows:
            if window.gpu_type != gpu_type or window.team == team or end <= window.starts:
                continue
            if window.starts <= self.now:
                owed = max(0, window.gpus - self._team_held[(gpu_type, window.team)])
                if pool.free_count - gpus < owed:
                    return window
                continue
            # The cards free by then: free now, or held by work that ends before it by its
            # estimate with the same margin.
            at, now, margin = self.available_at, self.now, MAINTENANCE_MARGIN
            free_then = sum(
                1
                for ids in pool.members.values()
                for gpu in ids
                if now + (at.get(gpu, now) - now) * margin <= window.starts
            )
            if free_then - gpus < window.gpus:
                return window
        return None

    def closing_before(self, run_seconds: float) -> frozenset[str]:
        """The hosts whose planned maintenance starts before a job of `run_seconds` started
        now would end, with MAINTENANCE_MARGIN on its estimate: it is not started there."""
        if not self.closes_at:
            return frozenset()
        end = self.now + run_seconds * MAINTENANCE_MARGIN
        return frozenset(host for host, at in self.closes_at.items() if at < end)

    def held_by_headroom(self, gpu_type: str, gpus: int) -> bool:
        """Whether free GPUs of the type exist for this job but are kept for core work."""
        pool = self.pools.get(gpu_type)
        return (
            pool is not None
            and pool.free_count >= gpus
            and pool.free_count - gpus < pool.spare_headroom
        )

    def reserved_cards(self, gpu_types: Iterable[str], run_seconds: float) -> frozenset[int]:
        """The GPUs of these types kept for a reserved job that a job of `run_seconds` starting
        now would still hold at its start: a job may not join a shared card among them."""
        held = [
            self._reserved_for_others(pool, run_seconds)
            for gpu_type in gpu_types
            if (pool := self.pools.get(gpu_type)) is not None
        ]
        return frozenset().union(*held)

    def _reserved_for_others(self, pool: Pool, run_seconds: float) -> frozenset[int]:
        end = self.now + run_seconds
        held = [r.gpu_ids for r in pool.reservations if end > r.start]
        if not held:
            return frozenset()
        return held[0] if len(held) == 1 else frozenset().union(*held)

    def _on_one_host(self, pool: Pool, gpus: int, blocked: frozenset[int]) -> Placement | None:
        if pool.max_free() < gpus:
            return None
        best: tuple[bool, int, int, str] | None = None
        closing = self.closes_at
        for order, host in enumerate(self.host_order):
            free = pool.free.get(host)
            if not free or len(free) < gpus:
                continue
            usable = len(free) if not blocked else sum(1 for gpu in free if gpu not in blocked)
            if usable < gpus:
                continue
            # A host whose maintenance is planned first (the caller blocked it if the job
            # would run into the window): work that ends before the window keeps it busy,
            # and the hosts that stay open keep their cards for longer work. Then best fit:
            # the host left with the fewest free GPUs keeps big holes for big jobs.
            stays_open = bool(closing) and host not in closing
            candidate = (stays_open, usable - gpus, order, host)
            if best is None or candidate < best:
                best = candidate
                if self.knobs.type_choice == "first_fit" or (usable == gpus and not stays_open):
                    break
        if best is None:
            return None
        host = best[3]
        ids = tuple(gpu for gpu in pool.free[host] if gpu not in blocked)[:gpus]
        return Placement(pool.gpu_type, ids, (host,))

    def _across_hosts(self, pool: Pool, gpus: int, blocked: frozenset[int]) -> Placement | None:
        # Too big for any one host: whole hosts first, so the job spans as few as possible.
        by_free = sorted(
            ((host, [gpu for gpu in ids if gpu not in blocked]) for host, ids in pool.free.items()),
            key=lambda item: -len(item[1]),
        )
        chosen: list[int] = []
        hosts: list[str] = []
        for host, ids in by_free:
            if len(chosen) >= gpus or not ids:
                break
            take = ids[: gpus - len(chosen)]
            chosen.extend(take)
            hosts.append(host)
        if len(chosen) < gpus:
            return None
        return Placement(pool.gpu_type, tuple(chosen), tuple(hosts))

    def assume(self, placement: Placement, until: float, *, core: bool) -> None:
        """Take the GPUs of a placement until `until` (the job's expected end)."""
        pool = self.pools[placement.gpu_type]
        pool.take(placement.gpu_ids, placement.hosts)
        if core:
            pool.core_in_use += len(placement.gpu_ids)
        for gpu in placement.gpu_ids:
            self.available_at[gpu] = until
        self._past_reservations = None
        for host in placement.hosts:
            self._drop_times(placement.gpu_type, host, (False, True))
        self._soonest.clear()

    def reserve(self, reservation: Reservation, until: float) -> None:
        """Keep GPUs for a blocked job from its start until `until` (its expected end): others
        may use them only before, and later reservations look past it."""
        self.pools[reservation.gpu_type].reservations.append(reservation)
        past = self._past_reservations  # kept up to date, not built again
        plain = self.available_at.flat() if past is not None else {}
        for gpu in reservation.gpu_ids:
            kept = self._reserved_until[gpu] = max(self._reserved_until.get(gpu, until), until)
            if past is not None:
                past[gpu] = max(plain.get(gpu, NEVER), kept)
            self._drop_times(reservation.gpu_type, self.gpus[gpu].host, (True,))
        self._soonest = {key: value for key, value in self._soonest.items() if not key[2]}

    def _drop_times(self, gpu_type: str, host: str, pasts: tuple[bool, ...]) -> None:
        """Forget what was read of when the host's GPUs of the type are free."""
        for past in pasts:
            self._host_times.pop((gpu_type, host, past), None)
            self._host_soonest.pop((gpu_type, host, past), None)
        if self._kth:
            index = self._hosts_of(gpu_type)[1][host]
            for (kind, _, past), kth in self._kth.items():
                if kind == gpu_type and past in pasts:
                    kth[index] = None

    def claim_free(self, gpu_type: str, host: str) -> None:
        """Every free GPU of the type on the host is spoken for (by a job others make room for)."""
        pool = self.pools[gpu_type]
        pool.take(list(pool.free.get(host, [])), [host])

    def earliest_start(
        self,
        gpu_type: str,
        gpus: int,
        *,
        past_reservations: bool = False,
        run_seconds: float | None = None,
    ) -> tuple[float, frozenset[int]]:
        """When a job could start on this type at the soonest, and on which GPUs (with
        `past_reservations`, GPUs reserved for others count as busy until those jobs end).
        With the job's `run_seconds`, a host whose planned maintenance starts before the job
        would end there (with MAINTENANCE_MARGIN) is not counted: otherwise a long job's
        reservation lands on the host that drains first, and keeps the short work that could
        run there before the window off it."""
        past = past_reservations and bool(self._reserved_until)
        closing = frozenset[str]()
        if run_seconds is not None and self.closes_at:
            closing = self._closing_for(gpu_type, gpus, past, run_seconds)
        key = (gpu_type, gpus, past, closing)
        found = self._soonest.get(key)
        if found is None:
            found = self._soonest[key] = self._earliest_start(gpu_type, gpus, past, closing)
        return found

    def _closing_for(
        self, gpu_type: str, gpus: int, past_reservations: bool, run_seconds: float
    ) -> frozenset[str]:
        """The hosts of the type whose maintenance starts before a job of `gpus` GPUs and
        `run_seconds` would end there, started when their cards free up."""
        pool = self.pools.get(gpu_type)
        if pool is None:
            return frozenset()
        run = run_seconds * MAINTENANCE_MARGIN
        closing = []
        for host, closes in self.closes_at.items():
            ids = pool.members.get(host)
            if not ids:
                continue
            times = self._times_on(gpu_type, host, ids, past_reservations)
            free_at = times[min(gpus, len(times)) - 1][0]
            if max(free_at, self.now) + run > closes:
                closing.append(host)
        return frozenset(closing)

    def _times_on(
        self, gpu_type: str, host: str, ids: list[int], past_reservations: bool
    ) -> list[tuple[float, int]]:
        """The host's GPUs of the type by when they are free, soonest first (cached)."""
        key = (gpu_type, host, past_reservations)
        by_time = self._host_times.get(key)
        if by_time is None:
            at = self._free_at(past_reservations).get
            by_time = self._host_times[key] = sorted(
                zip(map(at, ids, repeat(NEVER)), ids, strict=False)
            )
        return by_time

    def _free_at(self, past_reservations: bool) -> dict[int, float]:
        """When each GPU is free: by its holder's expected end, or (`past_reservations`) past
        the reservation on it. Dicts, read in C by the sorts above."""
        plain = self.available_at.flat()
        if not past_reservations or not self._reserved_until:
            return plain
        if self._past_reservations is None:
            past = dict(plain)
            for gpu, until in self._reserved_until.items():
                past[gpu] = max(plain.get(gpu, NEVER), until)
            self._past_reservations = past
        return self._past_reservations

    def _earliest_start(
        self, gpu_type: str, gpus: int, past_reservations: bool, closing: frozenset[str]
    ) -> tuple[float, frozenset[int]]:
        pool = self.pools.get(gpu_type)
        if pool is None:
            return NEVER, frozenset()
        if gpus > pool.max_host_size:
            at = self._free_at(past_reservations).get
            times = sorted(
                [
                    (at(gpu, NEVER), gpu)
                    for host, ids in pool.members.items()
                    if host not in closing
                    for gpu in ids
                ]
            )
            if len(times) < gpus:
                return NEVER, frozenset()
            return times[gpus - 1][0], frozenset(gpu for _, gpu in times[:gpus])
        if not closing:
            return self._soonest_host(pool, gpus, past_reservations)
        soonest: float = NEVER
        chosen: tuple[str, list[int]] | None = None
        for host, ids in pool.members.items():
            if len(ids) < gpus or host in closing:
                continue
            free_at = self._soonest_on(gpu_type, host, ids, past_reservations)[gpus - 1]
            if free_at < soonest:
                soonest, chosen = free_at, (host, ids)
        if chosen is None:
            return NEVER, frozenset()
        on = self._times_on(gpu_type, chosen[0], chosen[1], past_reservations)
        return soonest, frozenset(gpu for _, gpu in on[:gpus])

    def _hosts_of(self, gpu_type: str) -> tuple[list[str], dict[str, int]]:
        """The pool's hosts in its order, and each one's place in it (cached for the pass)."""
        found = self._pool_hosts.get(gpu_type)
        if found is None:
            hosts = list(self.pools[gpu_type].members)
            found = self._pool_hosts[gpu_type] = (hosts, {h: i for i, h in enumerate(hosts)})
        return found

    def _soonest_host(self, pool: Pool, gpus: int, past: bool) -> tuple[float, frozenset[int]]:
        """The first host (in the pool's order) where `gpus` GPUs of the type are free
        soonest, and when; what `_earliest_start` finds with no host closing."""
        gpu_type = pool.gpu_type
        key = (gpu_type, gpus, past)
        kth = self._kth.get(key)
        if kth is None:
            kth = self._kth[key] = [None] * len(pool.members)
        hosts = self._hosts_of(gpu_type)[0]
        if None in kth:  # read the hosts not known (all at first, then those changed)
            index = kth.index(None)
            while True:
                host = hosts[index]
                ids = pool.members[host]
                kth[index] = (
                    NEVER
                    if len(ids) < gpus
                    else self._soonest_on(gpu_type, host, ids, past)[gpus - 1]
                )
                try:
                    index = kth.index(None, index + 1)
                except ValueError:
                    break  # every host known
        known = cast(list[float], kth)
        soonest = min(known, default=NEVER)
        if soonest == NEVER:
            return NEVER, frozenset()
        host = hosts[known.index(soonest)]
        on = self._times_on(gpu_type, host, pool.members[host], past)
        return soonest, frozenset(gpu for _, gpu in on[:gpus])

    def _soonest_on(self, gpu_type: str, host: str, ids: list[int], past: bool) -> list[float]:
        """When the host's GPUs of the type are free, soonest first: the times alone, as most
        hosts are asked only that; which GPUs is asked of the chosen host (cached)."""
        key = (gpu_type, host, past)
        on_host = self._host_soonest.get(key)
        if on_host is None:
            at = self._free_at(past).get
            on_host = self._host_soonest[key] = sorted(map(at, ids, repeat(NEVER)))
        return on_host


# A job placed before a host's maintenance must end before it starts by its estimate (corrected
# by its owner's history) and a quarter more: estimates run over, and a run cut by the window
# loses what it did since its last checkpoint. A quarter is what the overrun alert's default
# factor (1.5) leaves of slack to an estimate already corrected by history, halved.
MAINTENANCE_MARGIN = 1.25


# A job past its estimate has shown the estimate wrong: it is expected to run on for this
# share of the time it has run so far (at least a minute), not to end any moment. Otherwise a
# reservation would sit on its GPUs forever while backfill refills the hosts that do drain.
OVERRUN_SHARE = 0.5


def _expected_ends(snapshot: Snapshot) -> dict[int, float]:
    """When each running job should end by its estimate, or, past it, by how long it has run."""
    now = snapshot.now
    return {
        job.id: job.expected_end
        if job.expected_end > now
        else now + max(60.0, OVERRUN_SHARE * (now - job.started_at))
        for job in snapshot.running
    }


def _headroom(knobs: Knobs, pool: Pool) -> int:
    amount = knobs.headroom.get(pool.gpu_type, 0.0)
    if amount >= 1:
        return int(amount)
    return math.ceil(amount * pool.size)
