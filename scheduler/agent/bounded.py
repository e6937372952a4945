"""HTTP servers that one idle client cannot take off the air: time limits and a connection cap.

uvicorn's h11 protocol has no limit on how long a client may take to send its request line
and headers, and none on how many connections stay open: a thousand sockets that each send
half a request line use up the process's file descriptors, after which accept() fails
(EMFILE) and nothing is answered, not even the scheduler's polls. `limit_concurrency` does
not help (it is checked only once a request is complete), nor does `timeout_keep_alive` (it
runs only between requests). So every connection here is served by `BoundedH11Protocol`, a
subclass of uvicorn's own, which adds:

- a head timer: a connection whose request line and headers are not all in within
  `head_timeout_s` of being accepted (or, on a kept-alive connection, of its last answer)
  gets `408` and is closed; a TLS handshake counts against the same time;
- a body timer: a request whose body is not all in within `body_timeout_s` of its headers
  is closed;
- a cap on open connections (`max_connections`, kept below the file limit): when it is
  reached, the connection that has waited longest for a request head is closed to make
  room (a scheduler's poll sends its request at once, so a flood of idle sockets evicts
  itself, not the polls); when every open connection is busy with a request, the new one
  gets an immediate `503` and is closed;
- log lines about all this at most once per `log_interval_s`, with the counts (the first
  at once, the next one interval later with what happened meanwhile).

TLS is done here too (`loop.start_tls` once the connection is counted), not by the listening
socket: a client that opens connections and never finishes a handshake is then counted, timed
and capped like any other.

`raise_file_limit()` lifts the soft RLIMIT_NOFILE to the hard one where allowed;
`Bounds.for_this_process()` derives the cap from the result. This module is the agent's, and
stands alone like the rest of its package; `scheduler.serving` uses it for `paika up`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import ssl
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

HEAD_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 1000
# Connections the kernel queues before they are accepted. asyncio accepts up to this many
# at once, and they are counted here two steps later (when their protocol is connected),
# while the next batches are accepted and the refused ones are still being closed.
BACKLOG = 64
# File descriptors kept for what is not a counted connection: up to three batches of
# accepted ones, the listening socket, logs, state files, jobs' pipes, the driver's handles.
SPARE_FILES = 64 + 3 * BACKLOG
LOG_INTERVAL_S = 10.0


def _answer(status: str, text: str, *headers: str) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, written without h11 (which may
    not answer a request it has not seen)."""
    body = text.encode()
    head = [
        f"HTTP/1.1 {status}",
        "content-type: text/plain; charset=utf-8",
        "connection: close",
        *headers,
        f"content-length: {len(body)}",
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


SLOW_HEAD = _answer("408 Request Timeout", "the request line and headers did not arrive in time\n")
SLOW_BODY = _answer("408 Request Timeout", "the request body did not arrive in time\n")
FULL = _answer(
    "503 Service Unavailable",
    "too many open connections: try again in a moment\n",
    "retry-after: 1",
)


def file_limit() -> int:
    """The process's soft limit on open files."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def raise_file_limit() -> int:
    """Lift the soft limit on open files to the hard limit where allowed; the soft limit after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or soft >= hard:
        return soft if soft != resource.RLIM_INFINITY else 1 << 20
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return file_limit()


def connection_cap(limit: int | None = None) -> int:
    """The default cap: MAX_CONNECTIONS, or less to stay SPARE_FILES under the file limit."""
    files = file_limit() if limit is None else limit
    return max(1, min(MAX_CONNECTIONS, files - SPARE_FILES))


@dataclass(frozen=True)
class Bounds:
    """How long a client may take over its request, and how many connections may be open."""

    head_timeout_s: float = HEAD_TIMEOUT_S
    body_timeout_s: float = BODY_TIMEOUT_S
    max_connections: int = field(default_factory=connection_cap)
    log_interval_s: float = LOG_INTERVAL_S

    def __post_init__(self) -> None:
        if self.head_timeout_s <= 0 or self.body_timeout_s <= 0:
            raise ValueError("the head and body timeouts must be above 0 seconds")
        if self.max_connections < 1:
            raise ValueError("the connection cap must be at least 1")

    @classmethod
    def for_this_process(
        cls,
        head_timeout_s: float = HEAD_TIMEOUT_S,
        body_timeout_s: float = BODY_TIMEOUT_S,
        max_connections: int | None = None,
    ) -> Bounds:
        """Bounds for a server: the file limit raised first, the cap (when not given) below it.

        A cap given above what the file limit leaves is lowered to fit, and that is logged."""
        files = raise_file_limit()
        fits = max(1, files - SPARE_FILES)
        cap = connection_cap(files) if max_connections is None else max_connections
        if cap > fits:
            log.warning(
                "a cap of %d connections does not fit the limit of %d open files: serving "
                "at most %d (raise LimitNOFILE, or ulimit -n, to allow more)",
                cap,
                files,
                fits,
            )
            cap = fits
        return cls(head_timeout_s, body_timeout_s, cap)


class Guard:
    """One server's connections: how many are open, which wait for a request head, and the
    counts of those closed or refused, logged at most once per interval."""

    def __init__(self, bounds: Bounds, tls: ssl.SSLContext | None = None) -> None:
        self.bounds = bounds
        self.tls = tls
        self.open = 0
        self.waiting: OrderedDict[int, BoundedH11Protocol] = OrderedDict()
        self.counts = {"evicted": 0, "refused": 0, "head": 0, "body": 0, "files": 0}
        self.totals = dict(self.counts)
        self._report: asyncio.TimerHandle | None = None
        self._reported_at = float("-inf")
        self._exceptions_watched: set[int] = set()

    def admit(self) -> bool:
        """Count a new connection, closing the idle one that has waited longest when the
        cap is reached; False (nothing counted) when every open connection is busy with a
        request: the new one is to be refused."""
        if self.open >= self.bounds.max_connections:
            if not self.waiting:
                self.note("refused")
                return False
            _, oldest = self.waiting.popitem(last=False)
            oldest.evict()
            self.note("evicted")
        self.open += 1
        return True

    def note(self, what: str) -> None:
        """Count an event. The first after a quiet interval is reported at once; the rest
        wait for the report one interval after the last."""
        self.counts[what] += 1
        self.totals[what] += 1
        if self._report is not None:
            return
        loop = asyncio.get_running_loop()
        wait = self._reported_at + self.bounds.log_interval_s - loop.time()
        if wait <= 0:
            self.report()
        else:
            self._report = loop.call_later(wait, self.report)

    def report(self) -> None:
        """One line with what happened since the last one."""
        self._report = None
        self._reported_at = asyncio.get_running_loop().time()
        counts, self.counts = self.counts, dict.fromkeys(self.counts, 0)
        cap, head, body = (
            self.bounds.max_connections,
            self.bounds.head_timeout_s,
            self.bounds.body_timeout_s,
        )
        parts = []
        if counts["evicted"]:
            parts.append(f"closed {counts['evicted']} idle to make room at the cap of {cap}")
        if counts["refused"]:
            parts.append(f"refused {counts['refused']} at the cap of {cap}, every one busy")
        if counts["head"]:
            parts.append(f"closed {counts['head']} whose request head took over {head:g} s")
        if counts["body"]:
            parts.append(f"closed {counts['body']} whose request body took over {body:g} s")
        if counts["files"]:
            parts.append(
                f"accept() ran out of open files {counts['files']} time(s): something "
                "else holds them, or the cap is above what the file limit leaves"
            )
        if parts:
            log.warning(
                "connections: %s (%d open now; one such line every %g s at most)",
                "; ".join(parts),
                self.open,
                self.bounds.log_interval_s,
            )

    def watch_accept_errors(self, loop: asyncio.AbstractEventLoop) -> None:
        """Where accept() still runs out of files (something else holds them), asyncio
        logs each failure, thousands a second: count those into the reports instead."""
        if id(loop) in self._exceptions_watched:
            return
        self._exceptions_watched.add(id(loop))
        earlier = loop.get_exception_handler()

        def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            if context.get("message") == "socket.accept() out of system resource":
                self.note("files")
                return
            if earlier is not None:
                earlier(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(handler)


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the head and body timers, the cap and TLS of a `Guard`.

    Made for one server by `protocol_for(guard)` (uvicorn builds one per connection)."""

    guard: ClassVar[Guard]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.app = self._quiet(self.app)
        self._cut = False  # closed for a slow body while the app waited for it
        self._counted = False
        self._raw: asyncio.Transport | None = None
        self._serving = False  # uvicorn's connection_made has run
        self._phase = ""  # "head", "body" or "busy"
        self._timer: asyncio.TimerHandle | None = None
        self._handshake: asyncio.Task[None] | None = None
        # What TLS decrypted between the handshake's end and this protocol taking its
        # transport (start_tls hands the data on at once, and the transport a step later).
        self._early: list[bytes] = []

    # -- the connection's life

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        guard = self.guard
        self._raw = transport
        guard.watch_accept_errors(self.loop)
        if not guard.admit():
            if guard.tls is None:
                transport.write(FULL)
            transport.close()
            return
        self._counted = True
        self._enter("head")
        if guard.tls is None:
            self._serve(transport)
            return
        transport.pause_reading()  # nothing is read before the TLS layer takes the socket
        self._handshake = self.loop.create_task(self._start_tls(transport, guard.tls))

    async def _start_tls(self, raw: asyncio.Transport, context: ssl.SSLContext) -> None:
        try:
            secured = await self.loop.start_tls(
                raw,
                self,
                context,
                server_side=True,
                ssl_handshake_timeout=self.guard.bounds.head_timeout_s,
            )
        except (Exception, asyncio.CancelledError) as exc:  # a failed handshake is the client's
            log.debug("TLS handshake failed: %s", exc)
            raw.abort()
            self._release()
            return
        if secured is None or raw.is_closing():
            self._release()
            return
        self._serve(secured)

    def _serve(self, transport: asyncio.Transport) -> None:
        self._serving = True
        super().connection_made(transport)
        early, self._early = self._early, []
        for data in early:
            self.data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._release()
        if self._serving:
            super().connection_lost(exc)

    def _release(self) -> None:
        self._cancel_timer()
        self.guard.waiting.pop(id(self), None)
        if self._counted:
            self._counted = False
            self.guard.open -= 1

    # -- following the request: head, body, then the app's turn

    def data_received(self, data: bytes) -> None:
        if not self._serving:
            self._early.append(data)
            return
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def _follow(self) -> None:
        """Set the timer for where the request is, as h11 sees the client's side."""
        if not self._counted or self.transport is None or self.transport.is_closing():
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            self._enter("head")
        elif state is h11.SEND_BODY:
            self._enter("body")
        else:  # the request is all in (or the connection is done): the app's time
            self._enter("busy")

    def _enter(self, phase: str) -> None:
        if phase == self._phase:
            return
        self._phase = phase
        self._cancel_timer()
        waiting = self.guard.waiting
        waiting.pop(id(self), None)
        bounds = self.guard.bounds
        if phase == "head":
            waiting[id(self)] = self
            self._timer = self.loop.call_later(bounds.head_timeout_s, self._too_slow, "head")
        elif phase == "body":
            self._timer = self.loop.call_later(bounds.body_timeout_s, self._too_slow, "body")

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _too_slow(self, phase: str) -> None:
        self._timer = None
        self.guard.note(phase)
        if not self._serving or self.transport.is_closing():
            self._close_now()
            return
        if phase == "head":
            self.transport.write(SLOW_HEAD)
        elif self.cycle is not None and not self.cycle.response_started:
            # The app is waiting for the rest of the body: it will see the client gone, and
            # the failure that causes is this timeout's, reported with it (see _quiet).
            self._cut = True
            self.transport.write(SLOW_BODY)
        self.transport.close()

    def _quiet(self, app: Any) -> Any:
        """`app`, except that a failure after this connection was cut for a slow body is
        not logged again (uvicorn logs each with its trace: a flood would fill the log)."""

        async def quiet(scope: Any, receive: Any, send: Any) -> None:
            try:
                await app(scope, receive, send)
            except Exception:
                if not self._cut:
                    raise

        return quiet

    def evict(self) -> None:
        """Closed to make room: it has sent no complete request head."""
        self._phase = "evicted"
        self._close_now()

    def _close_now(self) -> None:
        if self._serving:
            self.transport.abort()
            return
        # Still in its TLS handshake (or not yet begun): drop the socket and the count now.
        if self._handshake is not None:
            self._handshake.cancel()
        if self._raw is not None:
            self._raw.abort()
        self._release()


def protocol_for(guard: Guard) -> type[BoundedH11Protocol]:
    """The protocol class to give uvicorn (`http=`) for one server bounded by `guard`."""
    return type("BoundedH11Protocol", (BoundedH11Protocol,), {"guard": guard})


def tls_context(certfile: str, keyfile: str) -> ssl.SSLContext:
    """A server's TLS context from its certificate and key (PEM files)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certfile, keyfile)
    return context
