"""What the periodic work last did, kept for the health check and the metrics.

The cycle's thread writes, the HTTP threads read: each write replaces one frozen value, so
a reader never takes a lock, never waits for a cycle and never sees half an update.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from types import MappingProxyType

from scheduler.cycle import CycleResult
from scheduler.policy.sharing import WHOLE_CARD
from scheduler.policy.snapshot import Snapshot

# Labels of the GPU gauges: (state, GPU type) and (host, GPU index, GPU name).
GpuKey = tuple[str, str]
UtilizationKey = tuple[str, str, str]


@dataclass(frozen=True)
class CycleSeen:
    """One finished cycle, reduced to the numbers the metrics show."""

    at_wall: float  # POSIX seconds, for people and Prometheus
    at_monotonic: float  # for ages that a clock change cannot bend
    seconds: float
    errors: int
    queue: MappingProxyType[tuple[str, str], int]  # (priority class, reason) → waiting jobs
    gpus: MappingProxyType[GpuKey, int]  # (state, GPU type) → GPUs
    utilization: MappingProxyType[UtilizationKey, float]  # per GPU that reported one
    # GPU type → cards held in parts by share=yes jobs (each also one busy GPU in `gpus`).
    shared: MappingProxyType[str, int] = field(default_factory=lambda: MappingProxyType({}))


@dataclass
class CycleWatch:
    """The last cycle, the last leadership check and when the process started."""

    started_monotonic: float = field(default_factory=time.monotonic)
    leading: bool = False
    last_tick_monotonic: float | None = None  # the last time the cycle job ran, leading or not
    last_cycle: CycleSeen | None = None

    def ticked(self, leading: bool) -> None:
        """The cycle job ran and learned whether this instance leads."""
        self.leading = leading
        self.last_tick_monotonic = time.monotonic()

    def cycle_done(self, result: CycleResult) -> None:
        """A cycle finished: keep what the metrics show of it."""
        snapshot = result.snapshot
        self.last_cycle = CycleSeen(
            at_wall=time.time(),
            at_monotonic=time.monotonic(),
            seconds=sum(result.timings.values()),
            errors=len(result.errors),
            queue=MappingProxyType(_queue(result, snapshot)),
            gpus=MappingProxyType(_gpus(result, snapshot)),
            shared=MappingProxyType(_shared(result, snapshot)),
            utilization=MappingProxyType(_utilization(result)),
        )


def _queue(result: CycleResult, snapshot: Snapshot | None) -> dict[tuple[str, str], int]:
    """Waiting jobs by class and reason; a job the plan starts counts as `starting`."""
    if snapshot is None or result.plan is None:
        return {}
    reasons = {wait.job_id: wait.code.value for wait in result.plan.waits.values()}
    reasons |= {start.job_id: "starting" for start in result.plan.starts}
    return dict(Counter((p.priority, reasons.get(p.id, "unknown")) for p in snapshot.pending))


def _gpus(result: CycleResult, snapshot: Snapshot | None) -> dict[GpuKey, int]:
    """GPUs by state and type, after this cycle's starts: `down` (the GPU is unhealthy),
    `busy`, `unavailable` (its host is drained or down) or `free`."""
    if snapshot is None:
        return {}
    starting = (
        {gpu for start in result.plan.starts for gpu in start.gpu_ids} if result.plan else set()
    )
    counts: Counter[GpuKey] = Counter()
    for host in snapshot.hosts:
        for gpu in host.gpus:
            if not gpu.healthy:
                state = "down"
            elif gpu.job_id is not None or gpu.id in starting:
                state = "busy"
            elif not host.schedulable:
                state = "unavailable"
            else:
                state = "free"
            counts[(state, gpu.gpu_type)] += 1
    return dict(counts)


def _shared(result: CycleResult, snapshot: Snapshot | None) -> dict[str, int]:
    """Healthy cards held in parts by share=yes jobs, by type, after this cycle's starts: a
    card counts once however many jobs are on it (and is busy in `_gpus` too)."""
    if snapshot is None:
        return {}
    starts = result.plan.starts if result.plan else ()
    parting = {
        gpu
        for start in starts
        if start.share_milli is not None and start.share_milli < WHOLE_CARD
        for gpu in start.gpu_ids
    }
    counts: Counter[str] = Counter()
    for host in snapshot.hosts:
        for gpu in host.gpus:
            if gpu.healthy and (gpu.tenants or gpu.id in parting):
                counts[gpu.gpu_type] += 1
    return dict(counts)


def _utilization(result: CycleResult) -> dict[UtilizationKey, float]:
    return {
        (host, str(gpu.index), gpu.name): float(gpu.utilization_pct)
        for host, report in result.reports.items()
        for gpu in report.gpus
        if gpu.utilization_pct is not None
    }
