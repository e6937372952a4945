"""The clients: typed results, and foreign errors converted at the boundary."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_harness import ALLOW_ROOT_JOBS, PY, Agent, wait_for

from scheduler.agent.app import build_app
from scheduler.agent.client import AgentClient, AsyncAgentClient, Endpoints, endpoint
from scheduler.agent.errors import (
    AgentAuthError,
    AgentError,
    AnswerLost,
    BadRequest,
    GpuReadError,
    HostUnreachable,
    JobConflict,
    JobNotFound,
)
from scheduler.agent.jobs import JobStore
from scheduler.agent.protocol import JobInfo, JobState, StartRequest
from scheduler.agent.simulated import SimulatedReader
from scheduler.serving import serve_in_thread, stop_server


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_closed_port_is_host_unreachable() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with AgentClient(url, "t", timeout=1) as client, pytest.raises(HostUnreachable) as caught:
        client.health()
    assert caught.value.url == url and caught.value.status is None
    assert isinstance(caught.value, AgentError)
    assert url in str(caught.value)


def test_a_closed_port_is_not_an_answer_lost() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with AgentClient(url, "t", timeout=1) as client, pytest.raises(HostUnreachable) as caught:
        client.start_job(StartRequest(job_id="a", gpus=[0], argv=["true"]))
    assert type(caught.value) is HostUnreachable


# Nothing was sent: the agent cannot have acted on the request.
NOT_SENT = [httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol]
# The request may have reached the agent; only the answer is missing.
MAYBE_SENT = [
    httpx.ReadTimeout,
    httpx.WriteTimeout,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
    httpx.CloseError,
]


def _raising(kind: type[httpx.TransportError]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        raise kind("boom", request=request)

    return httpx.MockTransport(handler)


@pytest.mark.parametrize("kind", NOT_SENT + MAYBE_SENT)
def test_transport_errors_split_into_unreachable_and_answer_lost(
    kind: type[httpx.TransportError],
) -> None:
    expected = AnswerLost if kind in MAYBE_SENT else HostUnreachable
    pattern = f"gpu-a:8470.*{kind.__name__}"
    with (
        AgentClient("http://gpu-a:8470", "t", transport=_raising(kind)) as client,
        pytest.raises(HostUnreachable, match=pattern) as caught,
    ):
        client.jobs()
    assert type(caught.value) is expected
    assert caught.value.url == "http://gpu-a:8470" and caught.value.status is None

    async def scenario() -> None:
        async with AsyncAgentClient("http://gpu-a:8470", "t", transport=_raising(kind)) as aclient:
            with pytest.raises(HostUnreachable, match=pattern) as caught:
                await aclient.jobs()
            assert type(caught.value) is expected

    asyncio.run(scenario())


def test_a_bad_address_is_host_unreachable() -> None:
    for url in ("ftp://gpu-a:8470", "gpu-a:8470"):  # no scheme: the host reads as one
        with AgentClient(url, "t") as client, pytest.raises(HostUnreachable) as caught:
            client.health()
        assert type(caught.value) is HostUnreachable and url in str(caught.value)


class _SlowStarts(JobStore):
    """A JobStore whose starts wait until the test lets them go."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entered = threading.Event()
        self.release = threading.Event()

    def start(self, req: StartRequest) -> tuple[JobInfo, bool]:
        self.entered.set()
        self.release.wait(timeout=30)
        return super().start(req)


def test_a_start_slower_than_the_client_timeout_is_answer_lost(tmp_path: Path) -> None:
    store = _SlowStarts(tmp_path, poll_interval_s=0.05, allow_root_jobs=ALLOW_ROOT_JOBS)
    reader = SimulatedReader("2xT4-16GB", loads=store)
    server, thread, port = serve_in_thread(build_app(reader, store, "tok"))
    url = f"http://127.0.0.1:{port}"
    try:
        with AgentClient(url, "tok", timeout=0.3) as client:
            with pytest.raises(AnswerLost, match="ReadTimeout") as caught:
                client.start_job(StartRequest(job_id="slow", gpus=[0], argv=["true"]))
            assert caught.value.url == url
            assert store.entered.is_set()  # the request did reach the agent
            store.release.set()
        # ... and the run starts after all: the caller must ask, not assume (with a client
        # whose timeout a busy machine's answers fit in)
        with AgentClient(url, "tok") as patient:
            wait_for(lambda: patient.jobs() != [], what="the late start")
            assert patient.job("slow").job_id == "slow"
    finally:
        store.release.set()
        stop_server(server, thread)
        store.close()


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, BadRequest),
        (401, AgentAuthError),
        (404, JobNotFound),
        (409, JobConflict),
        (503, GpuReadError),
        (500, AgentError),
        (418, AgentError),
    ],
)
def test_error_statuses_become_agent_errors(status: int, error: type[AgentError]) -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(status, json={"error": "nope"}))
    with (
        AgentClient("http://a", "t", transport=transport) as client,
        pytest.raises(error) as caught,
    ):
        client.job("x")
    assert type(caught.value) is error
    assert (caught.value.status, caught.value.message) == (status, "nope")


def test_responses_that_do_not_parse_are_agent_errors() -> None:
    replies = iter(
        [
            httpx.Response(502, text="<html>Bad Gateway</html>"),
            httpx.Response(200, text="not json"),
            httpx.Response(200, json={"jobs": [{"job_id": "x"}]}),
            httpx.Response(200, json=[1, 2]),
        ]
    )
    transport = httpx.MockTransport(lambda r: next(replies))
    with AgentClient("http://a", "t", transport=transport) as client:
        with pytest.raises(AgentError, match="Bad Gateway") as caught:
            client.jobs()
        assert caught.value.status == 502
        with pytest.raises(AgentError, match="not JSON"):
            client.jobs()
        with pytest.raises(AgentError, match=r"unexpected response: jobs\.0\.state: missing"):
            client.jobs()
        with pytest.raises(AgentError, match="expected a JSON object, got a list"):
            client.gpus()


def test_the_async_client_has_the_same_methods(agent: Agent) -> None:
    async def scenario() -> None:
        async with AsyncAgentClient(agent.url, "test-token-0123456789") as client:
            assert (await client.health()).host == "test-host"
            assert len(await client.gpus()) == 6
            started = await client.start_job(
                StartRequest(job_id="a1", gpus=[0], argv=[PY, "-c", "print('hi')"])
            )
            assert started.state is JobState.RUNNING
            while (await client.job("a1")).state is JobState.RUNNING:
                await asyncio.sleep(0.02)
            assert [j.job_id for j in await client.jobs()] == ["a1"]
            assert (await client.log("a1", lines=5)).lines == ("hi",)
            assert (await client.stop_job("a1", grace_s=1)).exit_code == 0
            with pytest.raises(JobNotFound):
                await client.job("zz")
        async with AsyncAgentClient(f"http://127.0.0.1:{_closed_port()}", "t") as down:
            with pytest.raises(HostUnreachable):
                await down.health()
        async with AsyncAgentClient(agent.url, "wrong") as wrong:
            with pytest.raises(AgentAuthError):
                await wrong.jobs()

    asyncio.run(scenario())


def test_job_ids_are_checked_before_they_go_into_a_url(agent: Agent) -> None:
    for bad in ("a/b", "..", ""):
        with pytest.raises(BadRequest, match="^job_id:"):
            agent.client.job(bad)


def test_both_clients_take_their_requests_from_one_list() -> None:
    requests = {name for name, value in vars(Endpoints).items() if isinstance(value, endpoint)}
    assert requests == {
        "health",
        "gpus",
        "status",
        "jobs",
        "job",
        "start_job",
        "stop_job",
        "log",
        "revoke_token",
        "ack",
    }
    for client in (AgentClient, AsyncAgentClient):
        assert issubclass(client, Endpoints)
        assert {name for name in vars(client) if not name.startswith("_")} <= {"close", "aclose"}


def test_the_async_client_checks_its_arguments_when_awaited() -> None:
    async def scenario() -> None:
        async with AsyncAgentClient("http://gpu-a:8470", "t") as client:
            pending = client.stop_job("a/b")  # nothing raised yet, nothing sent
            with pytest.raises(BadRequest, match="^job_id:"):
                await pending
            with pytest.raises(BadRequest, match="^grace_s:"):
                await client.stop_job("a", grace_s=-1)

    asyncio.run(scenario())
