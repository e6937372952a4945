"""The dispatcher hands the site's container options to the agents, and a host that will not
run a job as its account refuses the start with a reason the scheduler keeps."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_world import TOKEN

from scheduler.agent.app import build_app
from scheduler.agent.client import AgentClient
from scheduler.agent.jobs import JobStore
from scheduler.agent.protocol import ContainerOptions
from scheduler.agent.simulated import SimulatedReader
from scheduler.dispatch import AgentDispatcher, DispatchError, StartOrder
from scheduler.serving import serve_in_thread, stop_server


def _serve(store: JobStore) -> Iterator[str]:
    """Serve the store as host gpu-a's agent; stop its jobs and close it afterwards."""
    app = build_app(SimulatedReader("2xT4", loads=store), store, TOKEN, host="gpu-a")
    server, thread, port = serve_in_thread(app)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_server(server, thread)
        for job in store.all_jobs():
            if job.running:
                store.stop(job.job_id, grace_s=0)
        store.close()


@pytest.fixture
def container_host(tmp_path: Path) -> Iterator[str]:
    runtime = tmp_path / "fake-docker"
    runtime.write_text(f"#!{sys.executable}\nimport sys\nprint(sys.argv[1:])\n")
    runtime.chmod(0o755)
    store = JobStore(
        tmp_path / "state", container_runtime=str(runtime), allow_root_jobs=True, use_cgroups=False
    )
    yield from _serve(store)


def _order(url: str, image: str | None) -> StartOrder:
    return StartOrder(7, 1, "gpu-a", url, (0,), "python train.py", image)


def test_container_jobs_carry_the_sites_options_and_other_jobs_none(
    container_host: str, tmp_path: Path
) -> None:
    options = ContainerOptions(
        mounts=[{"source": "/datasets", "target": "/data"}], shm_size="16g", ipc="host"
    )
    AgentDispatcher(TOKEN, containers=options).start(_order(container_host, "ubuntu:24.04"))
    with AgentClient(container_host, TOKEN) as client:
        command = list(client.job("7.1").command)
    at = command.index("ubuntu:24.04")
    assert command[at - 6 : at] == [
        "--volume", "/datasets:/data:ro", "--ipc", "host", "--shm-size", "16g",
    ]  # fmt: skip


@pytest.mark.skipif(os.geteuid() != 0, reason="the rule is for agents running as root")
def test_a_host_refusing_the_account_is_a_requeue_with_the_agents_reason(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "state", use_cgroups=False)  # root, no --allow-root-jobs
    for url in _serve(store):
        with pytest.raises(DispatchError) as caught:
            AgentDispatcher(TOKEN).start(_order(url, None))
        refused = caught.value
        # Known and reached (nothing runs there), not the job's own fault: queued again,
        # with the agent's words in the reason the job's history keeps.
        assert (refused.known, refused.reached, refused.bad_order) == (True, True, False)
        assert "does not run jobs as root" in refused.problem and "403" in refused.problem
