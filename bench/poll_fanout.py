"""Polling fan-out and the full cycle at scale, over real HTTP on loopback.

256 simulated GPU hosts (8 GPUs each), each answering after 50 ms. Measures:
- one poll round of all hosts (goal: <= 150 ms, about 3x one host's latency), against
  stand-ins that answer each host's recorded /v1/status at next to no CPU cost (the poller
  alone, as when the agents are other machines), and against the real agent apps;
- a full cycle (poll + apply + reconcile + policy + dispatch) with 2,000 pending jobs in
  the database (goal: <= 500 ms), against the real agent apps (in `--agent-processes`
  processes, one path prefix per host), which start real jobs. It reports the cycle's poll
  part and the rest (paika's own work) apart: on a machine with few cores the agents' CPU,
  and their job processes, compete with paika's, which real hosts would not;
- the poll round against the real agent apps once more over TLS (certificates from a private
  CA, checked with host names) with each host's own token (goal: within +20% of plain HTTP);
- the same steady-state cycle once more against stand-ins that answer each host's status as
  its real agent last answered it (the agents stopped): the cycle as it runs when the agents
  are other machines. The goal is judged on this one; both are printed.

    .venv/bin/python bench/poll_fanout.py [--hosts 256] [--latency 0.05] [--pending 2000]
        [--rounds 10] [--agent-processes 8] [--polls-only]

Prints its figures and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import signal
import ssl
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import update
from sqlmodel import col
from starlette.types import ASGIApp, Receive, Scope, Send

from scheduler.agent.app import build_app
from scheduler.agent.jobs import JobStore
from scheduler.agent.simulated import SimulatedReader
from scheduler.agent.tls import make_host, make_or_load_ca
from scheduler.app import Paika
from scheduler.clock import SystemClock
from scheduler.credentials import host_token
from scheduler.hosts.poll import Poller, Target
from scheduler.notices.events import RecordingObserver
from scheduler.runner import agent_cycle
from scheduler.serving import serve_in_thread
from scheduler.settings import Settings
from storage.models import Host

TOKEN = "bench-token-0123456789"


class Slow:
    """Answers every HTTP request after a fixed delay, like a host across a network."""

    def __init__(self, app: ASGIApp, delay: float) -> None:
        self.app, self.delay = app, delay

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await asyncio.sleep(self.delay)
        await self.app(scope, receive, send)


class Hosts:
    """One server standing in for many hosts: `/<host>/…` goes to that host's agent app.

    A dict lookup, where Starlette's Mount list would try every host's prefix in turn: on a
    real host the agent is the only app, so routing among hosts must cost next to nothing
    here, or the benchmark measures its own stand-in rather than the poller.
    """

    def __init__(self, apps: dict[str, ASGIApp]) -> None:
        self.apps = apps

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        host = scope["path"][1:].partition("/")[0]
        app = self.apps.get(host)
        if app is None:
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        # As Starlette's Mount does: the full path stays, the prefix becomes the root path.
        await app({**scope, "root_path": scope.get("root_path", "") + f"/{host}"}, receive, send)


SECRET = bytes(range(32))  # the bench's agent secret: each host's token derives from it


def token_of(name: str, own_tokens: bool) -> str:
    return host_token(SECRET, name, 1, "bench") if own_tokens else TOKEN


def serve_hosts(
    indices: range, delay: float, folder: Path, tls: tuple[str, str] | None = None
) -> tuple[Any, Any, int, list[JobStore]]:
    """Some hosts' agents behind one server; with `tls`, over TLS and each with its own token."""
    stores: list[JobStore] = []
    apps: dict[str, ASGIApp] = {}
    for index in indices:
        name = f"h{index:03d}"
        store = JobStore(
            folder / name, allow_root_jobs=True
        )  # bench agents run sleeps as this user
        reader = SimulatedReader("8xA100-80GB", host=name, loads=store)
        token = token_of(name, tls is not None)
        apps[name] = Slow(build_app(reader, store, token, host=name, tls=bool(tls)), delay)
        stores.append(store)
    server, thread, port = serve_in_thread(Hosts(apps), tls=tls)
    return server, thread, port, stores


def _serve_forever(
    indices: range, delay: float, folder: str, ports: Any, tls: tuple[str, str] | None = None
) -> None:
    """Child process: some hosts' agents, so their CPU is not the poller's (as on real hosts)."""
    server, thread, port, stores = serve_hosts(indices, delay, Path(folder), tls)

    def stop_jobs(signum: int, frame: object) -> None:
        # Terminated by the parent: stop this process's own jobs (no one else's), then go.
        for store in stores:
            for run in store.all_jobs():
                if run.state == "running":
                    store.stop(run.job_id, 0)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop_jobs)
    ports.put((indices.start, port))
    thread.join()


async def _recorded_status(app: ASGIApp) -> bytes:
    """One agent's /v1/status answer body, asked of the app directly."""
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/v1/status",
        "raw_path": b"/v1/status",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"authorization", f"Bearer {TOKEN}".encode()), (b"host", b"bench")],
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 1),
    }
    body: list[bytes] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            body.append(message.get("body", b""))

    await app(scope, receive, send)  # type: ignore[arg-type]
    return b"".join(body)


def _serve_recorded(
    count: int, delay: float, folder: str, ports: Any, bodies: dict[str, bytes] | None = None
) -> None:
    """Child process: each host's recorded status, answered after `delay` by a bare asyncio
    server. Its own CPU is next to nothing, so the round measures the poller alone.
    `bodies` (host name → /v1/status body) are answers recorded from real agents; without
    them each host answers what a fresh agent with no jobs would."""
    if bodies is None:
        bodies = {}
        for index in range(count):
            name = f"h{index:03d}"
            store = JobStore(Path(folder) / name, allow_root_jobs=True)
            reader = SimulatedReader("8xA100-80GB", host=name, loads=store)
            bodies[name] = asyncio.run(_recorded_status(build_app(reader, store, TOKEN, host=name)))
    answers = {
        f"/{name}/v1/status".encode(): (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        for name, body in bodies.items()
    }

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1]
                await asyncio.sleep(delay)
                writer.write(
                    answers.get(path, b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                )
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def serve() -> None:
        server = await asyncio.start_server(answer, "127.0.0.1", 0, backlog=1024)
        ports.put(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(serve())


def poll_rounds(serve: Any, args: argparse.Namespace, folder: Path) -> tuple[list[float], int]:
    """Poll rounds against hosts served by `serve` in a child process (ms each, and how
    many hosts answered in the last)."""
    ports: Any = multiprocessing.Queue()
    child = multiprocessing.Process(
        target=serve, args=(args.hosts, args.latency, str(folder), ports), daemon=True
    )
    child.start()
    port = ports.get(timeout=120)
    targets = [Target(f"h{i:03d}", f"http://127.0.0.1:{port}/h{i:03d}") for i in range(args.hosts)]
    poller = Poller(TOKEN, timeout=5)
    try:
        return timed_rounds(poller, targets, args.rounds)
    finally:
        poller.close()
        child.terminate()
        child.join(timeout=10)


def timed_rounds(poller: Poller, targets: list[Target], rounds: int) -> tuple[list[float], int]:
    """`rounds` timed poll rounds (ms each) after one that opens the connections, and how
    many hosts answered in the last."""
    poller(targets)
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        reports = poller(targets)
        times.append((time.perf_counter() - began) * 1000)
    return times, sum(1 for r in reports.values() if r.ok)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=256)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--pending", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--agent-processes", type=int, default=8)
    parser.add_argument(
        "--polls-only", action="store_true", help="Only the poll rounds: plain HTTP and TLS."
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="paika-bench-"))
    if args.polls_only:
        plain, plain_answered = real_agent_rounds(args, folder / "plain", tls=False)
        tls, tls_answered = real_agent_rounds(args, folder / "tls", tls=True)
        _print(_wire_figures(args, plain, plain_answered, tls, tls_answered))
        return
    recorded, recorded_answered = poll_rounds(_serve_recorded, args, folder / "recorded")
    tls, tls_answered = real_agent_rounds(args, folder / "tls", tls=True)
    # The agents in several processes: each real host runs its own, and one Python process
    # holding all 256 (with their job watchers) would mostly measure its own GIL.
    ports: Any = multiprocessing.Queue()
    per = -(-args.hosts // args.agent_processes)
    children = [
        multiprocessing.Process(
            target=_serve_forever,
            args=(
                range(first, min(first + per, args.hosts)),
                args.latency,
                str(folder / "agents"),
                ports,
            ),
            daemon=True,
        )
        for first in range(0, args.hosts, per)
    ]
    for child in children:
        child.start()
    port_of = dict(ports.get(timeout=120) for _ in children)
    targets = [
        Target(f"h{i:03d}", f"http://127.0.0.1:{port_of[i - i % per]}/h{i:03d}")
        for i in range(args.hosts)
    ]
    poller = Poller(TOKEN, timeout=5)
    try:
        rounds, answered = timed_rounds(poller, targets, args.rounds)
        paika = bench_paika(folder, targets, args.pending)
        cycles, polls, started = timed_cycles(paika, args.rounds, settle=True)
        bodies = record_status(targets)
    finally:
        poller.close()
        for child in children:
            child.terminate()  # each stops its own agents' jobs (`sleep`s in their sessions)
            child.join(timeout=60)
    # The same steady state against stand-ins answering what the agents last said: the
    # cycle as it runs when the agents are other machines, not on these cores.
    standin_cycles, standin_polls = cycles_against_recordings(paika, bodies, args)
    paika.engine.dispose()
    figures = {
        "hosts": args.hosts,
        "gpus": args.hosts * 8,
        "host_latency_ms": args.latency * 1000,
        "agent_processes": len(children),
        "hosts_answered": answered,
        "recorded_hosts_answered": recorded_answered,
        # The poller alone: hosts answering recorded agent status bodies.
        "poll_round_ms_median": round(statistics.median(recorded), 1),
        "poll_round_ms_max": round(max(recorded), 1),
        # With the real agent apps of all hosts on this machine's cores.
        "poll_round_real_agents_ms_median": round(statistics.median(rounds), 1),
        "poll_round_real_agents_ms_max": round(max(rounds), 1),
        "pending_jobs": args.pending,
        "running_jobs": started,
        # The full cycle against the real agents (their CPU and jobs on these cores too).
        "cycle_ms_median": _median(cycles),
        "cycle_ms_max": round(max(cycles[1:]), 1),
        "cycle_poll_part_ms_median": _median(polls),
        "cycle_without_poll_ms_median": _median(
            [c - p for c, p in zip(cycles, polls, strict=True)]
        ),
        # The full cycle against stand-ins answering the agents' recorded status.
        "cycle_recorded_ms_median": _median(standin_cycles),
        "cycle_recorded_ms_max": round(max(standin_cycles[1:]), 1),
        "cycle_recorded_poll_part_ms_median": _median(standin_polls),
        "goal_poll_le_150ms": statistics.median(recorded) <= 150,
        "goal_cycle_le_500ms": statistics.median(standin_cycles[1:]) <= 500,
        "goal_cycle_le_500ms_real_agents_here": statistics.median(cycles[1:]) <= 500,
        **_wire_figures(args, rounds, answered, tls, tls_answered),
    }
    _print(figures)


def _print(figures: dict[str, Any]) -> None:
    width = max(len(key) for key in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    print(json.dumps(figures))


def _wire_figures(
    args: argparse.Namespace, plain: list[float], plain_ok: int, tls: list[float], tls_ok: int
) -> dict[str, Any]:
    """Plain HTTP with the shared token against TLS with each host's own token."""
    ratio = statistics.median(tls) / statistics.median(plain)
    return {
        "hosts": args.hosts,
        "poll_round_real_agents_ms_median": round(statistics.median(plain), 1),
        "poll_round_real_agents_tls_own_tokens_ms_median": round(statistics.median(tls), 1),
        "poll_round_real_agents_tls_own_tokens_ms_max": round(max(tls), 1),
        "hosts_answered_plain": plain_ok,
        "hosts_answered_tls_own_tokens": tls_ok,
        "tls_own_tokens_over_plain": round(ratio, 3),
        "goal_tls_within_20pct": ratio <= 1.2,
    }


def real_agent_rounds(
    args: argparse.Namespace, folder: Path, *, tls: bool
) -> tuple[list[float], int]:
    """Poll rounds against the real agent apps in `--agent-processes` processes: plain HTTP
    with the shared token, or TLS (a private CA's certificate for 127.0.0.1, host name
    checked) with each host's own token."""
    files = None
    context = None
    if tls:
        ca = make_or_load_ca(folder / "ca")
        made = make_host(ca, folder / "ca", "127.0.0.1")
        files = (str(made.cert_path), str(made.key_path))
        context = ssl.create_default_context(cafile=str(ca.cert_path))
    ports: Any = multiprocessing.Queue()
    per = -(-args.hosts // args.agent_processes)
    children = [
        multiprocessing.Process(
            target=_serve_forever,
            args=(range(first, min(first + per, args.hosts)), args.latency, str(folder), ports),
            kwargs={"tls": files},
            daemon=True,
        )
        for first in range(0, args.hosts, per)
    ]
    for child in children:
        child.start()
    port_of = dict(ports.get(timeout=120) for _ in children)
    scheme = "https" if tls else "http"
    targets = [
        Target(
            f"h{i:03d}",
            f"{scheme}://127.0.0.1:{port_of[i - i % per]}/h{i:03d}",
            token_of(f"h{i:03d}", tls),
        )
        for i in range(args.hosts)
    ]
    poller = Poller(TOKEN, timeout=5, tls=context)
    try:
        return timed_rounds(poller, targets, args.rounds)
    finally:
        poller.close()
        for child in children:
            child.terminate()
            child.join(timeout=60)


def _median(values: list[float]) -> float:
    """Median of all but the first (which warms up)."""
    return round(statistics.median(values[1:]), 1)


def bench_paika(folder: Path, targets: list[Target], pending: int) -> Paika:
    """paika on a SQLite database with `targets` as its hosts and `pending` jobs queued."""
    settings = Settings(
        data_dir=folder,
        database_url=f"sqlite:///{folder / 'paika.db'}",
        admins=("UADMIN",),
        agent_token=TOKEN,
    )
    paika = Paika.start(settings, clock=SystemClock())
    paika.run("admin member add <@UALICE> team=vision", "UADMIN")
    for target in targets:
        paika.run(f"admin host add {target.name} url={target.url}", "UADMIN")
    for index in range(pending):
        gpus = (1, 1, 2, 4, 8)[index % 5]
        paika.run(
            f'submit name=j{index} gpus={gpus} hours={gpus * (1 + index % 7)} priority=normal data=ready cmd="sleep 3600"',
            "UALICE",
        )
    # Each agent process stands in for many hosts here, so give its starts time.
    hosts = paika.policy.scheduler.hosts.model_copy(update={"poll_timeout_seconds": 30})
    paika.policy = paika.policy.model_copy(
        update={"scheduler": paika.policy.scheduler.model_copy(update={"hosts": hosts})}
    )
    return paika


def timed_cycles(
    paika: Paika, rounds: int, *, settle: bool
) -> tuple[list[float], list[float], int]:
    """`rounds` + 1 timed cycles (ms) and their poll parts; with `settle`, first the cycles
    that start what fits (the steady state is what is measured). Returns how many started."""
    cycle = agent_cycle(paika, RecordingObserver())
    polls: list[float] = []
    poll = cycle.poller

    def timed_poll(targets: list[Target]) -> Any:
        began = time.perf_counter()
        try:
            return poll(targets)
        finally:
            polls.append((time.perf_counter() - began) * 1000)

    cycle.poller = timed_poll  # type: ignore[assignment]
    times, started = [], 0
    for _ in range(10 if settle else 1):
        began = time.perf_counter()
        result = cycle.run_once()
        times = [(time.perf_counter() - began) * 1000]
        polls[:] = polls[-1:]
        started += len(result.started)
        if not result.started:
            break
    for _ in range(rounds):
        began = time.perf_counter()
        cycle.run_once()
        times.append((time.perf_counter() - began) * 1000)
    cycle.poller = poll
    cycle.close()
    return times, polls, started


def record_status(targets: list[Target]) -> dict[str, bytes]:
    """Each host's /v1/status body as its agent answers it now."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(headers=headers, timeout=30) as client, ThreadPoolExecutor(32) as pool:
        bodies = pool.map(lambda t: client.get(f"{t.url}/v1/status").content, targets)
        return {target.name: body for target, body in zip(targets, bodies, strict=True)}


def cycles_against_recordings(
    paika: Paika, bodies: dict[str, bytes], args: argparse.Namespace
) -> tuple[list[float], list[float]]:
    """Timed cycles with every host answering its recorded status from one stand-in."""
    ports: Any = multiprocessing.Queue()
    child = multiprocessing.Process(
        target=_serve_recorded,
        args=(args.hosts, args.latency, "", ports, bodies),
        daemon=True,
    )
    child.start()
    port = ports.get(timeout=120)
    try:
        with paika.engine.begin() as connection:
            for name in bodies:
                connection.execute(
                    update(Host)
                    .where(col(Host.name) == name)
                    .values(url=f"http://127.0.0.1:{port}/{name}")
                )
        times, polls, _ = timed_cycles(paika, args.rounds, settle=False)
    finally:
        child.terminate()
        child.join(timeout=10)
    return times, polls


if __name__ == "__main__":
    main()
