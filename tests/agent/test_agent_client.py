"""The clients: typed results, and foreign errors converted at the boundary."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest
from agent_harness import PY, Agent

from scheduler.agent.client import AgentClient, AsyncAgentClient
from scheduler.agent.errors import (
    AgentAuthError,
    AgentError,
    BadRequest,
    GpuReadError,
    HostUnreachable,
    JobConflict,
    JobNotFound,
)
from scheduler.agent.protocol import JobState, StartRequest
from scheduler.errors import PaikaError


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_closed_port_is_host_unreachable() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with AgentClient(url, "t", timeout=1) as client, pytest.raises(HostUnreachable) as caught:
        client.health()
    assert caught.value.url == url and caught.value.status is None
    assert isinstance(caught.value, AgentError) and isinstance(caught.value, PaikaError)
    assert url in str(caught.value)


def test_a_timeout_is_host_unreachable() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    transport = httpx.MockTransport(slow)
    with (
        AgentClient("http://gpu-a:8470", "t", transport=transport) as client,
        pytest.raises(HostUnreachable, match="gpu-a:8470.*ReadTimeout"),
    ):
        client.jobs()


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
        with pytest.raises(AgentError, match="unexpected response: state"):
            client.jobs()
        with pytest.raises(AgentError, match="gpus: expected a list"):
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
