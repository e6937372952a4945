"""Just enough of pynvml for the agent's NVML reader, written by hand (no mock library).

Two cards. Card 0 (an H200) offers every reading: two processes (4242 with 2 GiB and SM
samples of 50 and 70 %, 4243 with memory NVML cannot say and no SM sample), utilization 87 %
with its memory controller 40 % busy, PCIe 1500 KB/s out and 2500 KB/s in, and GPM, whose
DRAM bandwidth between two samples is `dram_bw_pct`. Card 1 supports little: no memory, power,
per-process samples, PCIe counters or GPM.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

DRAM_BW_METRIC = 3  # NVML_GPM_METRIC_DRAM_BW_UTIL's number in nvml.h


class FakeNvml:
    NVML_TEMPERATURE_GPU = 0
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1
    NVML_GPM_METRICS_GET_VERSION = 1
    NVML_GPM_METRIC_DRAM_BW_UTIL = DRAM_BW_METRIC

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's name
        pass

    class NVMLError_NotFound(NVMLError):  # noqa: N801 - pynvml's name
        pass

    class c_nvmlGpmMetricsGet_t:  # noqa: N801 - pynvml's name
        def __init__(self) -> None:
            self.version = self.numMetrics = 0
            self.sample1: Any = None
            self.sample2: Any = None
            self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0)]

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.dram_bw_pct = 61.25
        self.gpm_samples: list[Any] = []  # allocated and not freed
        self.seen_since: list[int] = []  # the timestamps asked for per-process samples

    def nvmlInit(self) -> None:  # noqa: N802
        self.calls.append("init")

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> Any:  # noqa: N802
        return f"GPU-fake-{handle}".encode() if handle else f"GPU-fake-{handle}"

    def nvmlDeviceGetName(self, handle: int) -> str:  # noqa: N802
        return "NVIDIA H200"

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:  # noqa: N802
        if handle == 1:
            raise self.NVMLError_NotSupported()
        return SimpleNamespace(total=143771 * 1024 * 1024, used=1024 * 1024 * 1024, free=0)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:  # noqa: N802
        return SimpleNamespace(gpu=87, memory=40)

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:  # noqa: N802
        assert sensor == self.NVML_TEMPERATURE_GPU
        return 61

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:  # noqa: N802
        if handle == 1:
            raise self.NVMLError_NotSupported()
        return 512_345

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[Any]:  # noqa: N802
        if handle == 1:
            return []
        return [
            SimpleNamespace(pid=4242, usedGpuMemory=2048 * 1024 * 1024),
            SimpleNamespace(pid=4243, usedGpuMemory=None),
        ]

    def nvmlDeviceGetProcessUtilization(self, handle: int, since: int) -> list[Any]:  # noqa: N802
        if handle == 1:
            raise self.NVMLError_NotSupported()
        self.seen_since.append(since)
        samples = [
            SimpleNamespace(pid=4242, timeStamp=1_000, smUtil=50, memUtil=20),
            SimpleNamespace(pid=4242, timeStamp=2_000, smUtil=70, memUtil=30),
        ]
        fresh = [s for s in samples if s.timeStamp > since]
        if not fresh:
            raise self.NVMLError_NotFound()
        return fresh

    def nvmlDeviceGetPcieThroughput(self, handle: int, counter: int) -> int:  # noqa: N802
        if handle == 1:
            raise self.NVMLError_NotSupported()
        return 1500 if counter == self.NVML_PCIE_UTIL_TX_BYTES else 2500

    def nvmlGpmQueryDeviceSupport(self, handle: int) -> Any:  # noqa: N802
        return SimpleNamespace(version=1, isSupportedDevice=int(handle == 0))

    def nvmlGpmSampleAlloc(self) -> Any:  # noqa: N802
        sample = SimpleNamespace(taken=False)
        self.gpm_samples.append(sample)
        return sample

    def nvmlGpmSampleGet(self, handle: int, sample: Any) -> Any:  # noqa: N802
        sample.taken = True
        return sample

    def nvmlGpmSampleFree(self, sample: Any) -> None:  # noqa: N802
        self.gpm_samples.remove(sample)

    def nvmlGpmMetricsGet(self, request: Any) -> Any:  # noqa: N802
        assert request.version == self.NVML_GPM_METRICS_GET_VERSION and request.numMetrics == 1
        assert request.sample1.taken and request.sample2.taken
        metric = request.metrics[0]
        assert metric.metricId == DRAM_BW_METRIC
        metric.value = self.dram_bw_pct
        return request
