"""Jobs with an image run through the container runtime, built as an argv list."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_harness import Agent, shutdown_agent, start_agent, wait_for

from scheduler.agent.protocol import JobState, StartRequest

FAKE_RUNTIME = """#!{python}
import json, os, signal, sys, time
with open({calls!r}, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1] == "run":
    print(json.dumps({{"argv": sys.argv[1:], "FOO": os.environ.get("FOO"),
                      "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}}), flush=True)
    if "stubborn" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(30)
"""


@pytest.fixture
def container_agent(tmp_path: Path) -> Iterator[tuple[Agent, Path]]:
    calls = tmp_path / "calls.jsonl"
    runtime = tmp_path / "fake-docker"
    runtime.write_text(FAKE_RUNTIME.format(python=sys.executable, calls=str(calls)))
    runtime.chmod(0o755)
    agent = start_agent(tmp_path / "state", container_runtime=str(runtime))
    yield agent, calls
    shutdown_agent(agent)


def test_an_image_job_runs_through_the_runtime_without_a_shell(
    container_agent: tuple[Agent, Path],
) -> None:
    agent, _ = container_agent
    request = StartRequest(
        job_id="img-1",
        gpus=[0, 2],
        argv=["python", "train.py", "--lr", "1e-3; rm -rf /"],
        env={"FOO": "s3cret value"},
        image="registry.example.com/team/train:2.1",
    )
    job = agent.client.start_job(request)
    expected = [
        "run",
        "--rm",
        "--init",
        "--name",
        "paika-img-1",
        "--label",
        "paika.job_id=img-1",
        "--gpus",
        '"device=0,2"',
        "-e",
        "PAIKA_JOB_ID",
        "-e",
        "FOO",
        "registry.example.com/team/train:2.1",
        "python",
        "train.py",
        "--lr",
        "1e-3; rm -rf /",
    ]
    assert list(job.command[1:]) == expected
    assert job.image == "registry.example.com/team/train:2.1"
    agent.wait_ended("img-1")
    seen = json.loads(agent.client.log("img-1").lines[0])
    assert seen == {"argv": expected, "FOO": "s3cret value", "CUDA_VISIBLE_DEVICES": "0,2"}
    assert "s3cret value" not in " ".join(job.command)  # values travel in the environment


def test_a_shell_job_in_an_image_runs_sh_inside_the_container(
    container_agent: tuple[Agent, Path],
) -> None:
    agent, _ = container_agent
    job = agent.client.start_job(
        StartRequest(job_id="img-2", gpus=[1], shell="nvidia-smi && echo ok", image="ubuntu:24.04")
    )
    assert list(job.command[-4:]) == ["ubuntu:24.04", "/bin/sh", "-c", "nvidia-smi && echo ok"]


def test_killing_an_image_job_also_asks_the_runtime_to_kill_the_container(
    container_agent: tuple[Agent, Path],
) -> None:
    agent, calls = container_agent
    agent.client.start_job(
        StartRequest(job_id="img-3", gpus=[0], argv=["stubborn"], image="ubuntu:24.04")
    )
    wait_for(lambda: bool(agent.client.log("img-3").lines), what="the fake container")
    agent.client.stop_job("img-3", grace_s=0.2)
    job = agent.wait_ended("img-3")
    assert (job.state, job.signal) == (JobState.KILLED, 9)
    wait_for(lambda: '["kill", "paika-img-3"]' in calls.read_text(), what="runtime kill")
