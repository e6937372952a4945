"""`paika demo` is the real service: agents over HTTP, the cycle, jobs that really run."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from bot.console import render
from bot.console_notices import ConsoleAnnouncer
from scheduler.demo import run_demo


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
    text = out.getvalue()
    assert "job_started" in text and "── board at" in text and "── summary" in text
    # The notices are said from the bot's catalogue: "job #3 bert-ft started on gpu-a (…)".
    assert re.search(r"job_started: job #\d+ \S+ started on \S+", text), text[-3000:]
    assert (tmp_path / "paika-data" / "demo" / "paika.db").exists()
