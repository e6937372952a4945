"""The agent's wire format on the hot path: one host's /v1/status answer, read and written.

A 256-host poll reads 256 of these every cycle (in the poller's one event-loop thread), and
each agent writes one per poll. The answer is built as a host sends it: `--gpus` GPUs (one
process each, all held by paika jobs) and `--jobs` jobs (one running per GPU, the rest ended:
an agent keeps ended jobs). Measures, median of `--repeats` rounds of `--count` calls each:

- read: the body to a Status (JSON parsing and validation; what the client does per answer);
- client: AgentClient.status() against an in-memory transport (the client path, no network);
- write: a Status to its body (what the agent does per poll).

    .venv/bin/python bench/agent_wire.py [--gpus 8] [--jobs 64] [--count 2000] [--repeats 5]

Prints its figures and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from scheduler.agent.client import AgentClient
from scheduler.agent.protocol import Status

HOSTS_PER_POLL = 256


def status_body(gpus: int, jobs: int) -> bytes:
    """A status answer as an agent sends it (plain JSON, independent of the models)."""
    now = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    gpu_list = [
        {
            "index": i,
            "uuid": f"GPU-5f3c9a1e-{i:04d}-4d2b-9c71-0b8e2f6a{i:04d}",
            "name": "NVIDIA A100-SXM4-80GB",
            "memory_total_mib": 81920,
            "memory_used_mib": 61440,
            "utilization_pct": 93,
            "temperature_c": 67,
            "power_w": 347.5,
            "processes": [{"pid": 40000 + i, "used_memory_mib": 61440}],
            "job_id": f"{1000 + i}.1",
        }
        for i in range(gpus)
    ]
    job_list = []
    for j in range(jobs):
        running = j < gpus
        started = now - timedelta(hours=3, minutes=j)
        job_list.append(
            {
                "job_id": f"{1000 + j}.1",
                "state": "running" if running else "exited",
                "gpus": [j % gpus],
                "pid": 40000 + j,
                "command": ["/bin/sh", "-c", "python train.py --config configs/llama-7b.yml"],
                "image": None,
                "cwd": "/home/researcher/project",
                "started_at": started.isoformat(),
                "ended_at": None if running else (started + timedelta(hours=1)).isoformat(),
                "exit_code": None if running else 0,
                "signal": None,
                "stop_requested": False,
                "log_path": f"/var/lib/paika-agent/logs/{1000 + j}.1.log",
            }
        )
    health = {
        "status": "ok",
        "agent_version": "0.1.0",
        "api_version": 1,
        "host": "gpu-01",
        "simulated": False,
    }
    answer = {"health": health, "host": "gpu-01", "gpus": gpu_list, "jobs": job_list}
    return json.dumps(answer, separators=(",", ":")).encode()


def per_call_us(call: Callable[[], Any], count: int, repeats: int) -> float:
    """The median over `repeats` rounds of the mean time of one call, in microseconds."""
    call()
    rounds = []
    for _ in range(repeats):
        began = time.perf_counter()
        for _ in range(count):
            call()
        rounds.append((time.perf_counter() - began) / count * 1e6)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=64)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    body = status_body(args.gpus, args.jobs)
    status = Status.from_json(body)
    assert (len(status.gpus), len(status.jobs)) == (args.gpus, args.jobs)
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, content=body, headers={"Content-Type": "application/json"}
        )
    )
    with AgentClient("http://gpu-01:8470", "bench-token", transport=transport) as client:
        assert client.status() == status
        client_us = per_call_us(client.status, args.count, args.repeats)
    read_us = per_call_us(lambda: Status.from_json(body), args.count, args.repeats)
    write_us = per_call_us(status.to_json, args.count, args.repeats)

    print(f"status answer: {args.gpus} GPUs, {args.jobs} jobs, {len(body):,} bytes")
    print(
        f"read    {read_us:8.1f} us   ({read_us * HOSTS_PER_POLL / 1000:.1f} ms per 256-host poll)"
    )
    print(f"client  {client_us:8.1f} us   (AgentClient.status(), in-memory transport)")
    print(f"write   {write_us:8.1f} us   (the agent's answer)")
    print(
        json.dumps(
            {
                "bench": "agent_wire",
                "gpus": args.gpus,
                "jobs": args.jobs,
                "body_bytes": len(body),
                "status_read_us": round(read_us, 1),
                "status_read_ms_per_poll_256": round(read_us * HOSTS_PER_POLL / 1000, 1),
                "status_client_us": round(client_us, 1),
                "status_write_us": round(write_us, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
