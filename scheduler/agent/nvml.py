"""The real GPUs, read through NVML (the pynvml / nvidia-ml-py bindings).

pynvml is imported here only, and only when a reader first reads, so the rest of paika runs
on machines without NVIDIA drivers. NVML errors are converted to GpuReadError at this
boundary; a measurement the GPU does not support (NVMLError_NotSupported) becomes None.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from scheduler.agent.errors import GpuReadError
from scheduler.agent.protocol import GpuInfo, GpuProcess

T = TypeVar("T")
MIB = 1024 * 1024
NO_DRIVER_HINT = (
    "is the NVIDIA driver installed and loaded (try nvidia-smi)? "
    'On a machine without NVIDIA GPUs run the agent with --simulate "4xA100-80GB"'
)


def load_pynvml() -> ModuleType:
    """Import pynvml; the deprecated `pynvml` shim's FutureWarning is not the user's business."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            return importlib.import_module("pynvml")
    except ImportError as exc:
        raise GpuReadError(
            f"cannot read GPUs: the NVML bindings (nvidia-ml-py) are not installed ({exc})"
        ) from exc


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class NvmlReader:
    """GpuReader over NVML. `library` replaces the pynvml module (tests pass a fake one)."""

    simulated = False

    def __init__(self, *, library: ModuleType | Any | None = None) -> None:
        self._nvml: Any = library
        self._initialised = False
        self._lock = threading.Lock()

    # -- lifecycle

    def _ensure_init(self) -> Any:
        if self._nvml is None:
            self._nvml = load_pynvml()
        nvml = self._nvml
        if not self._initialised:
            try:
                nvml.nvmlInit()
            except nvml.NVMLError as exc:
                raise GpuReadError(
                    f"cannot read GPUs: NVML failed to start ({exc}); {NO_DRIVER_HINT}"
                ) from exc
            self._initialised = True
        return nvml

    def close(self) -> None:
        with self._lock:
            if self._initialised and self._nvml is not None:
                with contextlib.suppress(self._nvml.NVMLError):
                    self._nvml.nvmlShutdown()
            self._initialised = False

    # -- reading

    def read(self) -> list[GpuInfo]:
        with self._lock:
            nvml = self._ensure_init()
            try:
                count = int(nvml.nvmlDeviceGetCount())
                return [self._device(nvml, index) for index in range(count)]
            except nvml.NVMLError as exc:
                raise GpuReadError(f"cannot read GPUs: NVML error: {exc}") from exc

    def _device(self, nvml: Any, index: int) -> GpuInfo:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)

        def optional(read: Callable[[], T]) -> T | None:
            try:
                return read()
            except nvml.NVMLError_NotSupported:
                return None

        memory = optional(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        utilization = optional(lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        temperature = optional(
            lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
        )
        power_mw = optional(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        processes = optional(lambda: nvml.nvmlDeviceGetComputeRunningProcesses(handle)) or []
        return GpuInfo(
            index=index,
            uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
            name=_text(nvml.nvmlDeviceGetName(handle)),
            memory_total_mib=None if memory is None else int(memory.total) // MIB,
            memory_used_mib=None if memory is None else int(memory.used) // MIB,
            utilization_pct=None if utilization is None else int(utilization.gpu),
            temperature_c=None if temperature is None else int(temperature),
            power_w=None if power_mw is None else round(int(power_mw) / 1000.0, 1),
            processes=tuple(
                GpuProcess(
                    pid=int(proc.pid),
                    used_memory_mib=(
                        None if proc.usedGpuMemory is None else int(proc.usedGpuMemory) // MIB
                    ),
                )
                for proc in processes
            ),
        )
