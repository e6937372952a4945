"""MIG instances are cards of their own, end to end: a simulated agent over real HTTP whose
one A100 is split into 3g.40gb, 2g.20gb and 1g.10gb instances reports the three, never the
card; the inventory keeps them as GPU rows typed from the policy's catalog; two jobs whose
memory fits the 3g.40gb and the 2g.20gb run side by side on that one physical card, each bound
to its instance by CUDA_VISIBLE_DEVICES=MIG-<uuid>, and end. Each test runs on SQLite,
PostgreSQL and MariaDB."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_world import Agent, job, make_cycle, ok, submit, until
from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.config import GpuType
from scheduler.notices.events import RecordingObserver
from storage.models import Allocation, Gpu, JobState

PY = sys.executable
SPEC = "1xA100-80GB:mig=3g.40gb+2g.20gb+1g.10gb"
# The catalog names each profile, cheapest smallest, so each job takes the least that fits.
MIG_TYPES = {
    "A100-MIG-3g.40gb": GpuType(memory_gib=40, speed=0.43, price_per_gpu_hour=0.9),
    "A100-MIG-2g.20gb": GpuType(memory_gib=20, speed=0.28, price_per_gpu_hour=0.6),
    # A glob on NVML's name works as well as the name's parts.
    "small-slice": GpuType(
        memory_gib=10, speed=0.14, price_per_gpu_hour=0.3, nvml_names=("*MIG 1g.10gb*",)
    ),
}


@pytest.fixture
def mig_agent(tmp_path: Path) -> Iterator[Agent]:
    agent = Agent("gpu-mig", SPEC, tmp_path / "gpu-mig")
    agent.start()
    yield agent
    agent.stop_all_jobs()
    agent.stop()


@pytest.fixture
def mig_world(paika: Paika, mig_agent: Agent) -> Paika:
    paika.policy = paika.policy.model_copy(
        update={
            "gpu_types": MIG_TYPES,
            "scheduler": paika.policy.scheduler.model_copy(update={"headroom": {}}),
        }
    )
    ok(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    ok(paika, "UADMIN", f"admin host add {mig_agent.name} url={mig_agent.url}")
    return paika


def _env_writer(tmp_path: Path, name: str) -> str:
    """A job that writes the cards it was given, then runs until `stop` appears."""
    out, stop = tmp_path / f"{name}.cards", tmp_path / "stop"
    path = tmp_path / f"{name}.py"
    path.write_text(
        "import os, time\n"
        f"open({str(out)!r}, 'w').write(os.environ['CUDA_VISIBLE_DEVICES'])\n"
        f"while not os.path.exists({str(stop)!r}):\n"
        "    time.sleep(0.05)\n"
    )
    return f"{PY} {path}"


def test_mig_instances_are_cards_and_two_jobs_share_one_physical_card(
    mig_world: Paika, clock: ManualClock, tmp_path: Path
) -> None:
    cycle = make_cycle(mig_world, RecordingObserver())
    submit(mig_world, "finetune", _env_writer(tmp_path, "finetune"), hours=2, extra="mem=30")
    submit(mig_world, "eval", _env_writer(tmp_path, "eval"), hours=2, extra="mem=15")
    cycle.run_once()

    with Session(mig_world.engine) as session:
        gpus = {gpu.index: gpu for gpu in session.exec(select(Gpu)).all()}
        open_rows = session.exec(select(Allocation).where(Allocation.ended_at.is_(None)))  # type: ignore[union-attr]
        held = {row.job_id: row.gpu_id for row in open_rows}
    # The three instances, under the numbers of card 0's slots; never the card itself.
    assert sorted(gpus) == [1000, 1001, 1002]
    assert {i: (g.gpu_type, round(g.memory_gib)) for i, g in gpus.items()} == {
        1000: ("A100-MIG-3g.40gb", 40),
        1001: ("A100-MIG-2g.20gb", 20),
        1002: ("small-slice", 10),
    }
    assert all((g.uuid or "").startswith("MIG-") for g in gpus.values())

    finetune, evaluation = job(mig_world, "finetune"), job(mig_world, "eval")
    assert finetune.state == evaluation.state == JobState.RUNNING
    by_id = {g.id: g for g in gpus.values()}
    assert by_id[held[finetune.id or 0]].index == 1000  # the 3g.40gb: the least that holds 30 GB
    assert by_id[held[evaluation.id or 0]].index == 1001  # the 2g.20gb for 15 GB

    until(
        cycle,
        clock,
        lambda: (tmp_path / "finetune.cards").exists() and (tmp_path / "eval.cards").exists(),
    )
    assert (tmp_path / "finetune.cards").read_text() == gpus[1000].uuid
    assert (tmp_path / "eval.cards").read_text() == gpus[1001].uuid
    # Both still run side by side on the one card.
    assert {job(mig_world, n).state for n in ("finetune", "eval")} == {JobState.RUNNING}

    (tmp_path / "stop").touch()
    until(
        cycle,
        clock,
        lambda: all(job(mig_world, n).state == JobState.SUCCEEDED for n in ("finetune", "eval")),
    )
