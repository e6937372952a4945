"""`paika demo` is the real service: agents over HTTP, the cycle, jobs that really run."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
from paika_test_cli import run_paika
from sqlmodel import Session, col, select

from bot.console import render
from bot.console_notices import ConsoleAnnouncer
from scheduler.app import Paika
from scheduler.archive import state
from scheduler.clock import ManualClock
from scheduler.demo import run_demo
from scheduler.policy.plan import WaitCode
from scheduler.service import jobs
from scheduler.settings import Settings
from storage.models import Job
from storage.objects import snapshots
from storage.objects.local import LocalStore


def test_the_demo_runs_real_jobs_to_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    summary = run_demo(
        seconds=90, speed=1800, seed=7, out=out, words=render, announcer=ConsoleAnnouncer(out)
    )  # it ends when all jobs have
    states = summary["states"]
    assert isinstance(states, dict)
    assert summary["jobs"] == 24
    assert states.get("succeeded", 0) >= 20, out.getvalue()[-3000:]
    assert summary["gpu_hours_and_cost_by_type"], "the ledger recorded GPU time"
    # Every job reported two metrics and its checkpoint through its report file as it ended,
    # with no person involved: what the GPUs bought, per project.
    assert summary["outputs_reported"] >= 3 * states.get("succeeded", 0), summary
    bought = summary["bought_by_project"]
    assert isinstance(bought, dict) and set(bought) == {"detector", "llm-pretrain"}, bought
    assert all(line["best_top1"] >= 60 for line in bought.values()), bought
    text = out.getvalue()
    assert "job_started" in text and "── board at" in text and "── summary" in text
    # The notices are said from the bot's catalogue: "job #3 bert-ft started on gpu-a (…)".
    assert re.search(r"job_started: job #\d+ \S+ started on \S+", text), text[-3000:]
    assert (tmp_path / "paika-data" / "demo" / "paika.db").exists()


def test_the_demos_memory_lets_a_new_install_take_over_its_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's workload, stopped mid-way; its last snapshot and config history restored
    by `paika state restore` into a new database: the same jobs, states, classes and queue
    order, the same jobs waiting for data, the same config version in force."""
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    summary = run_demo(seconds=4, speed=1800, seed=7, out=out, words=render, quiet=True)
    archive = summary["archive"]
    assert isinstance(archive, dict) and archive["objects"].get("snapshots", 0) >= 1, archive
    assert "the team's memory (object store):" in out.getvalue()
    data = tmp_path / "paika-data" / "demo"
    store = LocalStore(data / "objects")
    doc = state.decode(snapshots.read(store, snapshots.latest_at(store) or ""))

    new_db = tmp_path / "taken-over.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAIKA_")}
    env |= {"PAIKA_DATA_DIR": str(data), "PAIKA_DATABASE_URL": f"sqlite:///{new_db}"}
    done = run_paika(["state", "restore", "--at", "latest"], env)
    assert done.exit_code == 0, done.stderr

    settings = Settings(database_url=f"sqlite:///{new_db}", admins=("UDEMOADMIN",), config=None)
    new = Paika.start(settings, clock=ManualClock(state.taken_at(doc)))
    try:
        with Session(new.engine) as session:
            rows = session.exec(select(Job).order_by(col(Job.id))).all()
        before = [(j["id"], j["state"], j["priority"]) for j in state.records(doc, "jobs")]
        assert [(j.id, j.state, j.priority) for j in rows] == sorted(before)
        assert new.live.version == doc["config_version"] == 1
        waits = state.waits_of(doc)
        assert waits and any(j.state == "running" for j in rows), (waits, before)
        with new.context("UDEMOADMIN") as ctx:
            now = jobs.current_waits(ctx)
        # Every job the snapshot gives a reason still waits (a job the demo submitted after
        # the cycle's pass waits too, with no reason in the snapshot yet), and those waiting
        # for their data are the same.
        assert set(waits) <= set(now)
        data = WaitCode.WAITING_FOR_DATA
        assert {j for j in waits if waits[j].code == data} == {
            j for j in waits if now[j].code == data
        }
    finally:
        new.engine.dispose()
