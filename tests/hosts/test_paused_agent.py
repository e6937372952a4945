"""A real `paika agent` process paused with SIGSTOP (a hung host) and resumed: its job turns
unknown, keeps its GPUs, and runs on when the agent answers again — never failed, never
killed as an orphan, never started twice."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from agent_world import TOKEN, job, make_cycle, ok, submit

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.notices.events import EventKind, RecordingObserver
from storage.models import JobState

PAIKA = str(Path(sys.executable).with_name("paika"))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_healthy(url: str, process: subprocess.Popen[bytes], timeout: float = 120.0) -> bool:
    """True once the agent answers; False if its process ended first (e.g. its port was
    taken meanwhile). Generous: a loaded machine is slow to start Python, not wrong."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            if httpx.get(f"{url}/v1/health", timeout=1.0).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the agent at {url} did not come up within {timeout:g} s")


def _start_agent(state: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`paika agent` on a free port (a port taken between probing and binding: try another)."""
    env = {**os.environ, "PAIKA_AGENT_TOKEN": TOKEN}
    for _ in range(3):
        port = _free_port()
        with log.open("ab") as errors:
            process = subprocess.Popen(
                # CI runs as root: the test's job may run as root only when the agent is told so.
                [PAIKA, "agent", "--simulate", "2xA100-80GB", "--host", "127.0.0.1"]
                + ["--allow-root-jobs"]
                + ["--port", str(port), "--state-dir", str(state), "--grace-s", "0.5"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=errors,
            )
        url = f"http://127.0.0.1:{port}"
        if _wait_healthy(url, process):
            return process, url
    raise AssertionError(f"the agent would not start: {log.read_text()[-2000:]}")


def _runs(url: str) -> dict[str, str]:
    answer = httpx.get(
        f"{url}/v1/jobs", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5.0
    ).json()
    return {run["job_id"]: run["state"] for run in answer["jobs"]}


@pytest.fixture
def agent_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    process, url = _start_agent(tmp_path / "agent", tmp_path / "agent.log")
    try:
        yield process, url
    finally:
        process.send_signal(signal.SIGCONT)
        for run, state in _runs_or_nothing(url).items():
            if state == "running":
                httpx.post(
                    f"{url}/v1/jobs/{run}/stop",
                    headers={"Authorization": f"Bearer {TOKEN}"},
                    json={"grace_s": 0},
                    timeout=5.0,
                )
        process.terminate()
        process.wait(timeout=30)


def _runs_or_nothing(url: str) -> dict[str, str]:
    try:
        return _runs(url)
    except (httpx.HTTPError, ValueError, KeyError):
        return {}


def test_a_paused_agent_makes_its_job_unknown_and_resuming_it_finds_the_job_running(
    paika: Paika, clock: ManualClock, agent_process: tuple[subprocess.Popen[bytes], str]
) -> None:
    process, url = agent_process
    paika.policy = paika.policy.model_copy(  # no headroom: a normal job may take both cards
        update={"scheduler": paika.policy.scheduler.model_copy(update={"headroom": {}})}
    )
    ok(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    ok(paika, "UADMIN", f"admin host add gpu-p url={url}")
    notifier = RecordingObserver()
    cycle = make_cycle(paika, notifier)
    cycle.run_once()  # the host's GPUs are read
    submit(paika, "hung", "sleep 60", gpus=2, extra="type=A100-80GB")
    clock.advance(timedelta(seconds=10))
    cycle.run_once()
    hung = job(paika, "hung")
    assert hung.state == JobState.RUNNING and hung.confirmed_at is not None

    process.send_signal(signal.SIGSTOP)  # the agent hangs; its job's process runs on
    for _ in range(3):
        clock.advance(timedelta(seconds=60))
        cycle.run_once()  # each poll times out
    assert job(paika, "hung").state == JobState.UNKNOWN
    assert EventKind.JOB_UNKNOWN in notifier.kinds()

    process.send_signal(signal.SIGCONT)
    clock.advance(timedelta(seconds=10))
    cycle.run_once()
    back = job(paika, "hung")
    assert back.state == JobState.RUNNING and back.attempts == 1
    assert _runs(url) == {f"{back.id}.1": "running"}  # the same run, not stopped, not doubled
    assert EventKind.JOB_FAILED not in notifier.kinds()
    assert EventKind.JOB_LOST not in notifier.kinds()
