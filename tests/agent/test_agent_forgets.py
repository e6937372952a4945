"""Agents forget: an ended run stays until the scheduler acknowledges it (and `keep_ended_s`
after), its log until it is old or the logs are too many; a poll with a cursor carries only
what changed since, in answers of bounded size whatever the history."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from agent_harness import SPEC, TOKEN, wait_for

from scheduler.agent.app import build_app
from scheduler.agent.client import AgentClient
from scheduler.agent.errors import BadRequest, JobNotFound
from scheduler.agent.jobs import STATE_FILE, JobStore
from scheduler.agent.protocol import JOBS_ANSWER_BYTES, JobState, StartRequest, Status
from scheduler.agent.simulated import SimulatedReader
from scheduler.serving import serve_in_thread, stop_server

MIB = 1024 * 1024
RUNS = 2100
LINES = ["x" * 4000] * 8  # 32 KiB of report lines a run: the most the agent keeps


@contextlib.contextmanager
def agent_on(state_dir: Path, **options: object) -> Iterator[tuple[AgentClient, JobStore, str]]:
    store = JobStore(state_dir, poll_interval_s=0.05, allow_root_jobs=True, **options)  # type: ignore[arg-type]
    reader = SimulatedReader(SPEC, host="busy-host", loads=store)
    server, thread, port = serve_in_thread(build_app(reader, store, TOKEN))
    url = f"http://127.0.0.1:{port}"
    client = AgentClient(url, TOKEN, timeout=30.0)
    try:
        yield client, store, url
    finally:
        stop_server(server, thread)
        client.close()
        for job in store.all_jobs():
            if job.state is JobState.RUNNING:
                store.stop(job.job_id, grace_s=0)
        wait_for(
            lambda: all(j.state is not JobState.RUNNING for j in store.all_jobs()),
            10,
            "the test's jobs to end",
        )
        store.close()


def _history(state_dir: Path, runs: int) -> None:
    """A table of `runs` ended runs, each with 32 KiB of report lines, as a busy host's
    agent keeps after months (written as the agent writes it)."""
    state_dir.mkdir(mode=0o700, parents=True)
    now = time.time() - 3600
    records = [
        {
            "job_id": f"{n}.1",
            "gpus": [n % 4],
            "command": ["true"],
            "pid": None,
            "start_ticks": None,
            "started_at": now + n,
            "log_path": "",
            "exit_path": "",
            "state": "exited",
            "ended_at": now + n + 1,
            "exit_code": 0,
            "report_lines": LINES,
            "seq": n + 1,
        }
        for n in range(runs)
    ]
    data = {"version": 1, "epoch": "e1", "seq": runs, "jobs": records}
    (state_dir / STATE_FILE).write_text(json.dumps(data))


def _status(url: str, since: str) -> tuple[int, Status]:
    answer = httpx.get(
        f"{url}/v1/status",
        params={"since": since},
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=30,
    )
    answer.raise_for_status()
    return len(answer.content), Status.from_json(answer.content)


def test_a_long_history_comes_in_bounded_pages_and_then_only_changes(tmp_path: Path) -> None:
    # Before: every poll carried every ended run: ~2,100 runs with 32 KiB of report lines
    # made an answer over the scheduler's 64 MiB cap, and every poll of the host failed.
    _history(tmp_path / "state", RUNS)
    with agent_on(tmp_path / "state") as (client, _store, url):
        seen: list[str] = []
        cursor, sizes = "0", []
        while True:
            size, status = _status(url, cursor)
            sizes.append(size)
            seen += [job.job_id for job in status.jobs]
            assert status.cursor is not None
            cursor = status.cursor
            if not status.more:
                break
        assert sorted(seen) == sorted(f"{n}.1" for n in range(RUNS))  # each once
        assert max(sizes) <= JOBS_ANSWER_BYTES + 64 * 1024
        assert len(sizes) > 10
        # Nothing changed since: the answer carries no job.
        size, quiet = _status(url, cursor)
        assert quiet.jobs == [] and not quiet.more and size < 4096
        # A run starts and ends: the next polls carry it, and only it.
        client.start_job(StartRequest(job_id="new.1", gpus=[0], argv=["true"]))
        wait_for(lambda: client.job("new.1").state is not JobState.RUNNING, 10, "its end")
        _, changed = _status(url, cursor)
        assert [job.job_id for job in changed.jobs] == ["new.1"]
        assert changed.jobs[0].state is JobState.EXITED
        # A cursor of another table (the state dir made anew) starts over.
        _, fresh = _status(url, "other-5")
        assert len(fresh.jobs) > 1 and fresh.jobs[0].job_id == "0.1"


def test_a_running_job_is_in_every_answer(tmp_path: Path) -> None:
    with agent_on(tmp_path / "state") as (client, _store, url):
        client.start_job(StartRequest(job_id="long.1", gpus=[1], argv=["sleep", "30"]))
        _, first = _status(url, "0")
        assert first.cursor is not None
        _, second = _status(url, first.cursor)
        assert [job.job_id for job in second.jobs] == ["long.1"]
        assert second.disk is not None and not second.disk.low


def test_acknowledged_runs_are_forgotten_and_unacknowledged_ones_kept(tmp_path: Path) -> None:
    # Before: nothing was ever forgotten.
    state = tmp_path / "state"
    options = {"keep_ended_s": 0.0, "tidy_interval_s": 0.05}
    with agent_on(state, **options) as (client, store, _url):
        for run in ("a.1", "b.1"):
            client.start_job(StartRequest(job_id=run, gpus=[0], shell=f"echo I am {run}"))
            wait_for(lambda r=run: client.job(r).state is not JobState.RUNNING, 10, "its end")  # type: ignore[misc]
        assert client.ack(["a.1", "unknown.1"]).acked == 1
        wait_for(lambda: "a.1" not in {j.job_id for j in store.all_jobs()}, 10, "a.1 forgotten")
        with pytest.raises(JobNotFound):
            client.job("a.1")
        assert not (state / "exits" / "a.1.json").exists()
        # Its log outlives its record (until it is old, or the logs too many).
        assert client.log("a.1").lines == ("I am a.1",)
        # b.1 was never acknowledged: kept, however long.
        tidied = store._tidied_at  # several tidy rounds later, it is still there
        wait_for(lambda: store._tidied_at > tidied + 0.2, 10, "tidy rounds")
        assert client.job("b.1").exit_code == 0
        assert client.ack(["a.1"]).acked == 0  # gone: nothing to acknowledge twice
    # The table on disk holds b.1 only.
    saved = json.loads((state / STATE_FILE).read_text())
    assert [rec["job_id"] for rec in saved["jobs"]] == ["b.1"]


def test_logs_of_forgotten_runs_go_by_age_and_by_total(tmp_path: Path) -> None:
    state = tmp_path / "state"
    options = {"keep_ended_s": 0.0, "tidy_interval_s": 0.05, "logs_max_total_bytes": 0}
    with agent_on(state, **options) as (client, store, _url):
        client.start_job(StartRequest(job_id="a.1", gpus=[0], shell="echo a"))
        wait_for(lambda: client.job("a.1").state is not JobState.RUNNING, 10, "its end")
        assert (state / "logs" / "a.1.log").exists()  # its run is kept: so is its log
        client.ack(["a.1"])
        wait_for(lambda: not (state / "logs" / "a.1.log").exists(), 10, "the log to go")
        with pytest.raises(JobNotFound):
            client.log("a.1")
    options = {"keep_ended_s": 0.0, "tidy_interval_s": 0.05, "logs_max_age_s": 0.0}
    with agent_on(tmp_path / "state2", **options) as (client, store, _url):
        client.start_job(StartRequest(job_id="b.1", gpus=[0], shell="echo b"))
        wait_for(lambda: client.job("b.1").state is not JobState.RUNNING, 10, "its end")
        client.ack(["b.1"])
        wait_for(lambda: not (tmp_path / "state2" / "logs" / "b.1.log").exists(), 10, "age")


def test_bad_acknowledgements_are_400_naming_the_field(tmp_path: Path) -> None:
    with agent_on(tmp_path / "state") as (client, _store, _url):
        with pytest.raises(BadRequest, match="job_ids"):
            client.ack(["../etc"])
        with pytest.raises(BadRequest, match="at most"):
            client.ack([f"{n}.1" for n in range(5000)])


def test_a_poll_without_a_cursor_gets_every_run_and_the_agent_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A scheduler from before cursors: answered as it always was, and the agent's log says
    # why nothing will be forgotten until a newer scheduler acknowledges runs.
    _history(tmp_path / "state", 3)
    with agent_on(tmp_path / "state") as (client, _store, _url):
        with caplog.at_level("WARNING", logger="scheduler.agent.app"):
            for _ in range(2):
                assert [job.job_id for job in client.status().jobs] == ["0.1", "1.1", "2.1"]
        said = [r.getMessage() for r in caplog.records if "without a cursor" in r.getMessage()]
        assert len(said) == 1 and "upgrade the scheduler" in said[0]
