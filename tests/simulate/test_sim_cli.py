"""`paika simulate` through typer's CliRunner, plus one smoke run on the real traces if present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
runner = CliRunner()


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.csv"
    path.write_text(
        "submit_time,duration,gpus,priority\n0,100,2,\n10,100,1,\n20,10,2,\n30,5,1,idle\n"
    )
    return path


def simulate(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["simulate", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_summary(trace: Path) -> None:
    code, out, err = simulate(
        "--trace", str(trace), "--format", "csv", "--policy", "sjf",
        "--nodes", "1", "--gpus-per-node", "2",
        "--core-share", "0", "--not-ready-share", "0", "--json",
    )  # fmt: skip
    assert code == 0, err
    summary = json.loads(out)
    assert summary["policy"] == "sjf" and summary["jobs"] == 4 and summary["finished"] == 4
    assert summary["gpus"] == 2 and summary["never_fits"] == 0
    assert set(summary["queue_delay_s"]) == {"count", "mean", "median", "p99", "max"}
    assert set(summary["by_class"]) == {"normal", "idle"}
    assert (
        summary["scheduling"]["calls"] >= 1 and summary["knobs"]["within_class"] == "shortest_first"
    )
    assert summary["draws"]["seed"] == 1 and summary["trace"]["format"] == "csv"


def test_table_output_and_determinism(trace: Path) -> None:
    args = ["--trace", str(trace), "--format", "csv", "--nodes", "1", "--gpus-per-node", "2"]
    code, out, _ = simulate(*args)
    assert code == 0 and "policy paika" in out and "mean wait" in out
    first = json.loads(simulate(*args, "--json", "--seed", "5")[1])
    again = json.loads(simulate(*args, "--json", "--seed", "5")[1])
    for figures in (first, again):
        figures.pop("wall_s"), figures.pop("scheduling")
    assert first == again


def test_clear_errors_exit_2(trace: Path, tmp_path: Path) -> None:
    code, _, err = simulate("--trace", str(tmp_path / "nope.csv"), "--format", "csv")
    assert code == 2 and "trace file not found" in err
    code, _, err = simulate("--trace", str(trace), "--format", "slurm")
    assert code == 2 and "unknown --format 'slurm'" in err
    code, _, err = simulate("--trace", str(trace), "--format", "csv")
    assert code == 2 and "--nodes" in err
    code, _, err = simulate(
        "--trace", str(trace), "--format", "philly", "--nodes", "1", "--gpus-per-node", "2"
    )
    assert code == 2 and "timestamp" in err


def test_help_says_how_missing_attributes_are_drawn() -> None:
    result = runner.invoke(app, ["simulate", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    for words in ("--core-share", "exponential", "--estimate-noise", "one of 50", "--per-vc"):
        assert words in text


@pytest.mark.skipif(not (TRACES / "philly").is_dir(), reason="real traces not present")
def test_smoke_on_the_real_traces() -> None:
    philly = TRACES / "philly" / "philly_jobs_pollux.csv"
    code, out, err = simulate(
        "--trace", str(philly), "--format", "philly", "--per-vc", "--limit", "300", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["finished"] > 0
    openb = TRACES / "alibaba-openb-2023" / "openb_pod_list_gpuspec33.csv"
    code, out, err = simulate("--trace", str(openb), "--format", "openb", "--limit", "60", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["finished"] > 0 and summary["gpus"] == 6212


def test_a_weekly_maintenance_calendar_in_the_table_and_the_json(tmp_path: Path) -> None:
    # Two weeks of one-hour jobs on two hosts: each host has two windows.
    path = tmp_path / "weeks.csv"
    rows = [f"{hour * 3600},3000,1," for hour in range(0, 14 * 24, 2)]
    path.write_text("submit_time,duration,gpus,priority\n" + "\n".join(rows) + "\n")
    args = ["--trace", str(path), "--format", "csv", "--nodes", "2", "--gpus-per-node", "1"]
    code, out, err = simulate(*args, "--maintenance", "plan", "--booking-gpus", "1")
    assert code == 0, err
    assert "maintenance plan: 4 windows" in out and "bookings: " in out
    code, out, err = simulate(*args, "--maintenance", "drain", "--json")
    assert code == 0, err
    calendar = json.loads(out)["calendar"]
    assert calendar["mode"] == "drain" and calendar["windows"] == 4
    assert calendar["notice_gpu_hours"] == 4 * 24 and calendar["bookings"] == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--maintenance", "weekly"], "unknown --maintenance 'weekly'"),
        (["--booking-gpus", "4"], "add --maintenance plan"),
        (["--maintenance", "plan", "--maintenance-hours", "30"], "--maintenance-hours"),
    ],
)
def test_a_calendar_out_of_range_is_refused_with_the_fix(
    trace: Path, extra: list[str], message: str
) -> None:
    args = ["--trace", str(trace), "--format", "csv", "--nodes", "1", "--gpus-per-node", "2"]
    code, _, err = simulate(*args, *extra)
    assert code == 2 and message in err
