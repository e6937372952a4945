"""The poller's HTTP/1.1 transport against real servers on loopback: keep-alive, bodies of
every framing, a connection the server dropped, timeouts and refusals."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import httpx
import pytest
from agent_harness import TOKEN, Agent

from scheduler.agent.client import AsyncAgentClient, shared_tls
from scheduler.agent.errors import HostUnreachable
from scheduler.agent.protocol import StartRequest
from scheduler.agent.transport import LeanTransport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _serve(handler: Handler) -> tuple[asyncio.Server, str, list[int]]:
    connections: list[int] = []

    async def counted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(counted, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}", connections


def _answer(body: bytes, *, extra: bytes = b"", length: bool = True) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n" + extra
    if length:
        head += b"content-length: %d\r\n" % len(body)
    return head + b"\r\n" + body


async def _get(url: str, times: int = 1) -> list[httpx.Response]:
    async with httpx.AsyncClient(transport=LeanTransport(), timeout=2) as client:
        return [await client.get(url + "/v1/thing") for _ in range(times)]


def test_requests_share_one_kept_connection() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"GET /v1/thing HTTP/1.1\r\n")
            writer.write(_answer(b'{"ok": true}'))
            await writer.drain()

    async def scenario() -> None:
        server, url, connections = await _serve(handler)
        async with server:
            answers = await _get(url, times=5)
        assert [a.json() for a in answers] == [{"ok": True}] * 5
        assert len(connections) == 1

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "raw",
    [
        _answer(b"", extra=b"transfer-encoding: chunked\r\n", length=False)
        + b"5\r\n[1, 2\r\n4;ext=1\r\n, 3]\r\n0\r\n\r\n",
        b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n[1, 2, 3]",
    ],
    ids=["chunked", "to-the-end"],
)
def test_chunked_and_close_delimited_bodies(raw: bytes) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(raw)
        await writer.drain()

    async def scenario() -> None:
        server, url, _ = await _serve(handler)
        async with server:
            [answer] = await _get(url)
        assert answer.json() == [1, 2, 3]

    asyncio.run(scenario())


def test_a_kept_connection_the_server_dropped_is_replaced_for_a_get() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(_answer(b"1"))  # keep-alive by HTTP/1.1, then gone: an idle timeout
        await writer.drain()

    async def scenario() -> None:
        server, url, connections = await _serve(handler)
        async with server:
            answers = await _get(url, times=3)
        assert [a.json() for a in answers] == [1, 1, 1]
        assert len(connections) == 3

    asyncio.run(scenario())


def test_timeouts_refusals_and_garbage_become_host_unreachable() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"SMTP ready\r\n\r\n")
        await writer.drain()

    async def scenario() -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            closed = f"http://127.0.0.1:{s.getsockname()[1]}"
        for handler in (silent, garbage):
            server, url, _ = await _serve(handler)
            async with server:
                client = AsyncAgentClient(url, "t", timeout=0.3, transport=LeanTransport())
                with pytest.raises(HostUnreachable):
                    await client.health()
                await client.aclose()
        client = AsyncAgentClient(closed, "t", timeout=0.3, transport=LeanTransport())
        with pytest.raises(HostUnreachable):
            await client.health()
        await client.aclose()

    asyncio.run(scenario())


def test_the_agent_client_works_over_it_end_to_end(agent: Agent) -> None:
    async def scenario() -> None:
        transport = LeanTransport(ssl_context=shared_tls())
        async with AsyncAgentClient(agent.url, TOKEN, transport=transport) as client:
            status = await client.status()
            assert len(status.gpus) == len(await client.gpus())
            started = await client.start_job(
                StartRequest(job_id="7.1", gpus=(0,), argv=("sleep", "30"))
            )
            assert started.job_id == "7.1"
            assert [job.job_id for job in (await client.status()).jobs] == ["7.1"]
            await client.stop_job("7.1", grace_s=1)

    asyncio.run(scenario())


def test_a_request_cancelled_by_its_callers_deadline_closes_its_connection() -> None:
    """A hung agent (SIGSTOPped: the kernel still accepts the connection) and a poller whose
    own deadline cancels the request: the socket must not stay open, poll after poll."""
    closed = asyncio.Event()

    async def hung(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")  # the request arrived; no answer ever comes
        await reader.read()  # returns when the client closes its side
        closed.set()

    async def scenario() -> None:
        server, url, _ = await _serve(hung)
        async with server, httpx.AsyncClient(transport=LeanTransport(), timeout=30) as client:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(client.get(url + "/v1/status"), 0.2)
            await asyncio.wait_for(closed.wait(), 10)

    asyncio.run(scenario())
