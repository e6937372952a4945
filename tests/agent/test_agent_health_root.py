"""An agent's /v1/health says whether it runs as root (and so runs each job as its owner's
mapped account): what `paika doctor` reads to name the members no account maps."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from scheduler.agent.app import build_app
from scheduler.agent.isolation import RunAs
from scheduler.agent.jobs import JobStore
from scheduler.agent.protocol import Health
from scheduler.agent.simulated import SimulatedReader
from scheduler.serving import serve_in_thread, stop_server


def test_health_says_whether_the_agent_runs_as_root(tmp_path: Path) -> None:
    with JobStore(tmp_path / "state", run_as=RunAs.for_this_process()) as store:
        server, thread, port = serve_in_thread(build_app(SimulatedReader("1xT4"), store, "t"))
        try:
            answer = httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=10)
        finally:
            stop_server(server, thread)
    health = Health.from_json(answer.content)
    assert health.root is (os.geteuid() == 0)
    assert answer.json()["root"] is health.root
    # An older agent's answer, without the field, reads as not root.
    older = {k: v for k, v in answer.json().items() if k != "root"}
    assert Health.model_validate(older).root is False
