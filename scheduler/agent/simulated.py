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

A card with MIG instances: "1xA100-80GB:mig=3g.40gb+2g.20gb+1g.10gb" reports that card's
three instances, not the card, as a real agent does (see nvml.py): each named as NVML names
one ("NVIDIA A100-80GB MIG 3g.40gb"), with the memory its profile names (40GB → 40960 MiB),
a "MIG-…" UUID, the card as its parent, and the index protocol.mig_index gives slot 0, 1, 2….
A profile is <compute slices>g.<memory>gb (a trailing "+me", media engines, is kept in its
name); the card's instances take at most 7 compute slices and its memory. An instance has no
power reading of its own.
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
from scheduler.agent.protocol import MIG_INDEX_BASE, GpuInfo, GpuProcess, mig_index

EXAMPLE_SPEC = "4xA100-80GB,2xT4-16GB"
EXAMPLE_MIG = "1xA100-80GB:mig=3g.40gb+2g.20gb+1g.10gb"
MIG_COMPUTE_SLICES = 7  # an A100's or H100's, the most any MIG card has
DEFAULT_MEMORY_MIB = 16 * 1024
BUSY_MEMORY_FRACTION = 0.70
MEMORY_BUSY_PER_SM_BUSY = 0.5  # a training job's memory controller, against its SMs
JITTER_PERIOD_S = 5.0
IDLE_TEMPERATURE_C = 33
IDLE_POWER_W = 50.0
_UUID_NAMESPACE = uuid.UUID("6f1c0a52-4b0e-4f4e-9d1a-7061696b6130")  # fixed: UUIDs stay stable
_PART_RE = re.compile(r"(?:(?P<count>\d+)\s*[xX]\s*)?(?P<model>[A-Za-z][A-Za-z0-9_.+-]*)")
_MEMORY_RE = re.compile(r"(?P<gb>\d+)GB", re.IGNORECASE)
_MIG_PROFILE_RE = re.compile(r"(?P<slices>[1-7])g\.(?P<gb>\d+)gb(?:\+me)?")
# Board power of some common models, for a plausible power reading; others get 300 W.
_BOARD_POWER_W = {"A100": 400.0, "H100": 700.0, "H200": 700.0, "V100": 300.0, "T4": 70.0}


@dataclass(frozen=True)
class MigInstance:
    """One MIG instance of a simulated card: its profile ("3g.40gb") and memory."""

    profile: str
    memory_total_mib: int

    @property
    def compute_slices(self) -> int:
        return int(self.profile.split("g.", 1)[0])


@dataclass(frozen=True)
class SimulatedGpu:
    """One GPU of a spec: model as written ("A100-80GB"), its memory, and its MIG instances
    (none: MIG is off, the card is offered whole)."""

    model: str
    memory_total_mib: int
    mig: tuple[MigInstance, ...] = ()

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
        part, _, options = raw.strip().partition(":")
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
        mig = _mig_instances(options, raw.strip(), spec, memory_mib) if options else ()
        gpus.extend(SimulatedGpu(model, memory_mib, mig) for _ in range(count))
    if len(gpus) > 64:
        raise SpecError(f'GPU spec "{spec}" names {len(gpus)} GPUs; at most 64 per host')
    return gpus


def _mig_instances(options: str, part: str, spec: str, card_mib: int) -> tuple[MigInstance, ...]:
    """The instances of "mig=3g.40gb+2g.20gb" on a card of `card_mib`."""
    key, _, profiles = options.partition("=")
    if key.strip().lower() != "mig" or not profiles.strip():
        raise SpecError(
            f'bad GPU spec part "{part}" in "{spec}": after ":" only mig=PROFILE+PROFILE… may '
            f'follow, e.g. "{EXAMPLE_MIG}"'
        )
    names: list[str] = []
    for word in profiles.strip().split("+"):
        if word.lower() == "me" and names:  # "1g.10gb+me": the profile with media engines
            names[-1] += "+me"
        else:
            names.append(word)
    instances = []
    for name in names:
        profile = _MIG_PROFILE_RE.fullmatch(name.lower())
        if not profile or int(profile["gb"]) == 0:
            raise SpecError(
                f'bad MIG profile "{name}" in "{spec}": expected <slices>g.<memory>gb with 1 to '
                f'7 compute slices, as nvidia-smi names them, e.g. "{EXAMPLE_MIG}"'
            )
        instances.append(MigInstance(name.lower(), int(profile["gb"]) * 1024))
    slices = sum(i.compute_slices for i in instances)
    memory = sum(i.memory_total_mib for i in instances)
    if slices > MIG_COMPUTE_SLICES or memory > card_mib:
        raise SpecError(
            f'the MIG instances in "{part}" take {slices} compute slices and {memory // 1024} GB: '
            f"more than the card has ({MIG_COMPUTE_SLICES} slices, {card_mib // 1024} GB); "
            f'name fewer or smaller ones, e.g. "{EXAMPLE_MIG}"'
        )
    return tuple(instances)


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
        kind = "MIG" if index >= MIG_INDEX_BASE else "GPU"
        return f"{kind}-{uuid.uuid5(_UUID_NAMESPACE, f'{self.host}/{index}')}"

    def _cards(self) -> list[tuple[int, int | None, SimulatedGpu]]:
        """What the reader offers, in index order: (index, MIG parent or None, card)."""
        whole = [(index, None, gpu) for index, gpu in enumerate(self.gpus) if not gpu.mig]
        instances = [
            (
                mig_index(parent, slot),
                parent,
                SimulatedGpu(f"{gpu.model} MIG {instance.profile}", instance.memory_total_mib),
            )
            for parent, gpu in enumerate(self.gpus)
            for slot, instance in enumerate(gpu.mig)
        ]
        return [*whole, *instances]

    def read(self) -> list[GpuInfo]:
        by_gpu: dict[int, list[GpuLoad]] = {}
        for load in self.loads.gpu_loads():
            by_gpu.setdefault(load.gpu, []).append(load)
        bucket = int(self._clock() // JITTER_PERIOD_S)
        return [
            self._one(index, gpu, by_gpu.get(index, []), bucket, parent)
            for index, parent, gpu in self._cards()
        ]

    def _one(
        self,
        index: int,
        gpu: SimulatedGpu,
        loads: list[GpuLoad],
        bucket: int,
        parent: int | None = None,
    ) -> GpuInfo:
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
            # An instance has no power of its own: the card's is all its instances'.
            power_w=round(power, 1) if parent is None else None,
            processes=tuple(processes),
            memory_busy_pct=round(min(100.0, memory_busy)),
            pcie_mbps=round(pcie, 1),
            mig_uuid=gpu_uuid if parent is not None else None,
            mig_parent_index=parent,
        )
