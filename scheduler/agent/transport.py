"""A lean HTTP/1.1 keep-alive transport for polling the agents' small JSON API.

httpx's default transport (httpcore, h11, anyio) costs about 0.4 ms of CPU per request;
polling 256 agents every cycle made that most of a poll round. The agents answer plain
HTTP/1.1 with a Content-Length (uvicorn), so this transport keeps one connection per agent
and speaks just that, plus chunked bodies and close-delimited ones for other servers. It
plugs in at httpx's transport seam: the client above it, its errors and its tests are the
same as with the default transport.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass

import httpx

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024
CLOSE_WAIT_S = 2.0


class _BadResponse(Exception):
    """The peer's answer is not HTTP/1.x as this transport reads it."""


@dataclass
class _Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes
    keep_alive: bool


class _Connection:
    """One open connection to an agent, used by one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def close(self) -> None:
        self.writer.close()

    async def exchange(self, request: httpx.Request, body: bytes) -> _Answer:
        self.writer.write(_request_bytes(request, body))
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        if len(head) > MAX_HEAD_BYTES:
            raise _BadResponse("response head too large")
        status_line, *lines = head[:-4].split(b"\r\n")
        version, status = _status(status_line)
        headers = [_header(line) for line in lines if line]
        fields = {name.lower(): value.strip() for name, value in headers}
        keep_alive = version == b"HTTP/1.1" and fields.get(b"connection", b"").lower() != b"close"
        if request.method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return _Answer(status, headers, b"", keep_alive)
        if b"chunked" in fields.get(b"transfer-encoding", b"").lower():
            return _Answer(status, headers, await self._chunked(), keep_alive)
        if b"content-length" in fields:
            length = int(fields[b"content-length"])
            if not 0 <= length <= MAX_BODY_BYTES:
                raise _BadResponse(f"content-length {length}")
            return _Answer(status, headers, await self.reader.readexactly(length), keep_alive)
        # No length: the body runs to the end of the connection.
        body = await self.reader.read(-1)
        if len(body) > MAX_BODY_BYTES:
            raise _BadResponse("response body too large")
        return _Answer(status, headers, body, False)

    async def _chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size_line = await self.reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while await self.reader.readuntil(b"\r\n") != b"\r\n":
                    pass  # trailers
                return b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)  # the CRLF after each chunk


class LeanTransport(httpx.AsyncBaseTransport):
    """httpx transport: HTTP/1.1 over keep-alive connections, a few kept per host."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None, keep: int = 4) -> None:
        self.ssl_context = ssl_context
        self.keep = keep
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        key = _origin(request.url)
        body = await request.aread()
        timeouts = request.extensions.get("timeout", {})
        for attempt in (1, 2):
            connection = self._reuse(key)
            reused = connection is not None
            if connection is None:
                connection = await self._connect(request, key, timeouts.get("connect"))
            try:
                answer = await asyncio.wait_for(
                    connection.exchange(request, body), timeouts.get("read")
                )
            except TimeoutError as exc:
                connection.close()
                raise httpx.ReadTimeout(
                    "the agent did not answer in time", request=request
                ) from exc
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
                connection.close()
                # A kept connection the agent has since closed: ask once more on a new one.
                if reused and attempt == 1 and request.method in IDEMPOTENT:
                    continue
                raise httpx.ReadError(f"{type(exc).__name__}: {exc}", request=request) from exc
            except (_BadResponse, ValueError) as exc:
                connection.close()
                raise httpx.RemoteProtocolError(str(exc), request=request) from exc
            except BaseException:
                # Cancelled by the caller's own deadline (a hung agent): the socket is closed
                # here, or every poll of that host would leave one open.
                connection.close()
                raise
            self._release(key, connection, answer.keep_alive)
            return httpx.Response(
                answer.status, headers=answer.headers, content=answer.body, request=request
            )
        raise AssertionError("unreachable")  # the loop returns or raises

    async def aclose(self) -> None:
        connections = [c for kept in self._idle.values() for c in kept]
        self._idle.clear()
        for connection in connections:
            connection.close()
        # A TLS connection closes in a few steps on the loop (close_notify, then the socket):
        # wait for them, or a loop stopped right after would leave the sockets open.
        closing = [asyncio.ensure_future(c.writer.wait_closed()) for c in connections]
        if closing:
            done, _ = await asyncio.wait(closing, timeout=CLOSE_WAIT_S)
            for task in done:
                task.exception()  # a reset while closing is no news: retrieved, not raised

    def _reuse(self, key: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            if not connection.reader.at_eof() and not connection.writer.is_closing():
                return connection
            connection.close()
        return None

    def _release(self, key: tuple[str, str, int], connection: _Connection, keep: bool) -> None:
        idle = self._idle.setdefault(key, [])
        if keep and len(idle) < self.keep:
            idle.append(connection)
        else:
            connection.close()

    async def _connect(
        self, request: httpx.Request, key: tuple[str, str, int], timeout: float | None
    ) -> _Connection:
        scheme, host, port = key
        tls = None
        if scheme == "https":
            tls = self.ssl_context or ssl.create_default_context()
        try:
            reader, writer = await asyncio.wait_for(self._open(host, port, tls), timeout)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"no connection to {host}:{port}", request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(f"{host}:{port}: {exc}", request=request) from exc
        return _Connection(reader, writer)

    @staticmethod
    async def _open(
        host: str, port: int, tls: ssl.SSLContext | None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection, TLS after TCP: a handshake that fails (a certificate that does not
        verify) closes its socket here, where asyncio's own path would leave it open."""
        reader, writer = await asyncio.open_connection(host, port, limit=MAX_HEAD_BYTES)
        if tls is None:
            return reader, writer
        try:
            await writer.start_tls(tls, server_hostname=host)
        except BaseException:
            writer.close()
            raise
        return reader, writer


def _origin(url: httpx.URL) -> tuple[str, str, int]:
    port = url.port or (443 if url.scheme == "https" else 80)
    return url.scheme, url.host, port


def _request_bytes(request: httpx.Request, body: bytes) -> bytes:
    target = request.url.raw_path
    lines = [request.method.encode("ascii") + b" " + target + b" HTTP/1.1"]
    lines += [name + b": " + value for name, value in request.headers.raw]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def _status(line: bytes) -> tuple[bytes, int]:
    parts = line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise _BadResponse(f"not an HTTP/1.x status line: {line[:60]!r}")
    return parts[0], int(parts[1])


def _header(line: bytes) -> tuple[bytes, bytes]:
    name, sep, value = line.partition(b":")
    if not sep:
        raise _BadResponse(f"malformed header line: {line[:60]!r}")
    return name.strip(), value.strip()
