"""The real GPUs, read through NVML (the pynvml / nvidia-ml-py bindings).

pynvml is imported here only, and only when a reader first reads, so the rest of paika runs
on machines without NVIDIA drivers. NVML errors are converted to GpuReadError at this
boundary; a measurement the GPU does not support (NVMLError_NotSupported) becomes None.

What a card says of its load, for deciding who may share it, is read on every read as well:
the memory controller's busy % (utilization.memory), PCIe traffic (tx + rx, KB/s over the
driver's last 20 ms, as MB/s), each process's SM busy % (nvmlDeviceGetProcessUtilization:
the samples since the last read), and on cards with GPM (Hopper and later) DRAM bandwidth
in % of peak, between this read's GPM sample and the last one (None on the first read).
These are extras: one the card, the driver or the bindings do not offer (not supported, no
permission, no samples, a function older bindings lack) is None and never fails the read.
Nothing here changes a card's settings.

A card with MIG mode on (nvmlDeviceGetMigMode's current mode) is not offered itself: each of
its MIG instances (nvmlDeviceGetMigDeviceHandleByIndex over nvmlDeviceGetMaxMigDeviceCount's
slots; an empty slot is skipped) is reported as a card of its own, under the index
protocol.mig_index gives it, with NVML's UUID ("MIG-…") and name for it and its own memory and
processes. What NVML does not say of an instance (its utilization, power, per-process memory
on some drivers) is None; its temperature is its card's. A card with MIG on and no instance
offers nothing. The reader only asks: it never turns MIG on or off, nor makes or removes an
instance.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import threading
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from scheduler.agent.errors import GpuReadError
from scheduler.agent.protocol import GpuInfo, GpuProcess, mig_index

T = TypeVar("T")
MIB = 1024 * 1024
KB_PER_MB = 1000
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
        # Per card index: the newest per-process sample seen (µs), and the last GPM sample.
        self._seen_us: dict[int, int] = {}
        self._gpm: dict[int, Any] = {}

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
                for sample in self._gpm.values():
                    with contextlib.suppress(self._nvml.NVMLError):
                        self._nvml.nvmlGpmSampleFree(sample)
                with contextlib.suppress(self._nvml.NVMLError):
                    self._nvml.nvmlShutdown()
            self._gpm.clear()
            self._initialised = False

    # -- reading

    def read(self) -> list[GpuInfo]:
        with self._lock:
            nvml = self._ensure_init()
            try:
                gpus: list[GpuInfo] = []
                for index in range(int(nvml.nvmlDeviceGetCount())):
                    handle = nvml.nvmlDeviceGetHandleByIndex(index)
                    instances = self._mig_instances(nvml, handle)
                    if instances is None:
                        gpus.append(self._device(nvml, index, handle))
                    else:
                        gpus += [
                            self._mig_device(nvml, index, handle, slot, instance)
                            for slot, instance in instances
                        ]
            except nvml.NVMLError as exc:
                raise GpuReadError(f"cannot read GPUs: NVML error: {exc}") from exc
            # In index order, as readers answer: instances after the whole cards.
            return sorted(gpus, key=lambda gpu: gpu.index)

    @staticmethod
    def _mig_instances(nvml: Any, handle: Any) -> list[tuple[int, Any]] | None:
        """A card's MIG instances by slot, when its MIG mode is on (an empty list: on, with
        no instance made); None for a card without MIG or with it off."""
        try:
            current, _pending = nvml.nvmlDeviceGetMigMode(handle)
        except AttributeError:  # bindings older than MIG
            return None
        except nvml.NVMLError:  # NotSupported: a card without MIG
            return None
        if int(current) != int(getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1)):
            return None
        try:
            slots = int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))
        except nvml.NVMLError:  # MIG on, yet no count to be had: no instance to offer
            return []
        instances = []
        for slot in range(slots):
            try:
                instances.append((slot, nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)))
            except nvml.NVMLError:  # NotFound: an empty slot
                continue
        return instances

    def _mig_device(
        self, nvml: Any, parent: int, parent_handle: Any, slot: int, handle: Any
    ) -> GpuInfo:
        index = mig_index(parent, slot)
        # An instance answers fewer questions than a card, and not always with NotSupported
        # (drivers differ): any error of a reading is a reading NVML does not give.
        gpu = self._device(nvml, index, handle, missing=nvml.NVMLError)
        temperature = gpu.temperature_c
        if temperature is None:  # the instance is part of the card's one die
            card = self._extra(
                nvml,
                lambda: nvml.nvmlDeviceGetTemperature(parent_handle, nvml.NVML_TEMPERATURE_GPU),
            )
            temperature = None if card is None else int(card)
        return gpu.model_copy(
            update={
                "mig_uuid": gpu.uuid,
                "mig_parent_index": parent,
                "temperature_c": temperature,
                # The card's power is all its instances': not this one's.
                "power_w": None,
            }
        )

    def _device(
        self, nvml: Any, index: int, handle: Any, *, missing: type[Exception] | None = None
    ) -> GpuInfo:
        unsupported = missing or nvml.NVMLError_NotSupported

        def optional(read: Callable[[], T]) -> T | None:
            try:
                return read()
            except unsupported:
                return None

        memory = optional(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        utilization = optional(lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        temperature = optional(
            lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
        )
        power_mw = optional(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        processes = optional(lambda: nvml.nvmlDeviceGetComputeRunningProcesses(handle)) or []
        sm_by_pid = self._process_sm(nvml, index, handle)
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
                    sm_pct=None if sm_by_pid is None else sm_by_pid.get(int(proc.pid), 0),
                )
                for proc in processes
            ),
            memory_busy_pct=None if utilization is None else int(utilization.memory),
            pcie_mbps=self._pcie_mbps(nvml, handle),
            dram_bw_pct=self._dram_bw_pct(nvml, index, handle),
        )

    # -- what the card says of its load (extras: None where not to be had)

    @staticmethod
    def _extra(nvml: Any, read: Callable[[], T]) -> T | None:
        # Any NVML error: not supported, no permission, no samples yet, a function this
        # driver lacks, even pynvml's own NVMLError(NVML_SUCCESS) for a card with no process
        # samples. A card that is really gone fails the reads that are not extras.
        try:
            return read()
        except AttributeError:  # bindings older than the function
            return None
        except nvml.NVMLError:
            return None

    def _process_sm(self, nvml: Any, index: int, handle: Any) -> dict[int, int] | None:
        """Each process's SM busy % over the samples since the last read (mean per pid);
        a process without a sample was idle. None where the card keeps no such samples."""
        since = self._seen_us.get(index, 0)
        try:
            samples = nvml.nvmlDeviceGetProcessUtilization(handle, since)
        except AttributeError:  # bindings older than the function
            return None
        except nvml.NVMLError as exc:
            # No sample since the last read (NOT_FOUND, or pynvml's NVMLError(NVML_SUCCESS)
            # for an empty answer): no process used the SMs. Anything else: not to be had.
            not_found = getattr(nvml, "NVMLError_NotFound", ())
            return {} if isinstance(exc, not_found) or getattr(exc, "value", None) == 0 else None
        by_pid: dict[int, list[int]] = {}
        for sample in samples:
            by_pid.setdefault(int(sample.pid), []).append(int(sample.smUtil))
            self._seen_us[index] = max(self._seen_us.get(index, 0), int(sample.timeStamp))
        return {pid: round(sum(sm) / len(sm)) for pid, sm in by_pid.items()}

    def _pcie_mbps(self, nvml: Any, handle: Any) -> float | None:
        """PCIe traffic both ways, MB/s (NVML counts KB/s over its last 20 ms)."""
        read = getattr(nvml, "nvmlDeviceGetPcieThroughput", None)
        if read is None:  # bindings older than the function
            return None
        counters = (
            getattr(nvml, "NVML_PCIE_UTIL_TX_BYTES", 0),
            getattr(nvml, "NVML_PCIE_UTIL_RX_BYTES", 1),
        )
        kbps = [self._extra(nvml, functools.partial(read, handle, c)) for c in counters]
        if any(value is None for value in kbps):
            return None
        return round(sum(int(value or 0) for value in kbps) / KB_PER_MB, 1)

    def _dram_bw_pct(self, nvml: Any, index: int, handle: Any) -> float | None:
        """DRAM bandwidth in % of peak between the last GPM sample and this one (GPM is
        Hopper's and later's; None elsewhere, and on the first read)."""
        support = self._extra(nvml, lambda: nvml.nvmlGpmQueryDeviceSupport(handle))
        if support is None or not support.isSupportedDevice:
            return None
        sample = self._extra(nvml, nvml.nvmlGpmSampleAlloc)
        if sample is None:
            return None
        if self._extra(nvml, lambda: nvml.nvmlGpmSampleGet(handle, sample)) is None:
            self._extra(nvml, lambda: nvml.nvmlGpmSampleFree(sample))
            return None
        previous, self._gpm[index] = self._gpm.get(index), sample
        if previous is None:
            return None
        value = self._extra(nvml, lambda: _gpm_dram_bw(nvml, previous, sample))
        self._extra(nvml, lambda: nvml.nvmlGpmSampleFree(previous))
        return value


def _gpm_dram_bw(nvml: Any, first: Any, second: Any) -> float | None:
    """NVML_GPM_METRIC_DRAM_BW_UTIL between two GPM samples of one card."""
    request = nvml.c_nvmlGpmMetricsGet_t()
    request.version = nvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = 1
    request.sample1, request.sample2 = first, second
    request.metrics[0].metricId = nvml.NVML_GPM_METRIC_DRAM_BW_UTIL
    answer = nvml.nvmlGpmMetricsGet(request).metrics[0]
    if int(answer.nvmlReturn) != 0:  # NVML_SUCCESS: this metric, this time
        return None
    return round(float(answer.value), 1)
