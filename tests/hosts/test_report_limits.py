"""A run's reports are limited: so many a minute through paika up's endpoint (429 with
Retry-After, and `paika report` says what to do), so many rows stored per run (the oldest
kept, its verdict always); `paika report` falls back on the run's report file when paika
cannot be reached (never when paika refused); a database restored from a snapshot still
takes the running jobs' reports. Real simulated agents and real HTTP on loopback."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path

import httpx
import pytest
from agent_world import job, submit, until
from paika_test_servers import fresh_engine
from sqlalchemy import Engine
from sqlmodel import Session, col, select
from starlette.applications import Starlette
from test_job_outputs import report_cycle

from bot.job_report import job_report
from bot.said import problem
from scheduler.app import Paika
from scheduler.archive import state
from scheduler.clock import ManualClock
from scheduler.cycle import Cycle
from scheduler.notices.events import RecordingObserver
from scheduler.observe.http import ReportDesk, report_route
from scheduler.outputs import ReportLimits, token_matches
from scheduler.serving import serve_in_thread, stop_server
from storage.models import Job, JobOutput, JobState


def serve(paika: Paika, clock: ManualClock, limits: ReportLimits) -> Iterator[str]:
    desk = ReportDesk(paika.engine, clock, partial(problem, "en"), limits)
    server, thread, port = serve_in_thread(Starlette(routes=[report_route(desk)]))
    yield f"http://127.0.0.1:{port}"
    stop_server(server, thread)


@pytest.fixture
def running(world: Paika, clock: ManualClock) -> tuple[Job, Cycle]:
    """A job whose run is on a host, with its report token."""
    cycle = report_cycle(world, RecordingObserver(), None)
    submit(world, "train", "sleep 300")
    until(cycle, clock, lambda: job(world, "train").state == JobState.RUNNING)
    return job(world, "train"), cycle


def post(url: str, run: Job, body: dict[str, object]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {run.report_token}"}
    return httpx.post(f"{url}/v1/jobs/{run.id}/report", json=body, headers=headers, timeout=10)


def rows(paika: Paika, job_id: int) -> list[JobOutput]:
    with Session(paika.engine) as session:
        query = select(JobOutput).where(JobOutput.job_id == job_id).order_by(col(JobOutput.id))
        return list(session.exec(query).all())


def env_of(run: Job, url: str, path: str = "") -> dict[str, str]:
    env = {"PAIKA_JOB_ID": f"{run.id}.{run.attempts}", "PAIKA_JOB_TOKEN": run.report_token or ""}
    env["PAIKA_REPORT_URL"] = url
    if path:
        env["PAIKA_REPORT_FILE"] = path
    return env


def test_a_run_may_report_so_many_times_a_minute_then_gets_429_and_retry_after(
    world: Paika,
    clock: ManualClock,
    running: tuple[Job, Cycle],
    capsys: pytest.CaptureFixture[str],
) -> None:
    run, _ = running
    for url in serve(world, clock, ReportLimits(per_minute=5, rows_per_run=1000)):
        for step in range(5):
            assert post(url, run, {"metrics": {"step": step}}).status_code == 200
        # Before: a curl loop stored 118,978 rows in 45 s; now the sixth in a minute is refused.
        refused = post(url, run, {"metrics": {"step": 5}})
        assert refused.status_code == 429
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        assert refused.json()["problem"] == "problem.job_report_rate_limited"
        assert len(rows(world, run.id or 0)) == 5

        code = job_report(["metric=step:6"], env_of(run, url))
        said = capsys.readouterr().err
        assert code == 1
        assert "HTTP 429" in said and "Try again in" in said and "report less often" in said

        clock.advance(timedelta(seconds=61))  # a minute later the run may report again
        assert post(url, run, {"metrics": {"step": 7}}).status_code == 200
        assert len(rows(world, run.id or 0)) == 6


def test_a_run_stores_at_most_its_limit_of_rows_keeping_the_oldest_and_its_verdict(
    world: Paika,
    clock: ManualClock,
    running: tuple[Job, Cycle],
    capsys: pytest.CaptureFixture[str],
) -> None:
    run, _ = running
    four = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}
    for url in serve(world, clock, ReportLimits(per_minute=100, rows_per_run=10)):
        assert post(url, run, {"metrics": four}).json()["stored"] == 4
        assert post(url, run, {"metrics": four}).json()["stored"] == 4
        capped = post(url, run, {"metrics": {"a": 9.0, "b": 9.0, "c": 9.0, "d": 9.0}})
        assert capped.status_code == 200
        assert capped.json() == {
            "job_id": run.id,
            "attempt": run.attempts,
            "stored": 2,
            "dropped": 2,
            "limit": 10,
        }
        verdict = post(url, run, {"metrics": {"a": 0.5}, "status": "failed"})
        assert verdict.json()["stored"] == 1  # the status, past the limit: it decides the end
        assert job_report(["metric=e:1"], env_of(run, url)) == 0
        assert "1 value was not kept" in capsys.readouterr().out
    kept = rows(world, run.id or 0)
    assert len(kept) == 11
    assert [r.value for r in kept[:8]] == [1.0, 2.0, 3.0, 4.0] * 2  # the oldest are kept
    assert job(world, "train").metrics == {"a": 0.5, "b": 9.0, "c": 9.0, "d": 9.0, "e": 1.0}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_paika_report_writes_to_the_report_file_when_paika_cannot_be_reached(
    world: Paika, running: tuple[Job, Cycle], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, _ = running
    path = tmp_path / "report.jsonl"
    path.touch()
    url = f"http://127.0.0.1:{closed_port()}"
    assert job_report(["metric=loss:0.31"], env_of(run, url, str(path))) == 0
    assert "could not be reached" in capsys.readouterr().out
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {"metrics": {"loss": 0.31}}
    ]


def test_paika_report_does_not_fall_back_when_paika_refused_the_report(
    world: Paika,
    clock: ManualClock,
    running: tuple[Job, Cycle],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run, _ = running
    path = tmp_path / "report.jsonl"
    path.touch()
    forged = Job.model_validate({**run.model_dump(), "report_token": "not-the-token"})
    for url in serve(world, clock, ReportLimits()):
        assert job_report(["metric=loss:0.31"], env_of(forged, url, str(path))) == 1
    assert "HTTP 401" in capsys.readouterr().err
    assert path.read_text() == ""  # judged: not written anywhere else


@pytest.fixture
def fresh(engine: Engine, tmp_path: Path) -> Iterator[Engine]:
    """A second, empty, migrated database on the same backend (a new install)."""
    with fresh_engine(engine.dialect.name, tmp_path) as new:
        yield new


def test_a_restored_database_takes_the_running_jobs_reports(
    world: Paika, clock: ManualClock, running: tuple[Job, Cycle], fresh: Engine
) -> None:
    run, _ = running
    with Session(world.engine) as session:
        doc = state.build_document(session, world.policy, None, clock.now(), None)
    said = json.dumps(doc)
    assert run.report_token and run.report_token not in said  # the snapshot keeps no token
    state.restore(fresh, doc, clock.now())
    with Session(fresh) as session:
        restored = session.get(Job, run.id)
    assert restored is not None and restored.state == JobState.RUNNING
    assert token_matches(restored, run.report_token)  # before: no token, every report refused
    assert not token_matches(restored, "not-the-token")
    # A snapshot of the restored database, restored again, still takes it.
    with Session(fresh) as session:
        again = state.build_document(session, world.policy, None, clock.now(), None)
    kept = {row["id"]: row["report_token"] for row in state.records(again, "jobs")}
    original = {row["id"]: row["report_token"] for row in state.records(doc, "jobs")}
    assert kept == original


def test_report_file_lines_past_the_limit_of_rows_are_not_kept(
    world: Paika, clock: ManualClock, tmp_path: Path
) -> None:
    script = tmp_path / "flood.py"
    script.write_text(
        "import os, time\n"
        "with open(os.environ['PAIKA_REPORT_FILE'], 'a') as out:\n"
        "    for i in range(30):\n"
        "        out.write(f'metric=step:{i}\\n')\n"
        "time.sleep(300)\n"
    )
    cycle = report_cycle(world, RecordingObserver(), None)
    cycle.report_limits = ReportLimits(rows_per_run=10)
    submit(world, "flood", f"{sys.executable} {script}")

    def read_all() -> bool:
        taken = job(world, "flood").report_lines_taken or {}
        return max((taken.get("hosts") or {}).values(), default=0) >= 30

    until(cycle, clock, read_all)
    flood = job(world, "flood")
    assert [r.value for r in rows(world, flood.id or 0)] == [float(i) for i in range(10)]
    assert flood.metrics == {"step": 29.0}  # the latest value is still set
