"""GPU readers: the spec parser, simulated GPUs that follow jobs, and NVML without a GPU."""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest
from agent_harness import PY, Agent, wait_for
from fake_nvml import FakeNvml

from scheduler.agent.errors import GpuReadError, SpecError
from scheduler.agent.gpus import GpuLoad
from scheduler.agent.nvml import NvmlReader, load_pynvml
from scheduler.agent.protocol import GpuInfo, GpuProcess, StartRequest
from scheduler.agent.simulated import SimulatedReader, parse_spec


def test_the_spec_names_the_gpus_and_their_memory() -> None:
    gpus = SimulatedReader("4xA100-80GB, 2xT4-16GB,1xRTX-4090,H100-94gb", host="h").read()
    assert [g.index for g in gpus] == list(range(8))
    assert [g.name for g in gpus][3:6] == ["NVIDIA A100-80GB", "NVIDIA T4-16GB", "NVIDIA T4-16GB"]
    assert gpus[0].memory_total_mib == 81920
    assert gpus[4].memory_total_mib == 16384
    assert gpus[6].name == "NVIDIA RTX-4090" and gpus[6].memory_total_mib == 16384  # no size
    assert gpus[7].memory_total_mib == 94 * 1024
    assert all(g.utilization_pct == 0 and g.memory_used_mib == 0 for g in gpus)
    assert all(g.processes == () and g.job_id is None for g in gpus)


def test_simulated_uuids_are_stable_per_host_and_index() -> None:
    a1 = [g.uuid for g in SimulatedReader("3xT4", host="node-a").read()]
    a2 = [g.uuid for g in SimulatedReader("3xT4", host="node-a").read()]
    b = [g.uuid for g in SimulatedReader("3xT4", host="node-b").read()]
    assert a1 == a2
    assert len(set(a1 + b)) == 6
    assert all(u.startswith("GPU-") for u in a1)


@pytest.mark.parametrize(
    ("spec", "bad_part"),
    [
        ("4xA100-80GB,2*T4", '"2*T4"'),
        ("0xA100", '"0xA100"'),
        ("4xA100,", '""'),
        ("4x", '"4x"'),
        ("4xA100 80GB", '"4xA100 80GB"'),
        ("A100-0GB", '"A100-0GB"'),
    ],
)
def test_a_bad_spec_names_the_bad_part_and_shows_an_example(spec: str, bad_part: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(spec)
    message = caught.value.message
    assert f"bad GPU spec part {bad_part}" in message
    assert '"4xA100-80GB,2xT4-16GB"' in message


def test_an_empty_spec_is_an_error() -> None:
    with pytest.raises(SpecError, match="empty GPU spec"):
        parse_spec("  ")


class _Loads:
    def __init__(self, loads: list[GpuLoad]) -> None:
        self.loads = loads

    def gpu_loads(self) -> list[GpuLoad]:
        return self.loads


def test_simulated_load_is_deterministic_and_within_90_to_98() -> None:
    loads = _Loads([GpuLoad(gpu=0, pid=10, job_id="j"), GpuLoad(gpu=1, pid=10, job_id="j")])
    seen: set[int] = set()
    for second in range(0, 300, 5):
        clock = functools.partial(float, second)
        reader = SimulatedReader("2xA100-40GB", host="h", loads=loads, clock=clock)
        again = SimulatedReader("2xA100-40GB", host="h", loads=loads, clock=clock)
        gpus = reader.read()
        assert gpus == again.read()
        for gpu in gpus:
            assert gpu.utilization_pct is not None and 90 <= gpu.utilization_pct <= 98
            assert gpu.memory_used_mib == int(40 * 1024 * 0.7)
            seen.add(gpu.utilization_pct)
    assert len(seen) > 3  # it does jitter


def test_simulated_gpus_follow_the_jobs_over_http(agent: Agent) -> None:
    busy = StartRequest(job_id="busy", gpus=[0, 4], argv=["sleep", "30"])
    idle = StartRequest(
        job_id="idle",
        gpus=[1],
        argv=["sleep", "30"],
        env={"PAIKA_SIM_UTILIZATION": "3", "PAIKA_SIM_MEMORY_MIB": "1234"},
    )
    busy_pid = agent.client.start_job(busy).pid
    idle_pid = agent.client.start_job(idle).pid
    gpus = {g.index: g for g in agent.client.gpus()}
    for index, total in ((0, 81920), (4, 16384)):
        gpu = gpus[index]
        assert gpu.job_id == "busy"
        assert gpu.utilization_pct is not None and 90 <= gpu.utilization_pct <= 98
        assert gpu.memory_used_mib == int(total * 0.7)
        assert [p.pid for p in gpu.processes] == [busy_pid]
    assert (gpus[1].job_id, gpus[1].utilization_pct, gpus[1].memory_used_mib) == ("idle", 3, 1234)
    assert [p.pid for p in gpus[1].processes] == [idle_pid]
    assert (gpus[2].job_id, gpus[2].utilization_pct, gpus[2].memory_used_mib) == (None, 0, 0)

    agent.client.stop_job("busy", grace_s=0)
    agent.wait_ended("busy")
    gpu0 = agent.client.gpus()[0]
    assert (gpu0.job_id, gpu0.utilization_pct, gpu0.memory_used_mib, gpu0.processes) == (
        None,
        0,
        0,
        (),
    )


def test_a_short_job_frees_its_simulated_gpu_when_it_exits(agent: Agent) -> None:
    agent.client.start_job(StartRequest(job_id="blip", gpus=[5], argv=[PY, "-c", "pass"]))
    wait_for(lambda: agent.client.gpus()[5].utilization_pct == 0, what="GPU 5 to go idle")


# ---------------------------------------------------------------- NVML


def _nvml_present() -> bool:
    nvml = load_pynvml()
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return False
    nvml.nvmlShutdown()
    return True


def test_nvml_without_a_driver_fails_with_a_clear_agent_error() -> None:
    if _nvml_present():
        pytest.skip("this machine has a working NVIDIA driver")
    with pytest.raises(GpuReadError) as caught:
        NvmlReader().read()
    assert caught.value.status == 503
    assert "NVIDIA driver" in caught.value.message and "--simulate" in caught.value.message


def test_nvml_reads_real_gpus_when_there_are_some() -> None:
    if not _nvml_present():
        pytest.skip("no NVIDIA driver on this machine")
    reader = NvmlReader()
    try:
        gpus = reader.read()
    finally:
        reader.close()
    assert gpus and all(isinstance(g, GpuInfo) and g.uuid.startswith("GPU-") for g in gpus)


def test_nvml_fields_are_converted_and_unsupported_ones_are_none() -> None:
    fake = FakeNvml()
    reader = NvmlReader(library=fake)
    first, second = reader.read()
    reader.read()
    reader.close()
    assert fake.calls == ["init", "shutdown"]
    assert first == GpuInfo(
        index=0,
        uuid="GPU-fake-0",
        name="NVIDIA H200",
        memory_total_mib=143771,
        memory_used_mib=1024,
        utilization_pct=87,
        temperature_c=61,
        power_w=512.3,
        processes=(
            GpuProcess(pid=4242, used_memory_mib=2048, sm_pct=60),
            GpuProcess(pid=4243, used_memory_mib=None, sm_pct=0),
        ),
        memory_busy_pct=40,
        pcie_mbps=4.0,
        dram_bw_pct=None,  # GPM needs two samples: this was the first
    )
    assert second.uuid == "GPU-fake-1"  # bytes decoded
    assert (second.memory_total_mib, second.memory_used_mib, second.power_w) == (None, None, None)
    assert (second.pcie_mbps, second.dram_bw_pct) == (None, None)
    assert second.memory_free_mib is None and first.memory_free_mib == 143771 - 1024


def test_other_nvml_errors_become_gpu_read_errors() -> None:
    fake = FakeNvml()

    def lost(handle: int) -> str:
        raise fake.NVMLError("GPU is lost")

    fake.nvmlDeviceGetName = lost  # type: ignore[method-assign]
    with pytest.raises(GpuReadError, match="GPU is lost"):
        NvmlReader(library=fake).read()


def test_importing_the_agent_does_not_import_pynvml() -> None:
    code = (
        "import sys, scheduler.agent.app, scheduler.agent.client, scheduler.agent.command, "
        "scheduler.agent.nvml; assert 'pynvml' not in sys.modules, 'pynvml imported'"
    )
    subprocess.run([sys.executable, "-W", "error", "-c", code], check=True)
