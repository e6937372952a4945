"""What each job does to its cards: NVML's per-process and bandwidth readings, whose
processes are whose, and the per-job samples of the status answer over real HTTP."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from agent_harness import Agent, wait_for
from fake_nvml import FakeNvml

from scheduler.agent.nvml import NvmlReader
from scheduler.agent.protocol import GpuInfo, GpuProcess, JobSample, StartRequest, Status
from scheduler.agent.sampling import JobProcesses, Sampler, owner_of

# ---------------------------------------------------------------- NVML


class _OldNvml(FakeNvml):
    """Bindings from before per-process samples, PCIe counters and GPM."""

    NEWER = frozenset(
        {"nvmlDeviceGetProcessUtilization", "nvmlDeviceGetPcieThroughput"}
        | {"nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmMetricsGet"}
    )

    def __getattribute__(self, name: str) -> Any:
        if name in _OldNvml.NEWER:
            raise AttributeError(name)
        return super().__getattribute__(name)


def test_nvml_reads_dram_bandwidth_between_two_gpm_samples_and_frees_them() -> None:
    fake = FakeNvml()
    reader = NvmlReader(library=fake)
    first, _ = reader.read()
    second, limited = reader.read()
    assert first.dram_bw_pct is None  # one sample is no interval
    assert second.dram_bw_pct == 61.2  # rounded to a tenth
    assert limited.dram_bw_pct is None  # no GPM on this card
    assert len(fake.gpm_samples) == 1  # only the newest is kept
    reader.close()
    assert fake.gpm_samples == []


def test_nvml_asks_only_for_process_samples_it_has_not_seen() -> None:
    fake = FakeNvml()
    reader = NvmlReader(library=fake)
    first, _ = reader.read()
    second, _ = reader.read()
    assert fake.seen_since == [0, 2_000]
    assert [p.sm_pct for p in first.processes] == [60, 0]
    # Nothing new since the last read: no process used the SMs (not "unknown").
    assert [p.sm_pct for p in second.processes] == [0, 0]


def test_a_reading_the_card_or_the_bindings_do_not_offer_is_none_never_an_error() -> None:
    fake = FakeNvml()
    _, limited = NvmlReader(library=fake).read()
    assert (limited.pcie_mbps, limited.dram_bw_pct, limited.memory_total_mib) == (None,) * 3
    old, _ = NvmlReader(library=_OldNvml()).read()
    assert (old.pcie_mbps, old.dram_bw_pct) == (None, None)
    assert [p.sm_pct for p in old.processes] == [None, None]
    assert old.memory_busy_pct == 40  # utilization.memory is as old as NVML itself


# ---------------------------------------------------------------- whose processes


def _proc(root: Path, pid: int, *, session: int, cgroup: str) -> None:
    (root / str(pid)).mkdir(parents=True)
    # pid (name with ') ' in it) state ppid pgrp session …
    (root / str(pid) / "stat").write_text(f"{pid} (py) thon) S 1 {session} {session} 0 0\n")
    (root / str(pid) / "cgroup").write_text(f"0::{cgroup}\n")


def test_a_process_that_left_the_jobs_session_is_still_its_by_cgroup(tmp_path: Path) -> None:
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "mountinfo").write_text(
        "35 24 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw\n"
    )
    job_cgroup = "/sys/fs/cgroup/agent.service/paika/t1/j1"
    _proc(tmp_path, 500, session=500, cgroup="/agent.service/paika/t1/j1/worker")
    _proc(tmp_path, 600, session=600, cgroup="/j1")  # same last name, not below the job's
    jobs = [JobProcesses("j1", 100, (0,), job_cgroup), JobProcesses("j2", 200, (1,))]
    assert owner_of(500, jobs, tmp_path) == "j1"
    assert owner_of(600, jobs, tmp_path) is None
    _proc(tmp_path, 700, session=200, cgroup="/user.slice")
    assert owner_of(700, jobs, tmp_path) == "j2"  # j2's wrapper leads its session
    assert owner_of(800, jobs, tmp_path) is None  # gone


def test_a_child_of_a_jobs_wrapper_is_the_jobs_by_its_session() -> None:
    with subprocess.Popen(
        ["sh", "-c", "sleep 30 & echo $!; wait"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as leader:
        try:
            assert leader.stdout is not None
            child = int(leader.stdout.readline())
            jobs = [JobProcesses("other", 1, (1,)), JobProcesses("j", leader.pid, (0,))]
            assert owner_of(child, jobs) == "j"
            assert owner_of(child, jobs[:1]) is None
        finally:
            os.killpg(leader.pid, signal.SIGKILL)  # the leader and its sleep: one group


# ---------------------------------------------------------------- samples


def _card(*processes: GpuProcess, **readings: Any) -> GpuInfo:
    base: dict[str, Any] = {"index": 0, "uuid": "GPU-0", "name": "NVIDIA H200"}
    return GpuInfo(**{**base, "utilization_pct": 80, "processes": processes, **readings})


def test_a_job_is_charged_its_own_processes_and_its_peak_memory(tmp_path: Path) -> None:
    sampler = Sampler(proc=tmp_path)  # an empty /proc: only the wrappers' own pids are known
    jobs = [JobProcesses("a", 10, (0,)), JobProcesses("b", 20, (0,))]
    card = _card(
        GpuProcess(pid=10, used_memory_mib=3000, sm_pct=30),
        GpuProcess(pid=20, used_memory_mib=9000, sm_pct=45),
        GpuProcess(pid=99, used_memory_mib=500, sm_pct=5),  # nobody's
        memory_busy_pct=35,
        pcie_mbps=120.5,
    )
    a, b = sampler.samples([card], jobs)
    assert a == JobSample(
        job_id="a",
        gpu=0,
        memory_mib=3000,
        memory_peak_mib=3000,
        sm_pct=30,
        sm_own=True,
        memory_busy_pct=35,
        pcie_mbps=120.5,
    )
    assert (b.memory_mib, b.sm_pct) == (9000, 45)
    smaller = _card(GpuProcess(pid=10, used_memory_mib=1000, sm_pct=0))
    a, b = sampler.samples([smaller], jobs)
    assert (a.memory_mib, a.memory_peak_mib) == (1000, 3000)
    assert (b.memory_mib, b.memory_peak_mib, b.sm_pct) == (0, 9000, 0)
    sampler.samples([smaller], jobs[:1])  # b ended: its peak goes
    (b_again,) = sampler.samples([smaller], jobs[1:])
    assert b_again.memory_peak_mib == 0


def test_without_per_process_samples_a_job_gets_its_cards_figure(tmp_path: Path) -> None:
    card = _card(GpuProcess(pid=10, used_memory_mib=None), utilization_pct=77)
    (sample,) = Sampler(proc=tmp_path).samples([card], [JobProcesses("a", 10, (0,))])
    assert (sample.sm_pct, sample.sm_own, sample.memory_mib, sample.memory_peak_mib) == (
        77,
        False,
        None,
        None,
    )
    assert (sample.memory_busy_pct, sample.pcie_mbps, sample.dram_bw_pct) == (None, None, None)


def test_a_container_job_alone_on_its_card_takes_the_runtimes_processes(tmp_path: Path) -> None:
    card = _card(GpuProcess(pid=777, used_memory_mib=4000, sm_pct=50))
    alone = [JobProcesses("c", 10, (0,), container=True)]
    (sample,) = Sampler(proc=tmp_path).samples([card], alone)
    assert (sample.memory_mib, sample.sm_pct) == (4000, 50)
    shared = [*alone, JobProcesses("d", 20, (0,), container=True)]
    c, d = Sampler(proc=tmp_path).samples([card], shared)
    assert (c.memory_mib, d.memory_mib) == (0, 0)  # whose it is cannot be told: nobody's


# ---------------------------------------------------------------- over HTTP


def _samples(status: Status) -> dict[tuple[str, int], JobSample]:
    return {(s.job_id, s.gpu): s for s in status.samples}


def test_two_jobs_on_a_simulated_agent_each_show_their_memory_and_load(agent: Agent) -> None:
    light = StartRequest(
        job_id="eval",
        gpus=[0],
        argv=["sleep", "30"],
        env={
            "PAIKA_SIM_UTILIZATION": "20",
            "PAIKA_SIM_MEMORY_MIB": "6000",
            "PAIKA_SIM_GMEM_UTIL": "8",
            "PAIKA_SIM_PCIE_MBPS": "150",
        },
    )
    heavy = StartRequest(job_id="train", gpus=[1, 2], argv=["sleep", "30"])
    agent.client.start_job(light)
    agent.client.start_job(heavy)
    samples = _samples(agent.client.status(since="0"))
    assert set(samples) == {("eval", 0), ("train", 1), ("train", 2)}
    eval_ = samples[("eval", 0)]
    assert (eval_.memory_mib, eval_.memory_peak_mib, eval_.sm_pct, eval_.sm_own) == (
        6000,
        6000,
        20,
        True,
    )
    assert (eval_.memory_busy_pct, eval_.pcie_mbps, eval_.dram_bw_pct) == (8, 150.0, None)
    train = samples[("train", 2)]
    assert train.memory_mib == int(80 * 1024 * 0.7)
    assert train.sm_pct is not None and 90 <= train.sm_pct <= 98
    assert train.memory_busy_pct == round(train.sm_pct * 0.5)
    agent.client.stop_job("eval", grace_s=0)
    agent.wait_ended("eval")
    wait_for(
        lambda: set(_samples(agent.client.status(since="0"))) == {("train", 1), ("train", 2)},
        what="the ended job's samples to go",
    )


def test_an_older_agents_status_without_samples_still_reads() -> None:
    old = (
        b'{"health": {"status": "ok", "agent_version": "0.9", "api_version": 1, "host": "h"},'
        b' "gpus": [{"index": 0, "uuid": "GPU-0", "name": "T4", "processes": [{"pid": 1}]}],'
        b' "jobs": []}'
    )
    status = Status.from_json(old)
    assert status.samples == [] and status.gpus[0].memory_busy_pct is None
    assert status.gpus[0].processes[0].sm_pct is None
