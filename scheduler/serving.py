"""Serving an ASGI app with uvicorn in a background thread (agents, the Slack HTTP mode, tests).

Every server is bounded (scheduler.agent.bounded): a client has `head_timeout_s` for its
request line and headers and `body_timeout_s` for its body, and at most `max_connections`
are open at once, so idle sockets cannot starve the requests that matter."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn
from starlette.types import ASGIApp

from scheduler.agent.bounded import BACKLOG, Bounds, Guard, protocol_for, tls_context
from scheduler.agent.protocol import LOOPBACK
from scheduler.settings import Settings


def serve_in_thread(
    app: ASGIApp,
    host: str = LOOPBACK,
    port: int = 0,
    *,
    timeout_s: float = 10.0,
    tls: tuple[str, str] | None = None,
    bounds: Bounds | None = None,
) -> tuple[uvicorn.Server, threading.Thread, int]:
    """Serve `app` with uvicorn in a daemon thread; return once it accepts connections.

    `tls`: (certificate file, key file) to serve HTTPS, as `paika agent --tls-cert/--tls-key`.
    `bounds`: its time limits and connection cap (default: Bounds.for_this_process()).

    port 0 picks a free port; the third value is the port it got. Stop it with
    `stop_server(server, thread)` (or `server.should_exit = True; thread.join()`).
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit this; without it every reply waits ~40 ms on delayed ACKs
    # (uvicorn sets it only on sockets it binds itself).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    actual_port = int(sock.getsockname()[1])
    try:
        context = tls_context(*tls) if tls is not None else None
    except (OSError, ValueError):
        sock.close()
        raise
    guard = Guard(bounds or Bounds.for_this_process(), context)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        http=protocol_for(guard),  # also does the TLS, so handshakes are bounded too
        backlog=BACKLOG,
        ws="none",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run,
        kwargs={"sockets": [sock]},
        name=f"paika-http:{actual_port}",
        daemon=True,
    )
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(timeout=1)
            sock.close()
            raise RuntimeError(f"the server on {host}:{actual_port} did not start")
        time.sleep(0.01)
    return server, thread, actual_port


def bounds_for(settings: Settings) -> Bounds:
    """paika up's bounds, from PAIKA_HTTP_HEAD_TIMEOUT_S, _BODY_TIMEOUT_S, _MAX_CONNECTIONS."""
    return Bounds.for_this_process(
        settings.http_head_timeout_s,
        settings.http_body_timeout_s,
        settings.http_max_connections,
    )


def stop_server(server: uvicorn.Server, thread: threading.Thread, timeout_s: float = 10.0) -> None:
    """Stop a server started by serve_in_thread and wait for its thread."""
    server.should_exit = True
    thread.join(timeout=timeout_s)
