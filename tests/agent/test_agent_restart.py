"""An agent restart loses no job: it re-attaches to live ones and records the rest."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from agent_harness import ALLOW_ROOT_JOBS, PY, shutdown_agent, start_agent, wait_for

from scheduler.agent.errors import AgentError
from scheduler.agent.jobs import JobStore, proc_start_ticks
from scheduler.agent.protocol import JobState, StartRequest


def test_a_restarted_agent_reattaches_and_records_the_later_exit(tmp_path: Path) -> None:
    state = tmp_path / "state"
    go = tmp_path / "go"
    script = (
        "import os, time\nprint('working', flush=True)\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.02)\nraise SystemExit(7)"
    )
    first = start_agent(state)
    started = first.client.start_job(StartRequest(job_id="long", gpus=[2], argv=[PY, "-c", script]))
    first.client.start_job(StartRequest(job_id="quick", gpus=[0], shell="exit 4"))
    first.wait_ended("quick")
    shutdown_agent(first, kill_jobs=False)

    # the job table survives as plain JSON
    table = json.loads((state / "jobs.json").read_text())
    assert {rec["job_id"]: rec["state"] for rec in table["jobs"]} == {
        "long": "running",
        "quick": "exited",
    }

    second = start_agent(state)
    try:
        job = second.client.job("long")
        assert (job.state, job.pid, job.started_at) == (
            JobState.RUNNING,
            started.pid,
            started.started_at,
        )
        assert second.client.job("quick").exit_code == 4
        assert second.client.gpus()[2].job_id == "long"
        go.touch()
        ended = second.wait_ended("long")
        assert (ended.state, ended.exit_code) == (JobState.EXITED, 7)
        assert second.client.log("long").lines == ("working",)
    finally:
        shutdown_agent(second)


def test_a_job_that_died_without_an_exit_record_while_the_agent_was_away_is_lost(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    first = start_agent(state)
    job = first.client.start_job(StartRequest(job_id="victim", gpus=[1], argv=["sleep", "30"]))
    shutdown_agent(first, kill_jobs=False)
    os.killpg(job.pid or 0, signal.SIGKILL)  # wrapper and all: no exit file
    wait_for(lambda: proc_start_ticks(job.pid or 0) is None, what="the job to die")

    second = start_agent(state)
    try:
        lost = second.client.job("victim")
        assert (lost.state, lost.exit_code, lost.signal) == (JobState.LOST, None, None)
        assert second.client.gpus()[1].job_id is None
    finally:
        shutdown_agent(second)


def test_a_stop_deadline_survives_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(30)"
    first = start_agent(state)
    first.client.start_job(StartRequest(job_id="stubborn", gpus=[0], argv=[PY, "-c", stubborn]))
    wait_for(lambda: first.client.log("stubborn").lines == ("ready",))
    first.client.stop_job("stubborn", grace_s=0.5)
    shutdown_agent(first, kill_jobs=False)

    second = start_agent(state)
    try:
        job = second.wait_ended("stubborn")
        assert (job.state, job.signal) == (JobState.KILLED, 9)
    finally:
        shutdown_agent(second)


def test_a_reused_pid_is_not_mistaken_for_the_job(tmp_path: Path) -> None:
    """The start time in /proc/<pid>/stat must match, not just the pid."""
    state = tmp_path / "state"
    with JobStore(state, allow_root_jobs=ALLOW_ROOT_JOBS) as store:
        store.start(StartRequest(job_id="j", gpus=[0], argv=["true"]))
        wait_for(lambda: store.get("j").state is not JobState.RUNNING)
    table = json.loads((state / "jobs.json").read_text())
    record = table["jobs"][0]
    record.update(state="running", pid=os.getpid(), start_ticks=1, ended_at=None, exit_code=None)
    (state / "exits" / "j.json").unlink()
    (state / "jobs.json").write_text(json.dumps(table))
    with JobStore(state, allow_root_jobs=ALLOW_ROOT_JOBS) as store:
        assert store.get("j").state is JobState.LOST


def test_two_agents_cannot_share_a_state_dir(tmp_path: Path) -> None:
    with JobStore(tmp_path), pytest.raises(AgentError, match="another agent"):
        JobStore(tmp_path)
    JobStore(tmp_path).close()  # free again once the first one closed


def test_an_unreadable_job_table_stops_the_agent_with_a_clear_message(tmp_path: Path) -> None:
    (tmp_path / "jobs.json").write_text("{not json")
    with pytest.raises(AgentError, match="cannot read the agent's job table"):
        JobStore(tmp_path)
    JobStore(tmp_path / "elsewhere").close()
    time.sleep(0)  # the lock was released: the same dir opens after a fix
    (tmp_path / "jobs.json").unlink()
    JobStore(tmp_path).close()
