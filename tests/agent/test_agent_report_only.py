"""`paika agent --report-only`: it serves its GPU readings and refuses every start, over real
HTTP (the mode for the nodes of a Slurm pool, where Slurm alone runs jobs)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import uvicorn
from agent_harness import SPEC, TOKEN
from typer.testing import CliRunner

from scheduler.agent.app import build_app
from scheduler.agent.client import AgentClient
from scheduler.agent.command import agent
from scheduler.agent.errors import AgentError
from scheduler.agent.jobs import JobStore
from scheduler.agent.protocol import StartRequest
from scheduler.agent.simulated import SimulatedReader
from scheduler.serving import serve_in_thread, stop_server


def _served(app: Any) -> Iterator[AgentClient]:
    server, thread, port = serve_in_thread(app)
    client = AgentClient(f"http://127.0.0.1:{port}", TOKEN)
    try:
        yield client
    finally:
        client.close()
        stop_server(server, thread)


@pytest.fixture(autouse=True)
def _keep_umask(keep_umask: None) -> None:
    """`paika agent` sets the process's umask; these tests run it in pytest's process."""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[JobStore]:
    store = JobStore(tmp_path / "state", allow_root_jobs=True)
    yield store
    store.close()


@pytest.fixture
def report_only(store: JobStore) -> Iterator[AgentClient]:
    """A report-only agent with simulated GPUs on loopback: a client with its token."""
    reader = SimulatedReader(SPEC, host="node-1", loads=store)
    yield from _served(build_app(reader, store, TOKEN, host="node-1", report_only=True))


def test_a_report_only_agent_serves_its_readings(report_only: AgentClient) -> None:
    health = report_only.health()
    assert (health.host, health.report_only) == ("node-1", True)
    status = report_only.status()
    assert [g.index for g in status.gpus] == [0, 1, 2, 3, 4, 5]
    assert all(g.utilization_pct is not None for g in status.gpus)
    assert list(status.jobs) == []


def test_a_report_only_agent_refuses_every_start_and_says_so(
    report_only: AgentClient, store: JobStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="scheduler.agent.app")
    for _ in range(2):  # a repeat is refused as well: nothing was started to return
        with pytest.raises(AgentError) as refused:
            report_only.start_job(StartRequest(job_id="j1", gpus=[0], argv=["true"]))
        assert refused.value.status == 403
        assert "report-only" in refused.value.message and "j1" in refused.value.message
    assert store.all_jobs() == [] and report_only.jobs() == []
    assert all(g.job_id is None for g in report_only.gpus())
    refusals = [r for r in caplog.records if "report-only" in r.getMessage()]
    assert len(refusals) == 2 and "j1" in refusals[0].getMessage()


def test_an_ordinary_agent_says_it_is_not_report_only(store: JobStore) -> None:
    reader = SimulatedReader("1xT4", host="gpu-a", loads=store)
    for client in _served(build_app(reader, store, TOKEN)):
        assert client.health().report_only is False


def test_the_report_only_flag_reaches_the_served_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: calls.append(app))
    monkeypatch.setenv("PAIKA_AGENT_TOKEN", TOKEN)
    args = ["--simulate", "2xT4", "--report-only", "--state-dir", str(tmp_path / "st")]
    result = CliRunner().invoke(_cli(), ["agent", *args])
    assert result.exit_code == 0, result.output
    assert "report-only" in result.output
    for client in _served(calls[0]):
        assert client.health().report_only is True
        with pytest.raises(AgentError) as refused:
            client.start_job(StartRequest(job_id="j2", gpus=[1], argv=["true"]))
        assert refused.value.status == 403


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command("agent")(agent)

    @app.command("other")
    def other() -> None:  # a second command, so "agent" stays a subcommand as in paika
        pass

    return app
