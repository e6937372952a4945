"""Shared cards on the hosts, over real HTTP with simulated agents: a host the policy does not
name shares nothing; an agent lets runs with a share sit on one card but never beside a
whole-card run; with advisory caps a run past its declared memory, on a card running short, is
stopped and says why, never its neighbour (with MPS the driver's limit holds instead); a host
without MPS refuses an MPS share, saying what to do."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from agent_world import TOKEN, Agent, job, make_cycle, submit
from shared_world import open_parts, share_hosts

from scheduler.agent.client import AgentClient
from scheduler.agent.errors import AgentError
from scheduler.agent.jobs import JobStore
from scheduler.agent.protocol import ShareSpec, StartRequest
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.hosts.poll import Target, poll_all_sync
from scheduler.hosts.report import HostReport
from scheduler.notices.events import RecordingObserver
from storage.models import JobState


def test_a_host_the_policy_does_not_name_shares_nothing(
    world: Paika, clock: ManualClock, agents: dict[str, Agent], tmp_path: Path
) -> None:
    share_hosts(world, {"gpu-b": "advisory"})  # not the A100 host
    cycle = make_cycle(world, RecordingObserver())
    for name in ("eval-a", "eval-b"):
        submit(world, name, "sleep 30", extra="type=A100-80GB share=yes mem=20")
    cycle.run_once()
    parts = open_parts(world)
    assert len(parts) == 2 and all(held[0][1] == 1000 for held in parts.values())
    for name in ("eval-a", "eval-b"):
        assert job(world, name).state == JobState.RUNNING


def _start_shared(
    host: Agent, run: str, *, mode: str, declared_mib: int, uses_mib: int | None
) -> None:
    env = {} if uses_mib is None else {"PAIKA_SIM_MEMORY_MIB": str(uses_mib)}
    share = ShareSpec(mode=mode, memory_mib=declared_mib)
    with AgentClient(host.url, TOKEN) as client:
        client.start_job(
            StartRequest(job_id=run, gpus=[0], argv=["sleep", "30"], env=env, share=share)
        )


def _poll(host: Agent) -> HostReport:
    report = poll_all_sync([Target(host.name, host.url)], TOKEN, timeout=2.0)[host.name]
    assert report.ok
    return report


def test_a_run_past_its_memory_on_a_short_card_is_stopped_never_its_neighbour(
    agents: dict[str, Agent],
) -> None:
    host = agents["gpu-a"]  # 80 GiB cards: 81,920 MiB
    _start_shared(host, "1.1", mode="advisory", declared_mib=20480, uses_mib=None)  # 16,384
    _start_shared(host, "2.1", mode="advisory", declared_mib=20480, uses_mib=70000)
    _poll(host)
    store = host.store
    assert store is not None
    over, neighbour = store.known("2.1"), store.known("1.1")
    assert over is not None and over.stop_requested
    assert (over.stopped_for, over.used_memory_mib) == ("over_memory", 70000)
    assert neighbour is not None and not neighbour.stop_requested
    # The scheduler reads why from the run's record.
    seen = _poll(host).jobs["2.1"]
    assert (seen.stopped_for, seen.used_memory_mib) == ("over_memory", 70000)


def test_a_run_past_its_memory_is_left_alone_while_the_card_has_room_or_mps_limits_it(
    agents: dict[str, Agent],
) -> None:
    host = agents["gpu-a"]
    _start_shared(host, "1.1", mode="advisory", declared_mib=20480, uses_mib=None)
    _start_shared(host, "2.1", mode="advisory", declared_mib=20480, uses_mib=50000)  # room left
    host_b = agents["gpu-b"]  # 16 GiB cards: MPS's own limit holds there, not the agent's
    _start_shared(host_b, "3.1", mode="mps", declared_mib=4096, uses_mib=None)
    _start_shared(host_b, "4.1", mode="mps", declared_mib=4096, uses_mib=16000)
    _poll(host)
    _poll(host_b)
    for agent, run in ((host, "2.1"), (host_b, "4.1")):
        assert agent.store is not None
        kept = agent.store.known(run)
        assert kept is not None and not kept.stop_requested and kept.stopped_for is None


def test_a_whole_card_run_and_a_shared_run_never_share_a_card(agents: dict[str, Agent]) -> None:
    host = agents["gpu-a"]
    shared = ShareSpec(mode="advisory", memory_mib=1024)
    with AgentClient(host.url, TOKEN) as client:
        client.start_job(StartRequest(job_id="1.1", gpus=[0], argv=["sleep", "30"]))
        client.start_job(StartRequest(job_id="2.1", gpus=[1], argv=["sleep", "30"], share=shared))
        for run, card, share in (("3.1", 0, shared), ("4.1", 1, None)):
            with pytest.raises(AgentError) as refused:
                client.start_job(
                    StartRequest(job_id=run, gpus=[card], argv=["sleep", "30"], share=share)
                )
            assert refused.value.status == 409
        # Beside another shared run, a shared run starts.
        client.start_job(StartRequest(job_id="5.1", gpus=[1], argv=["sleep", "30"], share=shared))


@pytest.mark.skipif(
    shutil.which("nvidia-cuda-mps-control") is not None, reason="this host has NVIDIA's MPS"
)
def test_a_host_without_mps_refuses_an_mps_share_and_says_what_to_do(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "agent", allow_root_jobs=True)  # real GPUs: no simulation
    try:
        with pytest.raises(AgentError) as refused:
            store.start(
                StartRequest(
                    job_id="1.1",
                    gpus=[0],
                    argv=["true"],
                    share=ShareSpec(mode="mps", memory_mib=1024),
                )
            )
        assert refused.value.status == 409
        assert "nvidia-cuda-mps-control" in refused.value.message
        assert "advisory" in refused.value.message
        assert store.known("1.1") is None  # nothing was launched or kept
    finally:
        store.close()
