"""A poll carries what each running run does to its cards, as its agent sampled it."""

from __future__ import annotations

from agent_world import TOKEN, Agent

from scheduler.agent.client import AgentClient
from scheduler.agent.protocol import StartRequest
from scheduler.hosts.poll import Target, poll_all_sync
from scheduler.hosts.report import CardSample


def test_a_poll_reports_each_running_runs_samples(agents: dict[str, Agent]) -> None:
    host = agents["gpu-a"]
    load = {
        "PAIKA_SIM_UTILIZATION": "35",
        "PAIKA_SIM_MEMORY_MIB": "20000",
        "PAIKA_SIM_GMEM_UTIL": "12",
        "PAIKA_SIM_PCIE_MBPS": "900",
    }
    with AgentClient(host.url, TOKEN) as client:
        client.start_job(StartRequest(job_id="3.1", gpus=[1], argv=["sleep", "30"], env=load))
        client.start_job(StartRequest(job_id="4.1", gpus=[0], argv=["true"]))
    report = poll_all_sync([Target(host.name, host.url)], TOKEN, timeout=2.0)[host.name]
    assert report.ok
    assert (
        CardSample(
            run="3.1",
            gpu=1,
            memory_mib=20000,
            memory_peak_mib=20000,
            sm_pct=35.0,
            memory_busy_pct=12.0,
            pcie_mbps=900.0,
            dram_bw_pct=None,
            sm_own=True,  # the simulated card tells its processes apart
        )
        in report.samples
    )
    assert {s.run for s in report.samples} <= {"3.1", "4.1"}  # ended runs have none
