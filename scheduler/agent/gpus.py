"""How the agent reads its GPUs: one protocol, two implementations.

    NvmlReader       (nvml.py)       the real GPUs, through NVML (pynvml)
    SimulatedReader  (simulated.py)  GPUs from a spec like "4xA100-80GB,2xT4-16GB", whose
                                     load follows the jobs the agent runs on them

Readers raise only AgentError (GpuReadError, SpecError); NVML's own errors stay inside nvml.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from scheduler.agent.protocol import GpuInfo, GpuProcess

__all__ = ["GpuInfo", "GpuLoad", "GpuProcess", "GpuReader", "LoadSource"]


class GpuReader(Protocol):
    """Reads the host's GPUs, in index order."""

    def read(self) -> list[GpuInfo]: ...


@dataclass(frozen=True)
class GpuLoad:
    """A running job process on one GPU, as a simulated GPU needs to know it.

    `utilization_pct` / `memory_mib` / `memory_busy_pct` / `pcie_mbps` are the job's
    overrides (env PAIKA_SIM_UTILIZATION, PAIKA_SIM_MEMORY_MIB, PAIKA_SIM_GMEM_UTIL,
    PAIKA_SIM_PCIE_MBPS); None means "a busy training job".
    """

    gpu: int
    pid: int
    job_id: str
    utilization_pct: float | None = None
    memory_mib: int | None = None
    memory_busy_pct: float | None = None
    pcie_mbps: float | None = None


class LoadSource(Protocol):
    """Where a simulated reader learns which job processes run on which GPU (the JobStore)."""

    def gpu_loads(self) -> list[GpuLoad]: ...
