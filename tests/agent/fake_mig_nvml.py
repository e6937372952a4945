"""The fake NVML of fake_nvml.py with MIG: card 1 (an H200 here as well) has MIG mode on.

Card 1 is split into two MIG instances, in slots 0 and 2 of its seven (slot 1 is empty, as
after an instance was removed): a 3g.71gb with 72 704 MiB holding process 5151 (memory NVML
cannot say for it) and a 1g.18gb with 18 176 MiB holding none. Like a real driver, an instance
says nothing of its utilization, temperature, per-process SM samples, PCIe or GPM, and its
power reading is the whole card's. Card 0 keeps MIG off; `mig_on` False turns card 1's off
as well. The fake also records any call that would change MIG: the reader must make none.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from fake_nvml import FakeNvml

MIB = 1024 * 1024
MIG_CARD = 1


@dataclass(frozen=True)
class MigHandle:
    parent: int
    slot: int


# Slot → (profile, memory in MiB) on card 1.
INSTANCES = {0: ("3g.71gb", 72_704), 2: ("1g.18gb", 18_176)}


def mig_uuid(slot: int) -> str:
    return f"MIG-fake-{MIG_CARD}-{slot}"


class FakeMigNvml(FakeNvml):
    NVML_DEVICE_MIG_DISABLE = 0
    NVML_DEVICE_MIG_ENABLE = 1

    def __init__(self, *, mig_on: bool = True) -> None:
        super().__init__()
        self.mig_on = mig_on
        self.changes: list[str] = []  # calls that would change a card's MIG setup

    # -- MIG queries

    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]:  # noqa: N802
        if isinstance(handle, MigHandle):
            raise self.NVMLError_NotSupported()
        on = handle == MIG_CARD and self.mig_on
        return [int(on), int(on)]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int:  # noqa: N802
        return 7 if handle == MIG_CARD else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: int) -> MigHandle:  # noqa: N802
        if handle != MIG_CARD or not self.mig_on or index not in INSTANCES:
            raise self.NVMLError_NotFound()
        return MigHandle(handle, index)

    # -- what would change MIG (never to be called)

    def nvmlDeviceSetMigMode(self, handle: Any, mode: int) -> None:  # noqa: N802
        self.changes.append("nvmlDeviceSetMigMode")

    def nvmlDeviceCreateGpuInstance(self, handle: Any, profile: int) -> None:  # noqa: N802
        self.changes.append("nvmlDeviceCreateGpuInstance")

    def nvmlGpuInstanceDestroy(self, instance: Any) -> None:  # noqa: N802
        self.changes.append("nvmlGpuInstanceDestroy")

    # -- an instance's readings

    def nvmlDeviceGetUUID(self, handle: Any) -> Any:  # noqa: N802
        if isinstance(handle, MigHandle):
            return mig_uuid(handle.slot).encode()
        return super().nvmlDeviceGetUUID(handle)

    def nvmlDeviceGetName(self, handle: Any) -> str:  # noqa: N802
        if isinstance(handle, MigHandle):
            return f"NVIDIA H200 MIG {INSTANCES[handle.slot][0]}"
        return super().nvmlDeviceGetName(handle)

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any:  # noqa: N802
        if isinstance(handle, MigHandle):
            total = INSTANCES[handle.slot][1] * MIB
            return SimpleNamespace(total=total, used=512 * MIB, free=total - 512 * MIB)
        if handle == MIG_CARD:  # the whole card answers, as a real one does
            return SimpleNamespace(total=143771 * MIB, used=1024 * MIB, free=0)
        return super().nvmlDeviceGetMemoryInfo(handle)

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:  # noqa: N802
        if isinstance(handle, MigHandle):
            raise self.NVMLError_NotSupported()
        return super().nvmlDeviceGetUtilizationRates(handle)

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:  # noqa: N802
        if isinstance(handle, MigHandle):
            # Not NotSupported: some drivers answer an instance otherwise.
            raise self.NVMLError()
        return 55 if handle == MIG_CARD else super().nvmlDeviceGetTemperature(handle, sensor)

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:  # noqa: N802
        if isinstance(handle, MigHandle):
            return 300_000  # the whole card's
        return super().nvmlDeviceGetPowerUsage(handle)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:  # noqa: N802
        if isinstance(handle, MigHandle):
            return [SimpleNamespace(pid=5151, usedGpuMemory=None)] if handle.slot == 0 else []
        return super().nvmlDeviceGetComputeRunningProcesses(handle)

    def nvmlDeviceGetProcessUtilization(self, handle: Any, since: int) -> list[Any]:  # noqa: N802
        if isinstance(handle, MigHandle):
            raise self.NVMLError_NotSupported()
        return super().nvmlDeviceGetProcessUtilization(handle, since)

    def nvmlDeviceGetPcieThroughput(self, handle: Any, counter: int) -> int:  # noqa: N802
        if isinstance(handle, MigHandle):
            raise self.NVMLError_NotSupported()
        return super().nvmlDeviceGetPcieThroughput(handle, counter)

    def nvmlGpmQueryDeviceSupport(self, handle: Any) -> Any:  # noqa: N802
        if isinstance(handle, MigHandle):
            return SimpleNamespace(version=1, isSupportedDevice=0)
        return super().nvmlGpmQueryDeviceSupport(handle)
