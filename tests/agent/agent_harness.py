"""Helpers for the agent tests: a simulated agent served over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from scheduler.agent.app import build_app
from scheduler.agent.client import AgentClient
from scheduler.agent.jobs import JobStore
from scheduler.agent.protocol import JobInfo, JobState
from scheduler.agent.simulated import SimulatedReader
from scheduler.serving import serve_in_thread, stop_server

TOKEN = "test-token-0123456789"
SPEC = "4xA100-80GB,2xT4-16GB"
PY = sys.executable


def wait_for(check: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


@dataclass
class Agent:
    """One running agent: its URL, a client with the right token, and its parts."""

    url: str
    client: AgentClient
    store: JobStore
    reader: SimulatedReader
    state_dir: Path
    server: uvicorn.Server
    thread: threading.Thread

    def wait_ended(self, job_id: str, timeout: float = 5.0) -> JobInfo:
        wait_for(
            lambda: self.client.job(job_id).state is not JobState.RUNNING,
            timeout,
            f"job {job_id} to end",
        )
        return self.client.job(job_id)


# The tests run as root on CI: the agent may run their jobs as root only when told so.
ALLOW_ROOT_JOBS = True


def start_agent(state_dir: Path, *, container_runtime: str = "docker") -> Agent:
    store = JobStore(
        state_dir,
        poll_interval_s=0.05,
        container_runtime=container_runtime,
        allow_root_jobs=ALLOW_ROOT_JOBS,
    )
    reader = SimulatedReader(SPEC, host="test-host", loads=store)
    server, thread, port = serve_in_thread(build_app(reader, store, TOKEN))
    url = f"http://127.0.0.1:{port}"
    return Agent(url, AgentClient(url, TOKEN), store, reader, state_dir, server, thread)


def shutdown_agent(agent: Agent, *, kill_jobs: bool = True) -> None:
    """Stop serving; with kill_jobs, SIGKILL what still runs and wait until it is reaped."""
    stop_server(agent.server, agent.thread)
    agent.client.close()
    if kill_jobs and not agent.store._closed:
        for job in agent.store.all_jobs():
            if job.state is JobState.RUNNING:
                agent.store.stop(job.job_id, grace_s=0)
        wait_for(
            lambda: all(j.state is not JobState.RUNNING for j in agent.store.all_jobs()),
            10,
            "the test's jobs to end",
        )
    agent.store.close()


# Runs the real console entry. uvicorn.run is where `paika agent` hands its built app to the
# server: there the modules are counted, and nothing binds a port.
AGENT_STARTUP = """
import json, sys
import uvicorn

def serve(app, **options):
    print(json.dumps({"modules": sorted(sys.modules), "app": type(app).__name__}))

uvicorn.run = serve
sys.argv = ["paika", *sys.argv[1:]]
from bot.cli import main
try:
    main()
except SystemExit as exc:
    if exc.code:
        raise
    if "--help" in sys.argv:
        print(json.dumps({"modules": sorted(sys.modules), "app": None}))
"""


def run_paika_counting_modules(python: str, *args: str) -> dict[str, object]:
    """Run `paika ARGS` with the interpreter `python` up to where it would serve: the modules
    it loaded, and the class of the app it built."""
    env = {**os.environ, "PAIKA_AGENT_TOKEN": TOKEN}
    done = subprocess.run(
        [python, "-c", AGENT_STARTUP, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result
