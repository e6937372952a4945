"""Polling fan-out and the full cycle at scale, over real HTTP on loopback.

256 simulated GPU hosts (8 GPUs each), each answering after 50 ms, served by real paika
agent apps (mounted under one uvicorn server, one path prefix per host). Measures:
- one poll round of all hosts (goal: <= 150 ms, about 3x one host's latency);
- a full cycle (poll + apply + reconcile + policy + dispatch) with 2,000 pending jobs in
  the database (goal: <= 500 ms).

    .venv/bin/python bench/poll_fanout.py [--hosts 256] [--latency 0.05] [--pending 2000] [--rounds 10]

Prints its figures and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from scheduler.agent.app import build_app
from scheduler.agent.jobs import JobStore
from scheduler.agent.simulated import SimulatedReader
from scheduler.app import Paika
from scheduler.clock import SystemClock
from scheduler.hosts.poll import Poller, Target
from scheduler.notify import RecordingNotifier
from scheduler.runner import agent_cycle
from scheduler.serving import serve_in_thread
from scheduler.settings import Settings

TOKEN = "bench-token-0123456789"


class Slow:
    """Answers every HTTP request after a fixed delay, like a host across a network."""

    def __init__(self, app: ASGIApp, delay: float) -> None:
        self.app, self.delay = app, delay

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await asyncio.sleep(self.delay)
        await self.app(scope, receive, send)


def serve_hosts(count: int, delay: float, folder: Path) -> tuple[Any, Any, int, list[JobStore]]:
    stores, mounts = [], []
    for index in range(count):
        name = f"h{index:03d}"
        store = JobStore(folder / name)
        reader = SimulatedReader("8xA100-80GB", host=name, loads=store)
        mounts.append(
            Mount(f"/{name}", app=Slow(build_app(reader, store, TOKEN, host=name), delay))
        )
        stores.append(store)
    server, thread, port = serve_in_thread(Starlette(routes=mounts))
    return server, thread, port, stores


def _serve_forever(count: int, delay: float, folder: str, ports: Any) -> None:
    """Child process: the hosts' agents, so their CPU is not the poller's (as on real hosts)."""
    server, thread, port, stores = serve_hosts(count, delay, Path(folder))
    ports.put(port)
    thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=256)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--pending", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="paika-bench-"))
    ports: Any = multiprocessing.Queue()
    child = multiprocessing.Process(
        target=_serve_forever,
        args=(args.hosts, args.latency, str(folder / "agents"), ports),
        daemon=True,
    )
    child.start()
    port = ports.get(timeout=120)
    targets = [Target(f"h{i:03d}", f"http://127.0.0.1:{port}/h{i:03d}") for i in range(args.hosts)]
    poller = Poller(TOKEN, timeout=5)
    try:
        poller(targets)  # the first round opens the connections
        rounds = []
        for _ in range(args.rounds):
            began = time.perf_counter()
            reports = poller(targets)
            rounds.append((time.perf_counter() - began) * 1000)
        answered = sum(1 for r in reports.values() if r.ok)
        cycles, started = full_cycles(folder, targets, args.pending, args.rounds)
    finally:
        poller.close()
        child.terminate()  # its jobs are `sleep`s in their own sessions; stop them too
        child.join(timeout=10)
        subprocess.run(["pkill", "-f", "sleep 3600"], check=False)
    figures = {
        "hosts": args.hosts,
        "gpus": args.hosts * 8,
        "host_latency_ms": args.latency * 1000,
        "hosts_answered": answered,
        "poll_round_ms_median": round(statistics.median(rounds), 1),
        "poll_round_ms_max": round(max(rounds), 1),
        "pending_jobs": args.pending,
        "running_jobs": started,
        "cycle_ms_median": round(statistics.median(cycles[1:]), 1),
        "cycle_ms_max": round(max(cycles[1:]), 1),
        "goal_poll_le_150ms": statistics.median(rounds) <= 150,
        "goal_cycle_le_500ms": statistics.median(cycles[1:]) <= 500,
    }
    width = max(len(key) for key in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    print(json.dumps(figures))


def full_cycles(
    folder: Path, targets: list[Target], pending: int, rounds: int
) -> tuple[list[float], int]:
    """Steady-state cycles against a SQLite database holding `pending` jobs, once the
    first cycles have started what fits (returns the cycle times and how many run)."""
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
    # One agent process stands in for all the hosts here, so give its starts time.
    hosts = paika.policy.scheduler.hosts.model_copy(update={"poll_timeout_seconds": 30})
    paika.policy = paika.policy.model_copy(
        update={"scheduler": paika.policy.scheduler.model_copy(update={"hosts": hosts})}
    )
    cycle = agent_cycle(paika, RecordingNotifier())
    times, started = [], 0
    for _ in range(10):  # let the first wave of starts settle: measure the steady state
        began = time.perf_counter()
        result = cycle.run_once()
        times = [(time.perf_counter() - began) * 1000]
        started += len(result.started)
        if not result.started:
            break
    for _ in range(rounds):
        began = time.perf_counter()
        cycle.run_once()
        times.append((time.perf_counter() - began) * 1000)
    paika.engine.dispose()
    return times, started


if __name__ == "__main__":
    main()
