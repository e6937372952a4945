"""A stop that arrives before its start wins: the run id is tombstoned and never launched."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from agent_harness import PY, TOKEN, Agent, shutdown_agent, start_agent

from scheduler.agent.errors import JobConflict
from scheduler.agent.protocol import JobInfo, JobState, StartRequest

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _start_body(job_id: str, marker: Path) -> dict[str, object]:
    return {
        "job_id": job_id,
        "gpus": [0],
        "argv": [PY, "-c", f"open({str(marker)!r}, 'w').write('ran')"],
    }


def _assert_tombstone(job: JobInfo, job_id: str) -> None:
    assert job.job_id == job_id
    assert (job.state, job.stop_requested, job.pid, job.exit_code, job.signal) == (
        JobState.KILLED,
        True,
        None,
        None,
        None,
    )
    assert job.started_at == job.ended_at
    assert (job.command, job.gpus) == ((), ())


def test_a_stop_for_an_unknown_run_leaves_a_tombstone(agent: Agent) -> None:
    response = httpx.post(f"{agent.url}/v1/jobs/early-1/stop", json={}, headers=AUTH)
    assert response.status_code == 202, response.text
    tombstone = JobInfo.from_json(response.content)
    _assert_tombstone(tombstone, "early-1")
    # listed like any ended job, in every view
    assert agent.client.job("early-1") == tombstone
    assert agent.client.jobs() == [tombstone]
    assert agent.client.status().jobs == [tombstone]
    assert agent.client.log("early-1").lines == ()
    # a second stop changes nothing
    assert agent.client.stop_job("early-1", grace_s=0) == tombstone


def test_a_start_after_the_stop_is_409_and_never_launches(agent: Agent, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    tombstone = agent.client.stop_job("late-start")
    response = httpx.post(
        f"{agent.url}/v1/jobs", json=_start_body("late-start", marker), headers=AUTH
    )
    assert response.status_code == 409, response.text
    assert "stopped before it started" in response.json()["error"]
    with pytest.raises(JobConflict, match="stopped before it started"):
        agent.client.start_job(StartRequest(job_id="late-start", gpus=[1], argv=["true"]))
    # nothing runs: the record is still the tombstone and no GPU is held
    assert agent.client.job("late-start") == tombstone
    assert all(gpu.job_id is None for gpu in agent.client.gpus())
    assert agent.store.gpu_loads() == []
    # other runs are not affected
    assert agent.client.start_job(StartRequest(job_id="other", gpus=[0], argv=["true"])).pid


def test_a_tombstone_survives_an_agent_restart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = start_agent(state)
    try:
        tombstone = first.client.stop_job("stopped-early")
    finally:
        shutdown_agent(first)
    table = json.loads((state / "jobs.json").read_text())
    assert [(rec["job_id"], rec["tombstone"]) for rec in table["jobs"]] == [("stopped-early", True)]

    second = start_agent(state)
    try:
        assert second.client.job("stopped-early") == tombstone
        with pytest.raises(JobConflict, match="stopped before it started"):
            second.client.start_job(
                StartRequest(job_id="stopped-early", gpus=[0], argv=["sleep", "30"])
            )
        assert second.client.job("stopped-early") == tombstone
    finally:
        shutdown_agent(second)


def test_a_stop_for_a_bad_run_id_is_400_and_leaves_nothing(agent: Agent) -> None:
    response = httpx.post(f"{agent.url}/v1/jobs/{'x' * 65}/stop", headers=AUTH)
    assert response.status_code == 400 and response.json()["error"].startswith("job_id:")
    assert agent.store.all_jobs() == []


def test_a_stop_after_the_start_stops_the_run_as_before(agent: Agent) -> None:
    agent.client.start_job(StartRequest(job_id="normal", gpus=[0], argv=["sleep", "30"]))
    stopped = agent.client.stop_job("normal", grace_s=5)
    assert stopped.stop_requested and stopped.pid is not None
    ended = agent.wait_ended("normal")
    assert (ended.state, ended.signal) == (JobState.KILLED, 15)
