"""One scrape of `paika up`'s /metrics at scale: 2,000 waiting jobs and 256 GPUs (32 hosts of
8), with the outbox holding a notice per job, on a real database (SQLite by default).

The scrape reads the watch's frozen values of the last cycle (queue by class and reason,
GPUs by state and type, one utilization series per GPU), the counters and histograms, and
counts the outbox's backlog with one query. Measures, median and p95 of `--count` scrapes:
`registry` (the exposition in-process) and `http` (GET /metrics through the real server).

    .venv/bin/python bench/metrics_scrape.py [--jobs 2000] [--gpus 256] [--count 200] [--database URL]

Prints its figures and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType

import httpx
from sqlmodel import Session

from scheduler.notices.outbox import backlog
from scheduler.observe.health import check, stale_after
from scheduler.observe.http import ops_app
from scheduler.observe.metrics import ServiceMetrics
from scheduler.observe.watch import CycleSeen, CycleWatch
from scheduler.policy.priority_classes import CLASS_NAMES
from scheduler.serving import serve_in_thread, stop_server
from storage.db import make_engine, upgrade
from storage.models import Notice

PRIORITIES = CLASS_NAMES
REASONS = ("behind_higher_priority", "behind_earlier", "no_type_free", "waiting_for_data")
TYPES = ("A100-80GB", "H100-80GB", "L40S-48GB", "T4-16GB")


def seen(jobs: int, gpus: int) -> CycleSeen:
    queue: dict[tuple[str, str], int] = {}
    for n in range(jobs):
        key = (PRIORITIES[n % len(PRIORITIES)], REASONS[n % 4])
        queue[key] = queue.get(key, 0) + 1
    states: dict[tuple[str, str], int] = {}
    for n in range(gpus):
        key = ("busy" if n % 5 else "free", TYPES[n % 4])
        states[key] = states.get(key, 0) + 1
    utilization = {
        (f"gpu-{n // 8:03d}", str(n % 8), TYPES[n % 4]): float(n % 100) for n in range(gpus)
    }
    return CycleSeen(
        time.time(),
        time.monotonic(),
        0.5,
        0,
        MappingProxyType(queue),
        MappingProxyType(states),
        MappingProxyType(utilization),
    )


def timed(call: Callable[[], object], count: int) -> tuple[float, float]:
    runs = []
    for _ in range(count):
        began = time.perf_counter()
        call()
        runs.append(time.perf_counter() - began)
    runs.sort()
    return statistics.median(runs) * 1000, runs[int(len(runs) * 0.95) - 1] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--gpus", type=int, default=256)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument(
        "--database", default=None, help="SQLAlchemy URL (default: a temporary SQLite file)"
    )
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="paika-bench-")
    engine = make_engine(args.database or f"sqlite:///{Path(folder) / 'paika.db'}")
    upgrade(engine)
    now = datetime.now(UTC)
    with Session(engine) as session:
        for n in range(args.jobs):
            session.add(
                Notice(key=f"bench:{n}", kind="job_started", subject=str(n), created_at=now)
            )
        session.commit()
    watch = CycleWatch(leading=True)
    watch.last_cycle = seen(args.jobs, args.gpus)
    metrics = ServiceMetrics(watch, lambda: backlog(engine, datetime.now(UTC)))
    for phase in ("poll", "apply", "reconcile", "policy", "admit"):
        metrics.cycle_steps.labels(phase).observe(0.01)
    for n in range(0, args.gpus, 8):
        metrics.poll_failures.labels(f"gpu-{n // 8:03d}").inc()
    size = len(metrics.exposition())
    registry = timed(metrics.exposition, args.count)
    server, thread, port = serve_in_thread(
        ops_app(metrics, lambda: check(watch, stale_after(10, 3)))
    )
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
        over_http = timed(lambda: client.get("/metrics").raise_for_status(), args.count)
    stop_server(server, thread)
    print(
        f"{args.jobs} jobs, {args.gpus} GPUs, {args.jobs} notices pending; exposition {size} bytes"
    )
    print(f"registry: median {registry[0]:.2f} ms, p95 {registry[1]:.2f} ms")
    print(f"http:     median {over_http[0]:.2f} ms, p95 {over_http[1]:.2f} ms")
    print(
        json.dumps(
            {
                "jobs": args.jobs,
                "gpus": args.gpus,
                "bytes": size,
                "database": engine.dialect.name,
                "registry_median_ms": round(registry[0], 3),
                "registry_p95_ms": round(registry[1], 3),
                "http_median_ms": round(over_http[0], 3),
                "http_p95_ms": round(over_http[1], 3),
            }
        )
    )


if __name__ == "__main__":
    main()
