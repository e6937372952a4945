"""MIG instances are cards of their own: the NVML reader offers a card's instances, never the
card (and changes nothing on it), a simulated spec names instances, and a run on one is bound
to it by its UUID, in its environment and in its container's --gpus."""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_harness import ALLOW_ROOT_JOBS, TOKEN, wait_for
from fake_mig_nvml import FakeMigNvml, mig_uuid

from scheduler.agent.app import build_app
from scheduler.agent.client import AgentClient
from scheduler.agent.errors import SpecError
from scheduler.agent.jobs import JobStore, cuda_devices
from scheduler.agent.nvml import NvmlReader
from scheduler.agent.protocol import GpuInfo, GpuProcess, JobState, StartRequest, mig_index
from scheduler.agent.simulated import SimulatedReader, parse_spec
from scheduler.serving import serve_in_thread, stop_server

PY = sys.executable

# ---------------------------------------------------------------- the NVML reader


def test_a_card_with_mig_on_is_offered_as_its_instances_only() -> None:
    fake = FakeMigNvml()
    reader = NvmlReader(library=fake)
    whole, big, small = reader.read()
    reader.close()
    assert whole.index == 0 and whole.mig_uuid is None and whole.mig_parent_index is None
    # Slots 0 and 2 of card 1 (slot 1 is empty); the card itself is not among them.
    assert (big.index, small.index) == (mig_index(1, 0), mig_index(1, 2)) == (1100, 1102)
    assert big == GpuInfo(
        index=1100,
        uuid=mig_uuid(0),
        name="NVIDIA H200 MIG 3g.71gb",
        memory_total_mib=72_704,
        memory_used_mib=512,
        utilization_pct=None,  # an instance has none
        temperature_c=55,  # its card's
        power_w=None,  # the card's power is not this instance's
        processes=(GpuProcess(pid=5151, used_memory_mib=None, sm_pct=None),),
        memory_busy_pct=None,
        pcie_mbps=None,
        dram_bw_pct=None,
        mig_uuid="MIG-fake-1-0",
        mig_parent_index=1,
    )
    assert (small.name, small.memory_total_mib, small.processes) == (
        "NVIDIA H200 MIG 1g.18gb",
        18_176,
        (),
    )
    assert fake.changes == []  # never a MIG setting changed


def test_a_card_with_mig_off_is_offered_whole() -> None:
    gpus = NvmlReader(library=FakeMigNvml(mig_on=False)).read()
    assert [(g.index, g.uuid, g.mig_uuid) for g in gpus] == [
        (0, "GPU-fake-0", None),
        (1, "GPU-fake-1", None),
    ]


def test_a_card_whose_instances_cannot_be_counted_offers_nothing_and_fails_no_read() -> None:
    fake = FakeMigNvml()

    def no_count(handle: object) -> int:
        raise fake.NVMLError_NotSupported()

    fake.nvmlDeviceGetMaxMigDeviceCount = no_count  # type: ignore[method-assign]
    assert [g.index for g in NvmlReader(library=fake).read()] == [0]


def test_the_instance_numbers_never_meet_whole_cards() -> None:
    numbers = {mig_index(card, slot) for card in range(64) for slot in range(100)}
    assert len(numbers) == 6400 and min(numbers) > 63


# ---------------------------------------------------------------- simulated cards


def test_a_simulated_spec_names_mig_instances() -> None:
    reader = SimulatedReader("1xT4-16GB,1xA100-80GB:mig=3g.40gb+2g.20gb+1g.10gb+me", host="h")
    gpus = reader.read()
    assert [(g.index, g.name, g.memory_total_mib, g.mig_parent_index) for g in gpus] == [
        (0, "NVIDIA T4-16GB", 16384, None),
        (1100, "NVIDIA A100-80GB MIG 3g.40gb", 40960, 1),
        (1101, "NVIDIA A100-80GB MIG 2g.20gb", 20480, 1),
        (1102, "NVIDIA A100-80GB MIG 1g.10gb+me", 10240, 1),
    ]
    instances = gpus[1:]
    assert all(g.uuid == g.mig_uuid and g.uuid.startswith("MIG-") for g in instances)
    assert len({g.uuid for g in gpus}) == 4 and gpus[0].uuid.startswith("GPU-")
    assert reader.read() == gpus  # stable


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("1xA100-80GB:mig=4g.40gb+4g.40gb", "take 8 compute slices"),
        ("1xA100-40GB:mig=3g.40gb+1g.10gb", "50 GB: more than the card has"),
        ("1xA100-80GB:mig=3g.40", 'bad MIG profile "3g.40"'),
        ("1xA100-80GB:mig=8g.80gb", 'bad MIG profile "8g.80gb"'),
        ("1xA100-80GB:mog=1g.10gb", "only mig=PROFILE+PROFILE"),
        ("1xA100-80GB:mig=", "only mig=PROFILE+PROFILE"),
    ],
)
def test_a_wrong_mig_spec_says_what_is_wrong(spec: str, said: str) -> None:
    with pytest.raises(SpecError, match=re.escape(said)) as caught:
        parse_spec(spec)
    assert "e.g." in str(caught.value)


# ---------------------------------------------------------------- runs on an instance


@pytest.fixture
def mig_agent(tmp_path: Path) -> Iterator[tuple[AgentClient, JobStore]]:
    """An agent over real HTTP reading the fake NVML's cards; containers run `true`."""
    runtime = shutil.which("true")
    assert runtime is not None
    store = JobStore(
        tmp_path / "state",
        poll_interval_s=0.05,
        allow_root_jobs=ALLOW_ROOT_JOBS,
        container_runtime=runtime,
        use_cgroups=False,
    )
    reader = NvmlReader(library=FakeMigNvml())
    server, thread, port = serve_in_thread(build_app(reader, store, TOKEN))
    client = AgentClient(f"http://127.0.0.1:{port}", TOKEN)
    yield client, store
    stop_server(server, thread)
    client.close()
    store.close()
    reader.close()


def test_a_run_on_an_instance_sees_it_by_its_uuid(
    mig_agent: tuple[AgentClient, JobStore],
) -> None:
    client, _ = mig_agent
    script = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"
    client.start_job(StartRequest(job_id="on-mig", gpus=[1102], argv=[PY, "-c", script]))
    client.start_job(StartRequest(job_id="whole", gpus=[0], argv=[PY, "-c", script]))
    for job_id in ("on-mig", "whole"):
        wait_for(lambda: client.job(job_id).state is not JobState.RUNNING, 10, job_id)  # noqa: B023
    assert client.log("on-mig").lines == (mig_uuid(2),)
    assert client.log("whole").lines == ("0",)
    # The card itself is not there to be asked for.
    with pytest.raises(Exception, match="no GPU 1"):
        client.start_job(StartRequest(job_id="parent", gpus=[1], argv=["true"]))


def test_a_container_on_an_instance_is_given_it_by_its_uuid(
    mig_agent: tuple[AgentClient, JobStore],
) -> None:
    client, _ = mig_agent
    job = client.start_job(
        StartRequest(job_id="boxed", gpus=[1100], argv=["python", "eval.py"], image="ubuntu")
    )
    assert job.command[job.command.index("--gpus") + 1] == f'"device={mig_uuid(0)}"'


def test_cards_are_named_by_index_and_instances_by_uuid() -> None:
    assert cuda_devices([3, 1]) == "3,1"
    assert cuda_devices([0, 1100], {1100: "MIG-a", 1101: "MIG-b"}) == "0,MIG-a"
