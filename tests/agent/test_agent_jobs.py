"""Starting, watching and stopping jobs through the HTTP API."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import pytest
from agent_harness import PY, TOKEN, Agent, wait_for

from scheduler.agent.errors import BadRequest, JobConflict, JobNotFound
from scheduler.agent.protocol import JobState, StartRequest

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_start_returns_201_then_the_same_job_with_200_and_runs_it_once(
    agent: Agent, tmp_path: Path
) -> None:
    marker = tmp_path / "starts.txt"
    body = {
        "job_id": "train-1",
        "gpus": [0, 1],
        "argv": [
            PY,
            "-c",
            f"open({str(marker)!r}, 'a').write('x\\n'); import time; time.sleep(30)",
        ],
    }
    first = httpx.post(f"{agent.url}/v1/jobs", json=body, headers=AUTH)
    second = httpx.post(f"{agent.url}/v1/jobs", json=body, headers=AUTH)
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["pid"] == second.json()["pid"]
    assert first.json()["state"] == "running"
    wait_for(lambda: marker.exists() and marker.read_text() == "x\n", what="the job to start")
    time.sleep(0.2)
    assert marker.read_text() == "x\n"
    assert [j.job_id for j in agent.client.jobs()] == ["train-1"]


def test_gpus_held_by_a_live_job_are_a_409_until_it_ends(agent: Agent) -> None:
    agent.client.start_job(StartRequest(job_id="a", gpus=[1, 2], argv=["sleep", "30"]))
    with pytest.raises(JobConflict) as caught:
        agent.client.start_job(StartRequest(job_id="b", gpus=[2, 3], argv=["sleep", "30"]))
    assert caught.value.status == 409
    assert "GPU 2 by job a" in caught.value.message
    agent.client.start_job(StartRequest(job_id="c", gpus=[3], argv=["sleep", "30"]))
    agent.client.stop_job("a", grace_s=0)
    agent.wait_ended("a")
    assert agent.client.start_job(StartRequest(job_id="b", gpus=[2], argv=["true"])).running


def test_the_exit_code_is_recorded(agent: Agent) -> None:
    agent.client.start_job(StartRequest(job_id="three", gpus=[0], shell="exit 3"))
    job = agent.wait_ended("three")
    assert (job.state, job.exit_code, job.signal) == (JobState.EXITED, 3, None)
    assert job.ended_at is not None and job.ended_at >= job.started_at
    agent.client.start_job(StartRequest(job_id="ok", gpus=[0], argv=[PY, "-c", "pass"]))
    assert agent.wait_ended("ok").exit_code == 0


def test_a_missing_program_exits_127_with_a_message_in_the_log(agent: Agent) -> None:
    agent.client.start_job(StartRequest(job_id="nope", gpus=[0], argv=["/no/such/program"]))
    assert agent.wait_ended("nope").exit_code == 127
    assert "cannot run '/no/such/program'" in agent.client.log("nope").text


def test_log_tail_returns_the_last_lines_of_stdout_and_stderr(agent: Agent) -> None:
    script = "import sys\nfor i in range(1, 51): print(f'line {i}', flush=True)\nprint('oops', file=sys.stderr)"
    agent.client.start_job(StartRequest(job_id="chatty", gpus=[0], argv=[PY, "-c", script]))
    agent.wait_ended("chatty")
    tail = agent.client.log("chatty", lines=4)
    assert tail.lines == ("line 48", "line 49", "line 50", "oops")
    assert len(agent.client.log("chatty").lines) == 51
    response = httpx.get(f"{agent.url}/v1/jobs/chatty/log?lines=zero", headers=AUTH)
    assert response.status_code == 400 and "lines" in response.json()["error"]


def test_the_child_sees_its_gpus_and_job_id(agent: Agent) -> None:
    script = (
        "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['PAIKA_JOB_ID'], "
        "os.environ.get('PAIKA_AGENT_TOKEN', 'no-token'), os.environ['MY_SETTING'], os.getcwd())"
    )
    request = StartRequest(
        job_id="env-1",
        gpus=[3, 1],
        argv=[PY, "-c", script],
        env={"MY_SETTING": "42", "CUDA_VISIBLE_DEVICES": "7"},
        cwd="/tmp",
    )
    agent.client.start_job(request)
    agent.wait_ended("env-1")
    assert agent.client.log("env-1").lines == ("3,1 env-1 no-token 42 /tmp",)


def test_a_job_sees_only_its_own_variables_never_the_agents(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAIKA_AGENT_TOKEN", "agent-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "planted-in-the-agent")
    agent.client.start_job(StartRequest(job_id="e", gpus=[2], argv=["env"], env={"MINE": "1"}))
    agent.wait_ended("e")
    seen = dict(line.split("=", 1) for line in agent.client.log("e").lines)
    assert set(seen) == {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "MINE", "CUDA_VISIBLE_DEVICES", "PAIKA_JOB_ID",
        "PAIKA_REPORT_FILE",
    }  # fmt: skip
    assert (seen["MINE"], seen["CUDA_VISIBLE_DEVICES"], seen["PAIKA_JOB_ID"]) == ("1", "2", "e")
    assert ".venv" not in seen["PATH"]  # a sane PATH, not the agent's


def test_stop_returns_at_once_and_a_job_that_exits_on_term_stops_promptly(agent: Agent) -> None:
    agent.client.start_job(StartRequest(job_id="polite", gpus=[0], argv=["sleep", "30"]))
    time.sleep(0.2)
    before = time.monotonic()
    response = httpx.post(f"{agent.url}/v1/jobs/polite/stop", json={"grace_s": 20}, headers=AUTH)
    assert response.status_code == 202
    assert response.json()["stop_requested"] is True
    assert time.monotonic() - before < 1.0
    job = agent.wait_ended("polite", timeout=3)
    assert (job.state, job.signal, job.exit_code) == (JobState.KILLED, 15, None)
    assert time.monotonic() - before < 3


def test_a_job_that_ignores_term_is_killed_after_the_grace_period(agent: Agent) -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(30)"
    agent.client.start_job(StartRequest(job_id="stubborn", gpus=[0], argv=[PY, "-c", stubborn]))
    wait_for(lambda: agent.client.log("stubborn").lines == ("ready",), what="the job to trap TERM")
    before = time.monotonic()
    agent.client.stop_job("stubborn", grace_s=0.6)
    time.sleep(0.3)
    assert agent.client.job("stubborn").state is JobState.RUNNING  # still in its grace period
    job = agent.wait_ended("stubborn", timeout=5)
    assert (job.state, job.signal) == (JobState.KILLED, 9)
    assert time.monotonic() - before >= 0.6


def test_a_job_that_cleans_up_on_term_records_its_own_exit_code(agent: Agent) -> None:
    shell = "trap 'echo cleaning up; exit 0' TERM; echo ready; while :; do sleep 0.05; done"
    agent.client.start_job(StartRequest(job_id="tidy", gpus=[0], shell=shell))
    wait_for(lambda: "ready" in agent.client.log("tidy").lines, what="the trap")
    agent.client.stop_job("tidy")
    job = agent.wait_ended("tidy")
    assert (job.state, job.exit_code, job.stop_requested) == (JobState.EXITED, 0, True)
    assert agent.client.log("tidy").lines[-1] == "cleaning up"


def test_stopping_an_ended_job_is_a_no_op(agent: Agent) -> None:
    agent.client.start_job(StartRequest(job_id="done", gpus=[0], argv=["true"]))
    agent.wait_ended("done")
    job = agent.client.stop_job("done", grace_s=1)
    assert (job.state, job.exit_code, job.stop_requested) == (JobState.EXITED, 0, False)


def test_unknown_jobs_are_404(agent: Agent) -> None:
    # (a stop for an unknown id is not: it leaves a tombstone, see test_agent_tombstones.py)
    for call in (
        lambda: agent.client.job("ghost"),
        lambda: agent.client.log("ghost"),
    ):
        with pytest.raises(JobNotFound) as caught:
            call()
        assert caught.value.status == 404 and "ghost" in caught.value.message


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"gpus": [0], "argv": ["true"]}, "job_id"),
        ({"job_id": "a b", "gpus": [0], "argv": ["true"]}, "job_id"),
        ({"job_id": "x" * 65, "gpus": [0], "argv": ["true"]}, "job_id"),
        ({"job_id": "a", "gpus": "0", "argv": ["true"]}, "gpus"),
        ({"job_id": "a", "gpus": [], "argv": ["true"]}, "gpus"),
        ({"job_id": "a", "gpus": [0, 0], "argv": ["true"]}, "gpus"),
        ({"job_id": "a", "gpus": [-1], "argv": ["true"]}, "gpus"),
        ({"job_id": "a", "gpus": [6], "argv": ["true"]}, "gpus"),  # the host has 0-5
        ({"job_id": "a", "gpus": [0]}, "argv, shell"),
        ({"job_id": "a", "gpus": [0], "argv": ["true"], "shell": "true"}, "argv, shell"),
        ({"job_id": "a", "gpus": [0], "argv": "true"}, "argv"),
        ({"job_id": "a", "gpus": [0], "argv": []}, "argv"),
        ({"job_id": "a", "gpus": [0], "argv": [1]}, "argv"),
        ({"job_id": "a", "gpus": [0], "shell": " "}, "shell"),
        ({"job_id": "a", "gpus": [0], "argv": ["true"], "env": {"A": 1}}, "env"),
        ({"job_id": "a", "gpus": [0], "argv": ["true"], "env": {"1A": "x"}}, "env"),
        ({"job_id": "a", "gpus": [0], "argv": ["true"], "env": ["A=1"]}, "env"),
        ({"job_id": "a", "gpus": [0], "argv": ["true"], "cwd": "/no/such/dir"}, "cwd"),
        ({"job_id": "a", "gpus": [0], "argv": ["true"], "cwd": "relative/dir"}, "cwd"),
        ({"job_id": "a", "gpus": [0], "argv": ["true"], "account": "../etc"}, "account"),
        ({"job_id": "a", "gpus": [0], "argv": ["true"], "account": "-oops"}, "account"),
        ({"job_id": "a", "gpus": [0], "argv": ["true"], "account": "a;id"}, "account"),
        ({"job_id": "a", "gpus": [0], "argv": ["true"], "account": "1000"}, "account"),
        ({"job_id": "a", "gpus": [0], "argv": ["true"], "account": "x" * 33}, "account"),
        ({"job_id": "a", "gpus": [0], "argv": ["true"], "image": "--privileged"}, "image"),
        ({"job_id": "a", "gpus": [0], "argv": ["true"], "colour": "red"}, "colour"),
        (
            {"job_id": "a", "gpus": [0], "argv": ["true"], "env": {"PAIKA_SIM_UTILIZATION": "x"}},
            "env",
        ),
        (["not", "an", "object"], "body"),
    ],
)
def test_bad_start_bodies_are_400_naming_the_field(agent: Agent, body: object, field: str) -> None:
    response = httpx.post(f"{agent.url}/v1/jobs", json=body, headers=AUTH)
    assert response.status_code == 400, response.text
    # the field, or a place in it: "env.A: expected a string, got a number"
    assert re.match(rf"{re.escape(field)}[:.]", response.json()["error"])
    assert agent.store.all_jobs() == []


def test_bodies_that_are_not_json_are_400(agent: Agent) -> None:
    for path in ("/v1/jobs", "/v1/jobs/x/stop"):
        response = httpx.post(f"{agent.url}{path}", content=b"{nope", headers=AUTH)
        assert response.status_code == 400
        assert response.json()["error"].startswith("body:")
    response = httpx.post(f"{agent.url}/v1/jobs", headers=AUTH)
    assert response.status_code == 400
    agent.client.start_job(StartRequest(job_id="s", gpus=[0], argv=["sleep", "5"]))
    response = httpx.post(f"{agent.url}/v1/jobs/s/stop", json={"grace_s": -1}, headers=AUTH)
    assert response.status_code == 400 and response.json()["error"].startswith("grace_s:")


def test_requests_are_checked_on_the_client_side_too() -> None:
    with pytest.raises(BadRequest, match="^job_id:"):
        StartRequest(job_id="..", gpus=[0], argv=["true"])
    with pytest.raises(BadRequest, match="^argv, shell:"):
        StartRequest(job_id="a", gpus=[0])
    request = StartRequest(job_id="a", gpus=[0, 1], argv=["x"], env={"A": "1"})
    assert StartRequest.from_json(request.to_json()) == request


def test_a_program_under_a_shell_gets_its_grace_after_the_shell_dies_of_the_stop(
    agent: Agent, tmp_path: Path
) -> None:
    # `sh -c "python train.py"`: the shell dies of the SIGTERM at once; the training it
    # started saves its work within the grace period, and is not killed with the shell.
    saved = tmp_path / "saved.txt"
    train = tmp_path / "train.py"
    train.write_text(
        "import signal, sys, time\n"
        "stop = []\n"
        "signal.signal(signal.SIGTERM, lambda *_: stop.append(1))\n"
        "print('ready', flush=True)\n"
        "while not stop:\n"
        "    time.sleep(0.05)\n"
        "time.sleep(0.8)  # saving its checkpoint\n"
        f"open({str(saved)!r}, 'w').write('saved')\n"
    )
    agent.client.start_job(StartRequest(job_id="resumable", gpus=[0], shell=f"{PY} {train}"))
    wait_for(lambda: "ready" in agent.client.log("resumable").lines, what="the job to trap TERM")
    before = time.monotonic()
    agent.client.stop_job("resumable", grace_s=20)
    time.sleep(0.3)
    assert agent.client.job("resumable").state is JobState.RUNNING  # saving, within its grace
    job = agent.wait_ended("resumable", timeout=10)
    assert saved.read_text() == "saved"
    assert job.stop_requested and job.signal != 9
    assert 0.8 <= time.monotonic() - before < 10


def test_a_program_under_a_shell_that_outlives_its_grace_is_killed(agent: Agent) -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(30)"
    agent.client.start_job(
        StartRequest(job_id="stubborn-sh", gpus=[0], shell=f'{PY} -c "{stubborn}"')
    )
    wait_for(lambda: agent.client.log("stubborn-sh").lines == ("ready",), what="the trap")
    before = time.monotonic()
    agent.client.stop_job("stubborn-sh", grace_s=0.6)
    job = agent.wait_ended("stubborn-sh", timeout=5)
    assert (job.state, job.signal) == (JobState.KILLED, 9)
    assert time.monotonic() - before >= 0.6


def test_a_resumable_job_gets_a_checkpoint_folder_of_its_own_kept_across_its_runs(
    agent: Agent,
) -> None:
    show = "import os; print(os.environ['PAIKA_CHECKPOINT_DIR'], flush=True)"
    for run in ("7.1", "7.2"):
        agent.client.start_job(
            StartRequest(job_id=run, gpus=[0], argv=[PY, "-c", show], checkpoints="job-7")
        )
        agent.wait_ended(run)
    first, second = (agent.client.log(run).lines for run in ("7.1", "7.2"))
    folder = agent.state_dir.with_name(f"{agent.state_dir.name}-checkpoints") / "job-7"
    assert first == second == (str(folder),)
    assert folder.is_dir() and (folder.stat().st_mode & 0o777) == 0o700
    # A job without it is told nothing of the sort.
    agent.client.start_job(StartRequest(job_id="plain", gpus=[0], argv=[PY, "-c", show]))
    assert agent.wait_ended("plain").exit_code == 1
    with pytest.raises(BadRequest):
        StartRequest(job_id="x", gpus=[0], argv=["true"], checkpoints="../escape")
