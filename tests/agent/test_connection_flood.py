"""Idle clients cannot take a server off the air: head and body timeouts, a connection cap.

Every server paika runs (`paika agent`, `paika up`'s HTTP side, the test servers) is served by
`serve_in_thread` or the agent's command, both through scheduler.agent.bounded. Here a server
is flooded on loopback with sockets that send half a request line, more of them than its cap,
and an authenticated poll must still be answered at once; the idle sockets must be closed by
the server after the head timeout; and the refusals must be logged in a bounded number of lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import resource
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from agent_harness import TOKEN, wait_for
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from scheduler.agent.app import build_app
from scheduler.agent.bounded import (
    LOG_INTERVAL_S,
    MAX_CONNECTIONS,
    SPARE_FILES,
    BoundedH11Protocol,
    Bounds,
    connection_cap,
)
from scheduler.agent.jobs import JobStore
from scheduler.agent.simulated import SimulatedReader
from scheduler.agent.tls import make_host, make_or_load_ca
from scheduler.serving import serve_in_thread, stop_server

CAP = 20
HEAD_S = 2.0
BODY_S = 1.0
LOG_EVERY_S = 0.5
BOUNDS = Bounds(
    head_timeout_s=HEAD_S, body_timeout_s=BODY_S, max_connections=CAP, log_interval_s=LOG_EVERY_S
)
HALF_A_REQUEST_LINE = b"GET /v1/gp"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[JobStore]:
    with JobStore(tmp_path / "state", allow_root_jobs=True) as jobs:
        yield jobs


def _agent_app(store: JobStore) -> Starlette:
    return build_app(SimulatedReader("2xT4", host="flooded", loads=store), store, TOKEN)


@contextlib.contextmanager
def _served(app: Starlette, **kwargs: object) -> Iterator[tuple[int, BoundedH11Protocol]]:
    server, thread, port = serve_in_thread(app, bounds=BOUNDS, **kwargs)  # type: ignore[arg-type]
    try:
        yield port, server.config.http_protocol_class  # type: ignore[misc]
    finally:
        stop_server(server, thread)


def _idle_sockets(port: int, count: int, first: bytes = HALF_A_REQUEST_LINE) -> list[socket.socket]:
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        if first:
            sock.sendall(first)
        sockets.append(sock)
    return sockets


def _closed_by_server(sock: socket.socket, deadline: float) -> bool:
    """Whether the server closes `sock` before `deadline`: what it sent first, then EOF."""
    try:
        while time.monotonic() < deadline:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            if not sock.recv(4096):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return False


def _bounded_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "scheduler.agent.bounded"]


def test_a_flood_of_half_requests_leaves_polls_answered_and_is_closed_in_time(
    store: JobStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="scheduler.agent.bounded")
    with _served(_agent_app(store)) as (port, protocol):
        # From before the flood: its first report lines come while its sockets are opened,
        # which takes a while on a busy machine.
        started = time.monotonic()
        flood = _idle_sockets(port, CAP + 50)
        try:
            # Polls through new connections, as the scheduler makes them, while the flood is on.
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
                for _ in range(3):
                    answer = client.get("/v1/gpus", headers=AUTH)
                    assert answer.status_code == 200, answer.text
                    assert len(answer.json()["gpus"]) == 2
            assert protocol.guard.totals["evicted"] >= 50
            # The rest are closed by the head timeout: every socket is closed by the server.
            deadline = started + HEAD_S + 15
            assert all(_closed_by_server(sock, deadline) for sock in flood)
            wait_for(lambda: protocol.guard.open == 0, 10, "every connection to be released")
            assert protocol.guard.totals["head"] >= 1
            # Reported, and in few lines: at most one per interval (and the one after).
            wait_for(lambda: bool(_bounded_lines(caplog)), 10, "the report line")
            took = time.monotonic() - started
            assert len(_bounded_lines(caplog)) <= took / LOG_EVERY_S + 2
            assert any("idle to make room" in line for line in _bounded_lines(caplog))
        finally:
            for sock in flood:
                sock.close()


def test_a_slow_head_or_body_gets_408_and_is_closed_without_a_trace_in_the_log(
    store: JobStore, caplog: pytest.LogCaptureFixture
) -> None:
    with _served(_agent_app(store)) as (port, protocol):
        # uvicorn's loggers (set up as the server starts) do not reach caplog at the root.
        uvicorn_errors = logging.getLogger("uvicorn.error")
        uvicorn_errors.addHandler(caplog.handler)
        (slow_head,) = _idle_sockets(port, 1)
        (slow_body,) = _idle_sockets(
            port,
            1,
            b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Length: 100\r\n\r\n{",
        )
        # A kept-alive connection that starts a second request and stops half-way.
        kept = socket.create_connection(("127.0.0.1", port), timeout=10)
        kept.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        first = kept.recv(4096)
        assert first.startswith(b"HTTP/1.1 200"), first
        kept.sendall(b"GET /v1/hea")
        deadline = time.monotonic() + max(HEAD_S, BODY_S) + 15
        try:
            slow_head.settimeout(deadline - time.monotonic())
            said = slow_head.recv(4096)
            assert said.startswith(b"HTTP/1.1 408"), said
            assert _closed_by_server(slow_head, deadline)
            slow_body.settimeout(deadline - time.monotonic())
            said = slow_body.recv(4096)
            assert said.startswith(b"HTTP/1.1 408") and b"body did not arrive" in said, said
            assert _closed_by_server(slow_body, deadline)
            assert _closed_by_server(kept, deadline)
            wait_for(lambda: protocol.guard.totals["body"] == 1, 10, "the body timeout")
            wait_for(lambda: protocol.guard.open == 0, 10, "every connection to be released")
            # The app, cut off while it read the body, fails; that is not logged with a trace.
            assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
        finally:
            uvicorn_errors.removeHandler(caplog.handler)
            for sock in (slow_head, slow_body, kept):
                sock.close()


def test_at_the_cap_with_every_connection_busy_a_new_one_gets_503_at_once() -> None:
    gate = threading.Event()
    inside = 0

    async def slow(request: Request) -> PlainTextResponse:
        nonlocal inside
        inside += 1
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return PlainTextResponse("done")

    with _served(Starlette(routes=[Route("/slow", slow)])) as (port, protocol):
        busy = _idle_sockets(port, CAP, b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            wait_for(lambda: inside == CAP, 10, "every connection to be inside the app")
            with socket.create_connection(("127.0.0.1", port), timeout=10) as late:
                said = late.recv(4096)
            assert said.startswith(b"HTTP/1.1 503"), said
            assert b"too many open connections" in said
            assert protocol.guard.totals == {
                "evicted": 0,
                "refused": 1,
                "head": 0,
                "body": 0,
                "files": 0,
            }
            # The connections it has are served as ever.
            gate.set()
            for sock in busy:
                assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        finally:
            for sock in busy:
                sock.close()
        wait_for(lambda: protocol.guard.open == 0, 10, "every connection to be released")


def test_tls_handshakes_are_capped_and_timed_like_requests(store: JobStore, tmp_path: Path) -> None:
    ca = make_or_load_ca(tmp_path / "tls")
    host = make_host(ca, tmp_path / "tls", "127.0.0.1")
    tls = (str(host.cert_path), str(host.key_path))
    with _served(_agent_app(store), tls=tls) as (port, protocol):
        # Sockets that never start their handshake, and some that send half a ClientHello.
        flood = _idle_sockets(port, CAP + 30, b"")
        flood += _idle_sockets(port, 20, b"\x16\x03\x01\x02\x00\x01")
        try:
            started = time.monotonic()
            verify = ssl.create_default_context(cafile=str(ca.cert_path))
            with httpx.Client(
                base_url=f"https://127.0.0.1:{port}", timeout=10, verify=verify
            ) as client:
                answer = client.get("/v1/gpus", headers=AUTH)
                assert answer.status_code == 200, answer.text
            assert protocol.guard.totals["evicted"] >= 50
            deadline = started + HEAD_S + 15
            assert all(_closed_by_server(sock, deadline) for sock in flood)
            wait_for(lambda: protocol.guard.open == 0, 10, "every connection to be released")
        finally:
            for sock in flood:
                sock.close()


# ---------------------------------------------------------------- `paika agent`, a real process

PAIKA = Path(sys.executable).with_name("paika")
FILES = 448  # the agent's limit on open files (soft and hard): its cap comes out at 192


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Runs the command in argv with the limit on open files set (no preexec_fn: threads are about).
WITH_FEW_FILES = (
    "import os, resource, sys; "
    f"resource.setrlimit(resource.RLIMIT_NOFILE, ({FILES}, {FILES})); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_the_agent_process_under_a_flood_past_its_file_limit_still_answers_polls(
    tmp_path: Path,
) -> None:
    """1,100 idle sockets took a real agent off the air (EMFILE); here more sockets than
    its file limit allows come at an agent whose cap derives from that limit."""
    port, log_file = _free_port(), tmp_path / "agent.log"
    command = [sys.executable, "-c", WITH_FEW_FILES, str(PAIKA), "agent", "--simulate", "2xT4"]
    command += ["--port", str(port), "--state-dir", str(tmp_path / "state")]
    command += ["--head-timeout-s", str(HEAD_S)]
    env = {**os.environ, "PAIKA_AGENT_TOKEN": TOKEN}
    with log_file.open("w") as sink:
        process = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    flood: list[socket.socket] = []
    try:
        wait_for(lambda: _answers(f"{url}/v1/health"), 30, "the agent to answer")
        started = time.monotonic()
        flood = _idle_sockets(port, FILES + 50)
        with httpx.Client(base_url=url, timeout=10) as client:
            for _ in range(3):
                answer = client.get("/v1/gpus", headers=AUTH)
                assert answer.status_code == 200, answer.text
        deadline = started + HEAD_S + 15
        assert all(_closed_by_server(sock, deadline) for sock in flood)
        took = time.monotonic() - started
        assert _answers(f"{url}/v1/health")
    finally:
        for sock in flood:
            sock.close()
        process.terminate()
        process.wait(timeout=30)
    text = log_file.read_text()
    assert "out of open files" not in text and "Too many open files" not in text
    reports = [line for line in text.splitlines() if "scheduler.agent.bounded" in line]
    # Idle sockets past the cap are closed to make room; on a busy machine the flood takes
    # longer than the head timeout to open, and the timeout closes the first ones instead.
    # Either is said, rate-limited (a count that falls after the last line goes unsaid).
    said = ("to make room at the cap of 192", "whose request head took over")
    assert reports and any(kind in reports[0] for kind in said), text
    assert len(reports) <= 2 + took / LOG_INTERVAL_S


def test_sigterm_stops_the_agent_cleanly_and_releases_what_it_holds(tmp_path: Path) -> None:
    """systemd stops the agent with SIGTERM: it must exit 0 after its cleanup (the state
    dir released, its cgroup directory removed), not die of the signal with both left."""
    port, log_file = _free_port(), tmp_path / "agent.log"
    state = tmp_path / "state"
    command = [str(PAIKA), "agent", "--simulate", "2xT4", "--port", str(port)]
    command += ["--state-dir", str(state)]
    env = {**os.environ, "PAIKA_AGENT_TOKEN": TOKEN, "PAIKA_LOG_LEVEL": "INFO"}
    with log_file.open("w") as sink:
        process = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: _answers(f"http://127.0.0.1:{port}/v1/health"), 30, "the agent")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log_file.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = log_file.read_text()
    assert "stopped (SIGTERM)" in text
    made = re.search(r"each job runs in a cgroup of its own under (\S+)", text)
    if made is not None:  # where the host delegates cgroups to the agent
        assert not Path(made.group(1)).exists(), "the agent's cgroup directory was left behind"
    # Its state is saved and the dir is free for the next agent.
    with JobStore(state, allow_root_jobs=True) as again:
        assert again.all_jobs() == []


# ---------------------------------------------------------------- paika up's HTTP side


def test_paika_ups_http_side_takes_its_bounds_from_the_settings_and_holds_a_flood() -> None:
    """/healthz, /metrics and the jobs' reports are served by `paika up` (bot.up._serve_ops
    in Socket Mode, bot.runtime in HTTP mode) with PAIKA_HTTP_* bounds."""
    from types import SimpleNamespace

    from bot.up import _serve_ops
    from scheduler.settings import Settings

    async def healthz(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    settings = Settings(
        http_port=0,
        http_head_timeout_s=HEAD_S,
        http_body_timeout_s=BODY_S,
        http_max_connections=CAP,
    )
    app = Starlette(routes=[Route("/healthz", healthz)])
    (server, thread), url = _serve_ops(SimpleNamespace(settings=settings), app)  # type: ignore[arg-type]
    guard = server.config.http_protocol_class.guard
    assert (guard.bounds.max_connections, guard.bounds.head_timeout_s) == (CAP, HEAD_S)
    port = int(url.rsplit(":", 1)[1])
    flood = _idle_sockets(port, CAP + 50)
    try:
        started = time.monotonic()
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).text == "ok"
        deadline = started + HEAD_S + 15
        assert all(_closed_by_server(sock, deadline) for sock in flood)
    finally:
        for sock in flood:
            sock.close()
        stop_server(server, thread)


def test_the_shipped_units_leave_room_for_the_full_cap() -> None:
    """systemd's default soft limit (1024) would shrink the cap; the units lift it."""
    from scheduler.deploy import units

    for name, text in units().items():
        limits = [line for line in text.splitlines() if line.startswith("LimitNOFILE=")]
        assert limits == ["LimitNOFILE=65536"], name
        assert connection_cap(int(limits[0].split("=")[1])) == MAX_CONNECTIONS


def test_a_cap_above_what_the_file_limit_leaves_is_lowered_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="scheduler.agent.bounded")
    bounds = Bounds.for_this_process(max_connections=10**7)
    assert bounds.max_connections == resource.getrlimit(resource.RLIMIT_NOFILE)[0] - SPARE_FILES
    assert "does not fit the limit" in caplog.text and "LimitNOFILE" in caplog.text
