"""Jobs with an image run through the container runtime, built as an argv list."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_harness import Agent, shutdown_agent, start_agent, wait_for

from scheduler.agent.errors import BadRequest
from scheduler.agent.protocol import ContainerOptions, JobState, StartRequest

FAKE_RUNTIME = """#!{python}
import json, os, signal, sys, time
with open({calls!r}, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1] == "run":
    env_file = sys.argv[sys.argv.index("--env-file") + 1]
    print(json.dumps({{"argv": sys.argv[1:], "env_file": open(env_file).read(),
                      "FOO": os.environ.get("FOO")}}), flush=True)
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
    # The run's report file, bind-mounted where PAIKA_REPORT_FILE points inside.
    mount = job.command[job.command.index("--mount") + 1]
    report = Path(mount.split(",")[1].removeprefix("source="))
    assert mount == f"type=bind,source={report},target=/run/paika-report"
    assert report.parent == agent.state_dir.with_name(f"{agent.state_dir.name}-reports")
    expected = [
        "run",
        "--rm",
        "--init",
        "--name",
        "paika-img-1",
        "--label",
        "paika.job_id=img-1",
        "--user",
        f"{os.geteuid()}:{os.getegid()}",
        *[
            arg
            for g in sorted(set(os.getgroups()))
            if g != os.getegid()
            for arg in ("--group-add", str(g))
        ],
        "--security-opt",
        "no-new-privileges",
        "--cap-drop",
        "ALL",
        "--gpus",
        '"device=0,2"',
        "--env-file",
        str(agent.state_dir / "envs" / "img-1.env"),
        "--mount",
        mount,
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
    # The values travel in a file only the agent reads, not in argv (ps) nor in the client's
    # environment (the client runs as the agent's user: nothing of the job's reaches it).
    assert seen == {
        "argv": expected,
        "env_file": "FOO=s3cret value\nPAIKA_JOB_ID=img-1\nPAIKA_REPORT_FILE=/run/paika-report\n",
        "FOO": None,
    }
    assert "s3cret value" not in " ".join(job.command)
    assert not (agent.state_dir / "envs" / "img-1.env").exists()  # removed when the job ended


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


def test_the_sites_container_options_become_one_argv_element_per_value(
    container_agent: tuple[Agent, Path],
) -> None:
    agent, _ = container_agent
    options = ContainerOptions(
        mounts=[
            {"source": "/datasets", "target": "/data"},
            {"source": "/scratch/ckpt/", "target": "/ckpt", "read_only": False},
        ],
        ipc="host",
        shm_size="16g",
        network="host",
    )
    job = agent.client.start_job(
        StartRequest(
            job_id="img-4", gpus=[0], argv=["true"], image="ubuntu:24.04", container=options
        )
    )
    command = list(job.command)
    at = command.index("ubuntu:24.04")
    assert command[at - 10 : at] == [
        "--volume", "/datasets:/data:ro", "--volume", "/scratch/ckpt:/ckpt",
        "--ipc", "host", "--shm-size", "16g", "--network", "host",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mounts": [{"source": "data", "target": "/data"}]}, "container.mounts.0.source:"),
        ({"mounts": [{"source": "/a:/etc", "target": "/data"}]}, "container.mounts.0.source:"),
        (
            {"mounts": [{"source": "/a,readonly=false", "target": "/d"}]},
            "container.mounts.0.source:",
        ),
        ({"mounts": [{"source": "/a/../etc", "target": "/data"}]}, "container.mounts.0.source:"),
        ({"mounts": [{"source": "/a", "target": "-v"}]}, "container.mounts.0.target:"),
        (
            {"mounts": [{"source": "/a", "target": "/d"}, {"source": "/b", "target": "/d"}]},
            "container.mounts:",
        ),
        (
            {"mounts": [{"source": "/a", "target": "/d", "options": "rw"}]},
            "container.mounts.0.options:",
        ),
        ({"ipc": "--privileged"}, "container.ipc:"),
        ({"ipc": "container:other"}, "container.ipc:"),
        ({"shm_size": "-1g"}, "container.shm_size:"),
        ({"shm_size": "16g --privileged"}, "container.shm_size:"),
        ({"network": "container:db"}, "container.network:"),
        ({"privileged": True}, "container.privileged:"),
    ],
)
def test_container_options_that_could_inject_or_escape_are_refused(
    options: dict[str, object], message: str
) -> None:
    body = {"job_id": "a", "gpus": [0], "argv": ["true"], "image": "ubuntu", "container": options}
    with pytest.raises(BadRequest) as caught:
        StartRequest.from_json(json.dumps(body))
    assert caught.value.message.startswith(message), caught.value.message


def test_a_container_jobs_variable_cannot_hold_a_line_break() -> None:
    with pytest.raises(BadRequest, match="^env.A: a container job's variable cannot hold"):
        StartRequest(job_id="a", gpus=[0], argv=["x"], image="ubuntu", env={"A": "1\nB=2"})
    assert StartRequest(job_id="a", gpus=[0], argv=["x"], env={"A": "1\nB=2"}).env["A"] == "1\nB=2"
