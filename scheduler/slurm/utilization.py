"""A Slurm node's GPU use, from the paika agent beside it (a pool's `utilization: agents`).

Slurm tells which cards a job holds but not how busy they are. On such a pool each node runs
a paika agent in report-only mode (`paika agent --report-only`: it serves its NVML readings
and refuses every start), polled like any agent host, and its readings are laid over the
Slurm report's cards, matched by index: Slurm numbers a node's cards in its gres.conf order
(the File= lines, /dev/nvidia0..N), the agent in NVML's; the two agree when gres.conf lists
the devices in order, as is usual.

From the agent: utilization, memory in use, processes, the card's UUID and NVML name. From
Slurm, always: who holds each card, the cards other jobs took, the node's health, the runs,
the card's type and size. An agent that does not answer only means no utilization this
cycle: the node's report is Slurm's alone, never down for it, no run concluded for it.
"""

from __future__ import annotations

import dataclasses
import logging

from scheduler.hosts.report import GpuReading, HostReport

log = logging.getLogger(__name__)
# (node, Slurm's indices, the agent's) already warned of: said once, not every cycle.
_WARNED: set[tuple[str, tuple[int, ...], tuple[int, ...]]] = set()


def with_utilization(slurm: HostReport, agent: HostReport | None) -> HostReport:
    """The Slurm report of a node with its agent's readings laid over its cards (Slurm's
    report as it is when either poll failed: nothing is made up)."""
    if agent is None or not agent.ok or not slurm.ok:
        return slurm
    readings = {gpu.index: gpu for gpu in agent.gpus}
    mismatch = (slurm.host, tuple(g.index for g in slurm.gpus), tuple(sorted(readings)))
    if set(mismatch[1]) != set(mismatch[2]) and mismatch not in _WARNED:
        # Worth a look (gres.conf lists other devices than the node has?); the cards both
        # know are still matched.
        _WARNED.add(mismatch)
        log.warning(
            "node %s: Slurm has GPUs %s, its agent %s; utilization only for those in both",
            *mismatch,
            extra={"host": slurm.host},
        )
    gpus = tuple(_laid_over(gpu, readings.get(gpu.index)) for gpu in slurm.gpus)
    return dataclasses.replace(slurm, gpus=gpus)


def _laid_over(card: GpuReading, reading: GpuReading | None) -> GpuReading:
    if reading is None:
        return card
    return dataclasses.replace(
        card,
        uuid=reading.uuid,
        name=reading.name,
        memory_used_gib=reading.memory_used_gib,
        utilization_pct=reading.utilization_pct,
        processes=dict(reading.processes),
    )
