"""Builders for policy tests: hosts, running and pending jobs, snapshots. No mocks."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from itertools import count

from scheduler.policy.matching import CardNeeds, CardType
from scheduler.policy.quota import QuotaState
from scheduler.policy.snapshot import HOUR, Gpu, Host, Knobs, Pending, Running, Snapshot

NOW = 1_000_000.0
CATALOG = (
    CardType("T4-16GB", 16, 0.25, 0.35),
    CardType("A100-40GB", 40, 1.0, 1.6),
    CardType("A100-80GB", 80, 1.1, 2.2),
)
_gpu_ids = count(1)


def host(
    name: str, gpu_type: str, gpus: int, *, memory: float | None = None, schedulable: bool = True
) -> Host:
    """A host with `gpus` free cards of one type."""
    mem = memory or next(c.memory_gib for c in CATALOG if c.name == gpu_type)
    return Host(
        name, tuple(Gpu(next(_gpu_ids), name, gpu_type, mem) for _ in range(gpus)), schedulable
    )


def occupy(hosts: Iterable[Host], job: Running) -> tuple[Host, ...]:
    """Hosts with the running job's GPUs marked as held by it."""
    held = set(job.gpu_ids)
    return tuple(
        replace(h, gpus=tuple(replace(g, job_id=job.id) if g.id in held else g for g in h.gpus))
        for h in hosts
    )


def running(
    job_id: int, h: Host, gpus: int, *, ends_in_h: float, priority: str = "normal", offset: int = 0
) -> Running:
    """A job holding the first `gpus` GPUs of host `h` (after `offset`) until `ends_in_h` from NOW."""
    ids = tuple(g.id for g in h.gpus[offset : offset + gpus])
    return Running(
        job_id, priority, "vision", ids, h.gpus[0].gpu_type, NOW - HOUR, NOW + ends_in_h * HOUR
    )


def job(
    job_id: int,
    *,
    gpus: int = 1,
    hours: float = 1.0,
    priority: str = "normal",
    ready: bool = True,
    waited_h: float = 0.0,
    types: tuple[str, ...] | None = None,
    mem: float | None = None,
    team: str = "vision",
) -> Pending:
    """A pending job; `hours` is its estimated GPU-hours."""
    return Pending(
        job_id,
        priority,
        team,
        "U1",
        NOW - waited_h * HOUR - (1000 - job_id),
        ready,
        gpus,
        CardNeeds(types, mem),
        hours,
    )


def snapshot(
    hosts: Iterable[Host],
    pending: Iterable[Pending] = (),
    running_jobs: Iterable[Running] = (),
    *,
    knobs: Knobs | None = None,
    quotas: dict[str, tuple[QuotaState, ...]] | None = None,
    quota_ends: dict[int, float] | None = None,
) -> Snapshot:
    """A snapshot at NOW; running jobs are marked on their hosts' GPUs."""
    hs = tuple(hosts)
    runs = tuple(running_jobs)
    for r in runs:
        hs = occupy(hs, r)
    return Snapshot(
        NOW, hs, runs, tuple(pending), CATALOG, knobs or Knobs(), quotas or {}, quota_ends or {}
    )
