"""Shared cards through the cycle, end to end with simulated agents over real HTTP: two
`share=yes` jobs whose earlier runs were light run on one card of a host the policy lets share
(MPS), each told its memory limit and its share of the card's SMs; the card's booked part is
their sum; a core job takes the card back (both are stopped and requeued, and run again when it
is done); the ledger charges each its part of the card. Jobs nobody knows never share a card.
Each test runs on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

from agent_world import Agent, job, make_cycle, submit, until
from paika_test_profiles import ran_before
from shared_world import booked, open_parts, share_hosts
from sqlmodel import Session, col, select

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.notices.events import RecordingObserver
from storage.models import Allocation, JobState, LedgerEntry
from storage.queries import cluster as cluster_queries

PY = sys.executable


def _env_writer(tmp_path: Path, name: str) -> str:
    """A job that writes what it was told about its card, then runs until `stop` appears."""
    out, stop = tmp_path / f"{name}.env", tmp_path / "stop"
    body = f"""
import os, time
keys = ["CUDA_VISIBLE_DEVICES", "PAIKA_GPU_MEMORY_MIB", "PAIKA_GPU_SHARE",
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
        "CUDA_MPS_PIPE_DIRECTORY"]
with open({str(out)!r}, "a") as f:
    f.write(" ".join(k + "=" + os.environ.get(k, "-") for k in keys) + "\\n")
while not os.path.exists({str(stop)!r}):
    time.sleep(0.05)
"""
    path = tmp_path / f"{name}.py"
    path.write_text(body)
    return f"{PY} {path}"


def _told(tmp_path: Path, name: str) -> list[dict[str, str]]:
    path = tmp_path / f"{name}.env"
    if not path.exists():
        return []
    return [
        dict(pair.split("=", 1) for pair in line.split()) for line in path.read_text().splitlines()
    ]


def test_two_share_jobs_run_on_one_card_and_a_core_job_takes_it_back(
    world: Paika, clock: ManualClock, agents: dict[str, Agent], tmp_path: Path
) -> None:
    share_hosts(world, {"gpu-a": "mps"})
    cycle = make_cycle(world, RecordingObserver())
    for name in ("eval-a", "eval-b"):
        command = _env_writer(tmp_path, name)
        ran_before(world, command, sm_pct=10.0, memory_busy_pct=5.0, memory_peak_mib=8000)
        submit(world, name, command, hours=4, extra="type=A100-80GB share=yes mem=20")
    cycle.run_once()
    a, b = job(world, "eval-a"), job(world, "eval-b")
    assert a.state == b.state == JobState.RUNNING
    [(card, held)] = open_parts(world).items()
    assert sorted(held) == [(a.id, 250), (b.id, 250)]
    assert booked(world)[card] == 500
    assert "shares A100-80GB on gpu-a with #" in (b.state_reason or "")
    until(cycle, clock, lambda: _told(tmp_path, "eval-a") and _told(tmp_path, "eval-b"))
    for name in ("eval-a", "eval-b"):
        [told] = _told(tmp_path, name)
        assert told["PAIKA_GPU_MEMORY_MIB"] == "20480" and told["PAIKA_GPU_SHARE"] == "mps"
        assert told["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=20480M"
        assert told["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
        assert told["CUDA_MPS_PIPE_DIRECTORY"].endswith("/mps/pipe")
    assert (
        _told(tmp_path, "eval-a")[0]["CUDA_VISIBLE_DEVICES"]
        == _told(tmp_path, "eval-b")[0]["CUDA_VISIBLE_DEVICES"]
    )

    # A core job needing both of the host's cards: the free one, and the shared one back.
    clock.advance(timedelta(minutes=1))
    submit(
        world, "paper", "sleep 0.2", gpus=2, priority="core", user="UVERA", extra="type=A100-80GB"
    )
    until(cycle, clock, lambda: job(world, "paper").state == JobState.RUNNING, timeout=90)
    assert all(len(held) == 1 for held in open_parts(world).values())  # its cards, whole
    until(cycle, clock, lambda: job(world, "paper").state == JobState.SUCCEEDED)
    # Both run again, on one card again, and end.
    until(
        cycle,
        clock,
        lambda: all(job(world, n).state == JobState.RUNNING for n in ("eval-a", "eval-b")),
    )
    [(_, again)] = open_parts(world).items()
    assert len(again) == 2
    (tmp_path / "stop").touch()
    until(
        cycle,
        clock,
        lambda: all(job(world, n).state == JobState.SUCCEEDED for n in ("eval-a", "eval-b")),
        timeout=90,
    )
    assert all(job(world, n).attempts == 2 for n in ("eval-a", "eval-b"))
    assert set(booked(world).values()) == {0}
    with Session(world.engine) as session:
        assert cluster_queries.overbooked_gpus(session=session) == []
        mine = [a.id, b.id]
        entries = session.exec(select(LedgerEntry).where(col(LedgerEntry.job_id).in_(mine))).all()
        held_rows = session.exec(select(Allocation).where(col(Allocation.job_id).in_(mine)))
        allocations = {row.id: row for row in held_rows}
    assert len(entries) == 4  # two runs each
    # Each is charged its part of the card: a quarter of the hours it held it.
    for entry in entries:
        allocation = allocations[entry.allocation_id]
        assert allocation.ended_at is not None and allocation.share_milli == 250
        hours = (allocation.ended_at - allocation.started_at).total_seconds() / 3600
        assert abs(entry.gpu_hours - hours * 0.25) < 1e-9


def test_jobs_nobody_knows_never_share_a_card(
    world: Paika, clock: ManualClock, agents: dict[str, Agent], tmp_path: Path
) -> None:
    share_hosts(world, {"gpu-a": "mps"})
    cycle = make_cycle(world, RecordingObserver())
    for name in ("new-a", "new-b", "new-c"):
        submit(world, name, f"sleep 30 # {name}", extra="type=A100-80GB share=yes mem=10")
    cycle.run_once()
    # Each of the host's two cards takes one; the third waits rather than join either.
    parts = open_parts(world)
    assert len(parts) == 2 and all(len(held) == 1 for held in parts.values())
    assert job(world, "new-c").state == JobState.QUEUED
