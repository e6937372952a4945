"""The scheduler's side of agents that forget: polls carry changes only (the Poller keeps the
ended runs it was told of until they are acknowledged), a run is acknowledged only once its
end is committed, and a scheduler that crashed before settling a run finds it on its agent
after the restart; a host whose disk is low gets no job."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_world import TOKEN, Agent, job, make_cycle, ok, submit, until
from sqlmodel import Session, select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.said import say
from scheduler.agent.app import build_app
from scheduler.agent.errors import JobNotFound
from scheduler.agent.jobs import STATE_FILE, JobStore
from scheduler.agent.protocol import StartRequest
from scheduler.agent.simulated import SimulatedReader
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.hosts.poll import Poller, Target
from scheduler.hosts.reconcile import Seen, _seen
from scheduler.hosts.report import DISK_LOW, disk_low_values
from scheduler.notices.events import RecordingObserver
from scheduler.results import Said, SaidCode
from scheduler.serving import serve_in_thread, stop_server
from storage.models import Host, JobState

MIB = 1024 * 1024


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


class ForgetfulAgent(Agent):
    """An agent that forgets acknowledged runs at once and tidies often."""

    options: dict[str, Any] = {}

    def start(self) -> None:
        self.store = JobStore(
            self.state_dir, allow_root_jobs=True, tidy_interval_s=0.05, **self.options
        )
        reader = SimulatedReader(self.spec, host=self.name, loads=self.store)
        self.server, self.thread, self.port = serve_in_thread(
            build_app(reader, self.store, TOKEN, host=self.name), port=self.port
        )


@contextlib.contextmanager
def one_host(paika: Paika, agent: Agent) -> Iterator[Agent]:
    agent.start()
    try:
        paika.policy = paika.policy.model_copy(
            update={"scheduler": paika.policy.scheduler.model_copy(update={"headroom": {}})}
        )
        ok(paika, "UADMIN", "admin member add <@UALICE> team=vision")
        ok(paika, "UADMIN", f"admin host add {agent.name} url={agent.url}")
        yield agent
    finally:
        agent.stop_all_jobs()
        agent.stop()


def _runs(agent: Agent) -> set[str]:
    assert agent.store is not None
    return {run.job_id for run in agent.store.all_jobs()}


def test_a_run_ended_while_the_scheduler_was_down_is_kept_and_settled_after_its_restart(
    paika: Paika, clock: ManualClock, tmp_path: Path
) -> None:
    agent = ForgetfulAgent("gpu-f", "2xA100-80GB", tmp_path / "gpu-f")
    agent.options = {"keep_ended_s": 0.0}
    with one_host(paika, agent):
        first = Poller(TOKEN, timeout=5.0)
        cycle = make_cycle(paika, RecordingObserver(), poller=first)
        submit(paika, "quick", "echo done", gpus=1)
        cycle.run_once()
        run = f"{job(paika, 'quick').id}.1"
        assert agent.store is not None
        wait_for(lambda: agent.store.get(run).state != "running", 10, "the run's end")  # type: ignore[union-attr]
        # The scheduler polls, sees the end, and crashes before it settles it.
        targets = [Target(agent.name, agent.url)]
        assert first(targets)[agent.name].jobs[run].state == "exited"
        first.close()
        # Its end was never acknowledged: the agent keeps the run however long it tidies.
        tidied = agent.store._tidied_at
        wait_for(lambda: agent.store._tidied_at > tidied + 0.2, 10, "tidy rounds")  # type: ignore[union-attr]
        assert run in _runs(agent)
        assert job(paika, "quick").state == JobState.RUNNING
        # A new scheduler asks from the start, settles the run, then acknowledges it.
        second = Poller(TOKEN, timeout=5.0)
        try:
            again = make_cycle(paika, RecordingObserver(), poller=second)
            until(again, clock, lambda: job(paika, "quick").state == JobState.SUCCEEDED)
            assert run in _runs(agent)  # settled this cycle: acknowledged from the next
            until(again, clock, lambda: run not in _runs(agent))
        finally:
            second.close()
        with pytest.raises(JobNotFound):
            agent.store.get(run)


def test_polls_carry_changes_only_and_reports_keep_unacknowledged_ends(
    paika: Paika, clock: ManualClock, tmp_path: Path
) -> None:
    agent = ForgetfulAgent("gpu-g", "2xA100-80GB", tmp_path / "gpu-g")
    with one_host(paika, agent):
        assert agent.store is not None
        for n in range(3):
            run = f"foreign{n}.1"
            agent.store.start(StartRequest(job_id=run, gpus=[0], argv=["true"]))
            wait_for(lambda r=run: agent.store.get(r).state != "running", 10, "its end")  # type: ignore[misc]
        poller = Poller(TOKEN, timeout=5.0)
        try:
            targets = [Target(agent.name, agent.url)]
            first = poller(targets)[agent.name]
            assert set(first.jobs) == {"foreign0.1", "foreign1.1", "foreign2.1"}
            # The second answer carries nothing new, yet the report still holds the ended
            # runs (not acknowledged yet): reconcile never reads them as lost.
            cursor = agent.store.cursor()
            second = poller(targets)[agent.name]
            assert set(second.jobs) == set(first.jobs) and not second.partial
            assert agent.store.cursor() == cursor
            # Acknowledged: sent before the next poll; the Poller drops them, the agent too.
            poller.acknowledge({agent.name: ["foreign0.1"]})
            third = poller(targets)[agent.name]
            assert set(third.jobs) == {"foreign1.1", "foreign2.1"}
            assert agent.store._jobs["foreign0.1"].acked_at is not None
        finally:
            poller.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_host_whose_disk_is_low_gets_no_job_and_says_why(
    paika: Paika, clock: ManualClock, small_disk: Path
) -> None:
    # Before: a host whose disk a job had filled stayed "up" and kept getting work, every
    # start failing there.
    agent = ForgetfulAgent("gpu-d", "2xA100-80GB", small_disk / "state")
    agent.options = {"disk_reserve_bytes": 4 * MIB}
    with one_host(paika, agent):
        cycle = make_cycle(paika, RecordingObserver(), poller=Poller(TOKEN, timeout=5.0))
        submit(paika, "flood", "yes", gpus=1)
        cycle.run_once()
        assert job(paika, "flood").state == JobState.RUNNING
        assert agent.store is not None
        wait_for(lambda: agent.store.disk().low, 30, "the disk to run low")  # type: ignore[union-attr]
        submit(paika, "next", "true", gpus=1)
        result = cycle.run_once()
        assert job(paika, "next").state != JobState.RUNNING and not result.started
        with Session(paika.engine) as session:
            host = session.exec(select(Host).where(Host.name == "gpu-d")).one()
        row = {"name": host.name, "url": host.url, "state": str(host.state)}
        assert host.last_error is not None and host.last_error.startswith(DISK_LOW)
        listed = ok(paika, "UADMIN", "admin host list")
        assert "gpu-d" in listed and "disk low:" in listed
        assert "no new job starts there until there is room" in listed
        said = Said(SaidCode.HOST_ROW_DISK_LOW, {**disk_low_values(host.last_error), **row})  # type: ignore[dict-item]
        assert "磁盘空间不足" in say("zh", said) and "MiB" in say("zh", said)
        close = getattr(cycle, "close", None)
        if close is not None:
            close()


def test_an_agent_from_before_cursors_is_read_whole_and_told_no_acknowledgement(
    tmp_path: Path,
) -> None:
    # An older agent ignores `since` and answers without a cursor: every job it keeps. The
    # poller reads that answer as whole, keeps nothing between rounds, and sends it no
    # acknowledgement (the older agent has no route for one).
    calls: list[str] = []
    answer = {
        "health": {"status": "ok", "agent_version": "0.9", "api_version": 1, "host": "old"},
        "host": "old",
        "gpus": [],
        "jobs": [
            {
                "job_id": "7.1",
                "state": "exited",
                "gpus": [0],
                "command": ["true"],
                "started_at": "2026-01-05T09:00:00+00:00",
                "ended_at": "2026-01-05T09:01:00+00:00",
                "exit_code": 0,
            }
        ],
    }

    async def status(request: Request) -> Response:
        calls.append(f"{request.method} {request.url.path}?{request.url.query}")
        return JSONResponse(answer)

    async def other(request: Request) -> Response:
        calls.append(f"{request.method} {request.url.path}")
        return JSONResponse({"error": "no such route"}, status_code=404)

    app = Starlette(
        routes=[
            Route("/v1/status", status, methods=["GET"]),
            Route("/v1/jobs/ack", other, methods=["POST"]),
        ]
    )
    server, thread, port = serve_in_thread(app)
    poller = Poller(TOKEN, timeout=5.0)
    try:
        targets = [Target("old", f"http://127.0.0.1:{port}")]
        first = poller(targets)["old"]
        assert first.ok and set(first.jobs) == {"7.1"} and first.agent_version == "0.9"
        poller.acknowledge({"old": ["7.1"]})
        second = poller(targets)["old"]
        assert second.ok and set(second.jobs) == {"7.1"}
        assert calls == ["GET /v1/status?since=0", "GET /v1/status?since=0"]
    finally:
        poller.close()
        stop_server(server, thread)


def _history(state_dir: Path, runs: int) -> None:
    """`runs` ended runs with 32 KiB of report lines each, as the agent writes its table."""
    state_dir.mkdir(mode=0o700, parents=True)
    now = time.time() - 3600
    records = [
        {
            "job_id": f"{n}.1",
            "gpus": [0],
            "command": ["true"],
            "pid": None,
            "start_ticks": None,
            "started_at": now + n,
            "log_path": "",
            "exit_path": "",
            "state": "exited",
            "ended_at": now + n + 1,
            "exit_code": 0,
            "report_lines": ["x" * 4000] * 8,
            "seq": n + 1,
        }
        for n in range(runs)
    ]
    data = {"version": 1, "epoch": "e1", "seq": runs, "jobs": records}
    (state_dir / STATE_FILE).write_text(json.dumps(data))


def test_a_long_backlog_is_read_over_rounds_and_reported_partial_until_then(
    tmp_path: Path,
) -> None:
    # Before: 2,100 ended runs with 32 KiB of report lines made one answer over the
    # scheduler's 64 MiB cap: every poll of the host failed, from then on.
    _history(tmp_path / "busy", 2100)
    agent = ForgetfulAgent("busy", "2xA100-80GB", tmp_path / "busy")
    agent.start()
    poller = Poller(TOKEN, timeout=30.0)
    try:
        targets = [Target("busy", agent.url)]
        reports = [poller(targets)["busy"]]
        while reports[-1].partial:
            assert len(reports) < 10
            reports.append(poller(targets)["busy"])
        assert all(report.ok for report in reports)
        assert len(reports) > 1  # more than one round's pages
        assert len(reports[-1].jobs) == 2100  # kept between rounds until acknowledged
        # A run missing from a partial report is not concluded on: it may be on a later page.
        partial = reports[0]
        missing = next(f"{n}.1" for n in range(2100) if f"{n}.1" not in partial.jobs)
        assert _seen(missing, ["busy"], {"busy": partial})[0] is Seen.AWAY
        assert _seen(missing, ["busy"], {"busy": reports[-1]})[0] is Seen.ENDED
    finally:
        poller.close()
        agent.stop()
