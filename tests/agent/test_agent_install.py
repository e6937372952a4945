"""A GPU host installs only the agent's set (`paika[agent]`, exactly as uv.lock pins it) and
`paika agent` starts from it, serves over HTTP and runs a job; the scheduler's stacks are not
there, and a server command says which extra it needs instead of a traceback."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_harness import TOKEN, run_paika_counting_modules, wait_for
from paika_test_servers import servers_required

from scheduler.agent.client import AgentClient
from scheduler.agent.protocol import JobState, StartRequest

ROOT = Path(__file__).resolve().parents[2]
# The scheduler's stacks: none of them may be in an agent's install.
SERVER_ONLY = [
    "slack_bolt",
    "slack_sdk",
    "sqlalchemy",
    "sqlmodel",
    "alembic",
    "apscheduler",
    "matplotlib",
    "boto3",
    "orjson",
    "yaml",
    "pydantic_settings",
]

# What the count guards: the agent's start-up weight on a GPU host, counted on the agent's own
# install, where no optional package of another role can be picked up. With the locked versions
# `paika agent` loads about 400 modules; the scheduler's stacks load about 1,400. A release of
# one of the agent's own dependencies moves the count by tens: the bound sits well above
# today's figure and well below any stack's, so only a new heavy import breaks it.
MAX_MODULES = 600


def _uv() -> str:
    found = shutil.which(
        "uv", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    )
    if found is None:
        message = "uv is not installed (the README's commands install it)"
        if servers_required():
            pytest.fail(message)
        pytest.skip(message)
    return found


# Its tests share one build of the package, made in the tree's build/ folder: on one worker,
# or two workers' builds would remove each other's folder midway (seen on a busy machine).
pytestmark = pytest.mark.xdist_group("agent-install")


@pytest.fixture(scope="module")
def agent_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with paika[agent] from the lock, from uv's cache only: the
    README's install has already fetched every package the agent needs."""
    venv = tmp_path_factory.mktemp("agent-host") / "venv"
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(venv)}
    done = subprocess.run(
        [
            _uv(),
            "sync",
            "--quiet",
            "--offline",
            "--locked",
            "--no-editable",
            # (built afresh from the tree: uv would otherwise reuse its cached build of paika)
            "--reinstall-package",
            "paika",
            "--extra",
            "agent",
            "--python",
            sys.executable,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # setuptools leaves its build folder in the tree and copies from it into the next wheel,
    # stale modules included: the wheel tested here, and the next one, start from none.
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    assert done.returncode == 0, done.stderr
    return venv


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def agent_process(agent_venv: Path, tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, "PAIKA_AGENT_TOKEN": TOKEN}
    argv = ["agent", "--simulate", "2xT4", "--port", str(port), "--allow-root-jobs"]
    argv += ["--state-dir", str(tmp_path / "agent")]
    with (tmp_path / "agent.log").open("wb") as log:
        process = subprocess.Popen(
            [str(agent_venv / "bin" / "paika"), *argv], env=env, stdout=log, stderr=log
        )
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


def test_the_agent_starts_light_from_its_own_install(agent_venv: Path, tmp_path: Path) -> None:
    python = str(agent_venv / "bin" / "python")
    args = ("agent", "--simulate", "2xT4", "--state-dir", str(tmp_path / "agent"))
    started = run_paika_counting_modules(python, *args)
    assert started["app"] == "Starlette"
    modules = started["modules"]
    assert isinstance(modules, list)
    assert len(modules) < MAX_MODULES, f"{len(modules)} modules loaded"


def test_the_agents_install_holds_none_of_the_servers_packages(agent_venv: Path) -> None:
    probe = "import importlib.util, sys; print([m for m in sys.argv[1:] if importlib.util.find_spec(m)])"
    done = subprocess.run(
        [str(agent_venv / "bin" / "python"), "-c", probe, *SERVER_ONLY],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "[]"


def test_the_installed_packages_hold_no_test_fakes(agent_venv: Path) -> None:
    # The offline Slack serves tests and benches from tests/fake_slack; paika never ships it.
    probe = "import importlib.util as u; print([m for m in ('fake_slack', 'bot.offline') if u.find_spec(m)])"
    done = subprocess.run(
        [str(agent_venv / "bin" / "python"), "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=agent_venv,
    )
    assert done.stdout.strip() == "[]"


def test_paika_agent_starts_from_the_agents_install_and_runs_a_job(agent_process: str) -> None:
    client = AgentClient(agent_process, TOKEN)
    try:
        wait_for(lambda: _answers(client), timeout=60, what="the agent to answer")
        assert len(client.gpus()) == 2
        client.start_job(StartRequest(job_id="lean-1", gpus=[0], shell="exit 7"))
        wait_for(
            lambda: client.job("lean-1").state is not JobState.RUNNING,
            timeout=30,
            what="the job to end",
        )
        ended = client.job("lean-1")
        assert (ended.state, ended.exit_code) == (JobState.EXITED, 7)
    finally:
        client.close()


def test_a_server_command_on_the_agents_install_names_the_extra_it_needs(agent_venv: Path) -> None:
    done = subprocess.run(
        [str(agent_venv / "bin" / "paika"), "cmd", "queue", "--user", "U1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "paika[server]" in done.stderr
    assert "Traceback" not in done.stderr


def _answers(client: AgentClient) -> bool:
    try:
        client.health()
    except Exception:
        return False
    return True
