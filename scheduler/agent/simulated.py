"""Simulated GPUs for machines without NVIDIA hardware: tests, the demo, laptops.

`SimulatedReader("4xA100-80GB,2xT4-16GB", host="node-a", loads=job_store)` reports six GPUs
named "NVIDIA A100-80GB" … with memory from the size after the last '-' (80GB → 81920 MiB;
none → 16384 MiB) and stable UUIDs derived from the host name and the index.

The load follows the jobs: while a job process runs on GPU i, GPU i reports 90–98 %
utilization (a deterministic jitter that changes every few seconds) and ~70 % of its memory
used, and lists the job's pid as its process, with that SM busy % as the process's own. Its
memory controller is busy half as much as its SMs, and it moves nothing over PCIe. A job
overrides this with the environment variables PAIKA_SIM_UTILIZATION (0–100),
PAIKA_SIM_MEMORY_MIB, PAIKA_SIM_GMEM_UTIL (the memory controller's busy %, 0–100) and
PAIKA_SIM_PCIE_MBPS, e.g. to play an idle job or one that presses memory bandwidth. Jobs on
one card add up (to 100 % at most). Simulated cards have no GPM: DRAM bandwidth is None.
"""

from __future__ import annotations

import re
import socket
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from scheduler.agent.errors import SpecError
from scheduler.agent.gpus import GpuLoad, LoadSource
from scheduler.agent.protocol import GpuInfo, GpuProcess

EXAMPLE_SPEC = "4xA100-80GB,2xT4-16GB"
DEFAULT_MEMORY_MIB = 16 * 1024
BUSY_MEMORY_FRACTION = 0.70
MEMORY_BUSY_PER_SM_BUSY = 0.5  # a training job's memory controller, against its SMs
JITTER_PERIOD_S = 5.0
IDLE_TEMPERATURE_C = 33
IDLE_POWER_W = 50.0
_UUID_NAMESPACE = uuid.UUID("6f1c0a52-4b0e-4f4e-9d1a-7061696b6130")  # fixed: UUIDs stay stable
_PART_RE = re.compile(r"(?:(?P<count>\d+)\s*[xX]\s*)?(?P<model>[A-Za-z][A-Za-z0-9_.+-]*)")
_MEMORY_RE = re.compile(r"(?P<gb>\d+)GB", re.IGNORECASE)
# Board power of some common models, for a plausible power reading; others get 300 W.
_BOARD_POWER_W = {"A100": 400.0, "H100": 700.0, "H200": 700.0, "V100": 300.0, "T4": 70.0}


@dataclass(frozen=True)
class SimulatedGpu:
    """One GPU of a spec: model as written ("A100-80GB") and its memory."""

    model: str
    memory_total_mib: int

    @property
    def name(self) -> str:
        return f"NVIDIA {self.model}"

    @property
    def board_power_w(self) -> float:
        family = self.model.split("-", 1)[0].upper()
        return _BOARD_POWER_W.get(family, 300.0)


def parse_spec(spec: str) -> list[SimulatedGpu]:
    """Parse "4xA100-80GB,2xT4-16GB" into one SimulatedGpu per GPU, in index order."""
    if not spec or not spec.strip():
        raise SpecError(f'empty GPU spec: expected COUNTxMODEL[-MEMGB],…, e.g. "{EXAMPLE_SPEC}"')
    gpus: list[SimulatedGpu] = []
    for raw in spec.split(","):
        part = raw.strip()
        match = _PART_RE.fullmatch(part)
        if not match:
            raise SpecError(
                f'bad GPU spec part "{part}" in "{spec}": expected COUNTxMODEL[-MEMGB], '
                f'e.g. "{EXAMPLE_SPEC}"'
            )
        count = int(match["count"]) if match["count"] is not None else 1
        if not 1 <= count <= 64:
            raise SpecError(
                f'bad GPU spec part "{part}" in "{spec}": the count must be 1 to 64, '
                f'e.g. "{EXAMPLE_SPEC}"'
            )
        model = match["model"]
        memory_mib = DEFAULT_MEMORY_MIB
        if "-" in model:
            suffix = model.rsplit("-", 1)[1]
            size = _MEMORY_RE.fullmatch(suffix)
            if size:
                memory_mib = int(size["gb"]) * 1024
                if memory_mib == 0:
                    raise SpecError(
                        f'bad GPU spec part "{part}" in "{spec}": the memory size must be above '
                        f'0GB, e.g. "{EXAMPLE_SPEC}"'
                    )
        gpus.extend(SimulatedGpu(model, memory_mib) for _ in range(count))
    if len(gpus) > 64:
        raise SpecError(f'GPU spec "{spec}" names {len(gpus)} GPUs; at most 64 per host')
    return gpus


class _NoLoad:
    def gpu_loads(self) -> list[GpuLoad]:
        return []


class SimulatedReader:
    """GpuReader for the GPUs of a spec, loaded by the jobs that `loads` reports."""

    simulated = True

    def __init__(
        self,
        spec: str,
        *,
        host: str | None = None,
        loads: LoadSource | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.spec = spec
        self.gpus = parse_spec(spec)
        self.host = host or socket.gethostname()
        self.loads: LoadSource = loads or _NoLoad()
        self._clock = clock

    def uuid(self, index: int) -> str:
        return f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{self.host}/{index}')}"

    def read(self) -> list[GpuInfo]:
        by_gpu: dict[int, list[GpuLoad]] = {}
        for load in self.loads.gpu_loads():
            by_gpu.setdefault(load.gpu, []).append(load)
        bucket = int(self._clock() // JITTER_PERIOD_S)
        return [
            self._one(index, gpu, by_gpu.get(index, []), bucket)
            for index, gpu in enumerate(self.gpus)
        ]

    def _one(self, index: int, gpu: SimulatedGpu, loads: list[GpuLoad], bucket: int) -> GpuInfo:
        gpu_uuid = self.uuid(index)
        utilization = memory_busy = pcie = 0.0
        processes: list[GpuProcess] = []
        for load in loads:
            if load.utilization_pct is not None:
                busy = load.utilization_pct
            else:
                jitter = zlib.crc32(f"{gpu_uuid}/{load.job_id}/{bucket}".encode()) % 9
                busy = 90.0 + jitter
            utilization += busy
            if load.memory_busy_pct is not None:
                memory_busy += load.memory_busy_pct
            else:
                memory_busy += busy * MEMORY_BUSY_PER_SM_BUSY
            pcie += load.pcie_mbps or 0.0
            default_memory = int(gpu.memory_total_mib * BUSY_MEMORY_FRACTION)
            memory = load.memory_mib if load.memory_mib is not None else default_memory
            processes.append(GpuProcess(pid=load.pid, used_memory_mib=memory, sm_pct=round(busy)))
        utilization = min(100.0, max(0.0, utilization))
        used = min(gpu.memory_total_mib, sum(p.used_memory_mib or 0 for p in processes))
        power = IDLE_POWER_W + (gpu.board_power_w - IDLE_POWER_W) * utilization / 100.0
        if gpu.board_power_w <= IDLE_POWER_W:
            power = gpu.board_power_w * (0.3 + 0.7 * utilization / 100.0)
        return GpuInfo(
            index=index,
            uuid=gpu_uuid,
            name=gpu.name,
            memory_total_mib=gpu.memory_total_mib,
            memory_used_mib=used,
            utilization_pct=round(utilization),
            temperature_c=IDLE_TEMPERATURE_C + round(utilization * 0.4),
            power_w=round(power, 1),
            processes=tuple(processes),
            memory_busy_pct=round(min(100.0, memory_busy)),
            pcie_mbps=round(pcie, 1),
        )
