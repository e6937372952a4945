"""Starts are idempotent and durable: on disk before the answer, never launched twice."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from agent_harness import ALLOW_ROOT_JOBS, Agent, wait_for

from scheduler.agent.errors import AgentError, JobNotFound
from scheduler.agent.jobs import JobStore
from scheduler.agent.protocol import JobState, StartRequest

SLEEP = StartRequest(job_id="durable", gpus=[0], argv=["sleep", "30"])


def _records(state_dir: Path) -> dict[str, dict[str, Any]]:
    table = json.loads((state_dir / "jobs.json").read_text())
    return {rec["job_id"]: rec for rec in table["jobs"]}


def test_a_started_run_is_on_disk_when_the_answer_arrives(agent: Agent, tmp_path: Path) -> None:
    started = agent.client.start_job(SLEEP)
    assert _records(agent.state_dir)["durable"]["pid"] == started.pid

    # An agent killed right after answering: a copy of its state dir, taken now, is what a
    # restart would find (the running agent still holds the lock on the original).
    crashed = tmp_path / "crashed"
    shutil.copytree(agent.state_dir, crashed, ignore=shutil.ignore_patterns("agent.lock"))
    with JobStore(crashed, allow_root_jobs=ALLOW_ROOT_JOBS) as restarted:
        job = restarted.get("durable")
        assert (job.state, job.pid, job.started_at) == (
            JobState.RUNNING,
            started.pid,
            started.started_at,
        )
        # a repeated start after the restart returns the run, and launches nothing
        again, created = restarted.start(SLEEP)
        assert (again.pid, created) == (started.pid, False)
        assert len(restarted.all_jobs()) == 1


def test_the_record_is_written_before_the_launch(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    class Spy(JobStore):
        def _launch(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
            seen.append(_records(self.state_dir)["durable"])
            return super()._launch(*args, **kwargs)

    with Spy(tmp_path, allow_root_jobs=ALLOW_ROOT_JOBS) as store:
        job, created = store.start(SLEEP)
        assert created and job.pid is not None
        assert (seen[0]["state"], seen[0]["pid"]) == ("running", None)
        assert _records(tmp_path)["durable"]["pid"] == job.pid
        store.stop("durable", grace_s=0)
        wait_for(lambda: store.get("durable").state is not JobState.RUNNING)


def test_a_run_whose_launch_was_cut_short_is_lost_and_not_launched_again(
    tmp_path: Path,
) -> None:
    """The agent died between writing the record and learning the pid: the state file holds
    a running record without a pid (written here by hand)."""
    record = {
        "job_id": "durable",
        "gpus": [0],
        "command": ["sleep", "30"],
        "image": None,
        "cwd": None,
        "pid": None,
        "start_ticks": None,
        "started_at": 1_700_000_000.0,
        "log_path": str(tmp_path / "logs" / "durable.log"),
        "exit_path": str(tmp_path / "exits" / "durable.json"),
        "state": "running",
    }
    (tmp_path / "jobs.json").write_text(json.dumps({"version": 1, "jobs": [record]}))
    with JobStore(tmp_path, allow_root_jobs=ALLOW_ROOT_JOBS) as store:
        lost = store.get("durable")
        assert (lost.state, lost.pid, lost.exit_code) == (JobState.LOST, None, None)
        again, created = store.start(SLEEP)
        assert (again, created) == (lost, False)


def test_a_launch_that_fails_leaves_no_record(tmp_path: Path) -> None:
    with JobStore(
        tmp_path, python=str(tmp_path / "no-such-python"), allow_root_jobs=ALLOW_ROOT_JOBS
    ) as store:
        with pytest.raises(AgentError, match="cannot start the job"):
            store.start(SLEEP)
        with pytest.raises(JobNotFound):
            store.get("durable")
        assert _records(tmp_path) == {}
