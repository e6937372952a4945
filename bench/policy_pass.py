"""Pass time of the scheduling policy on a big synthetic cluster and queue.

20,000 pending jobs (`--pending`; 30% with data not ready), 600 running (half of the non-core
ones preemptible, started 1-3 h ago), 1,024 GPUs on 128 hosts of 4 types. Measures the decision
pass (what starts, what is preempted), the same pass with reasons and ETAs for every pending
job, and plain FIFO's pass as the reference.
Goals: decisions <= 200 ms median at 20,000 pending jobs; reasons and ETAs <= 1 s.

    .venv/bin/python bench/policy_pass.py [--repeat 15] [--seed 1] [--pending 20000]

Prints a table and ends with one JSON line of the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from dataclasses import replace

from scheduler.policy.matching import CardNeeds, CardType
from scheduler.policy.plan import Plan
from scheduler.policy.scheduler import schedule
from scheduler.policy.snapshot import (
    HOUR,
    Gpu,
    Host,
    Knobs,
    Pending,
    Running,
    Snapshot,
)
from scheduler.simulate.policies import policy_setup

CATALOG = (
    CardType("T4-16GB", 16, 0.25, 0.35),
    CardType("A10-24GB", 24, 0.45, 0.75),
    CardType("A100-40GB", 40, 1.0, 1.6),
    CardType("A100-80GB", 80, 1.1, 2.2),
)
NOW = 1_800_000_000.0
FIFO = policy_setup("fifo").knobs


def build(seed: int, pending_jobs: int = 20_000) -> Snapshot:
    """The benchmark's cluster and queue, the same for a given seed."""
    rng = random.Random(seed)
    hosts: list[Host] = []
    gpu_id = 0
    for index in range(128):
        card = CATALOG[index % 4]
        gpus = []
        for slot in range(8):
            gpu_id += 1
            gpus.append(Gpu(gpu_id, f"h{index:03d}", card.name, card.memory_gib))
            _ = slot
        hosts.append(Host(f"h{index:03d}", tuple(gpus)))
    running, hosts = _running(rng, hosts, 600)
    pending = [_pending(rng, i) for i in range(pending_jobs)]
    return Snapshot(
        NOW,
        tuple(hosts),
        tuple(running),
        tuple(pending),
        CATALOG,
        Knobs(headroom={"A100-80GB": 8}),
        team_usage={f"team{t}": rng.uniform(10, 500) for t in range(8)},
    )


def _running(rng: random.Random, hosts: list[Host], count: int) -> tuple[list[Running], list[Host]]:
    free = {h.name: [g.id for g in h.gpus] for h in hosts}
    type_of = {h.name: h.gpus[0].gpu_type for h in hosts}
    holder: dict[int, int] = {}
    jobs: list[Running] = []
    names = [h.name for h in hosts]
    while len(jobs) < count:
        size = rng.choice((1, 1, 1, 2, 2, 4))
        host = rng.choice(names)
        if len(free[host]) < size:
            continue
        ids = tuple(free[host][:size])
        free[host] = free[host][size:]
        job_id = 100_000 + len(jobs)
        for gpu in ids:
            holder[gpu] = job_id
        priority = rng.choices(("core", "normal", "idle"), (1, 7, 2))[0]
        jobs.append(
            Running(
                job_id,
                priority,
                f"team{rng.randrange(8)}",
                ids,
                type_of[host],
                NOW - rng.uniform(1, 3) * HOUR,
                NOW + rng.uniform(0.1, 48) * HOUR,
                preemptible=priority != "core" and rng.random() < 0.5,
            )
        )
    marked = [
        replace(h, gpus=tuple(replace(g, job_id=holder.get(g.id)) for g in h.gpus)) for h in hosts
    ]
    return jobs, marked


def _pending(rng: random.Random, index: int) -> Pending:
    kind = rng.random()
    if kind < 0.5:
        needs = CardNeeds()
    elif kind < 0.8:
        needs = CardNeeds(min_memory_gib=rng.choice((24, 40, 80)))
    else:
        needs = CardNeeds(allowed_types=(rng.choice(CATALOG).name,))
    gpus = rng.choice((1, 1, 1, 1, 2, 2, 4, 8))
    return Pending(
        index + 1,
        rng.choices(("core", "normal", "idle"), (1, 7, 2))[0],
        f"team{rng.randrange(8)}",
        f"U{rng.randrange(200)}",
        NOW - rng.uniform(0, 96) * HOUR,
        rng.random() >= 0.3,
        gpus,
        needs,
        gpus * rng.lognormvariate(1.0, 1.2),
        rng.uniform(0.7, 1.5),
    )


def timed(snapshot: Snapshot, repeat: int, *, explain: bool) -> tuple[list[float], Plan]:
    """Wall times in ms of `repeat` passes, and the last plan."""
    times = []
    plan = schedule(snapshot, explain=explain)
    for _ in range(repeat):
        began = time.perf_counter()
        plan = schedule(snapshot, explain=explain)
        times.append((time.perf_counter() - began) * 1000)
    return times, plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pending", type=int, default=20_000)
    args = parser.parse_args()
    snapshot = build(args.seed, args.pending)
    decisions, plan = timed(snapshot, args.repeat, explain=False)
    explained, full = timed(snapshot, max(3, args.repeat // 3), explain=True)
    fifo, fifo_plan = timed(replace(snapshot, knobs=FIFO), args.repeat, explain=False)
    free = sum(1 for h in snapshot.hosts for g in h.gpus if g.job_id is None)
    figures = {
        "pending": len(snapshot.pending),
        "not_ready": sum(1 for p in snapshot.pending if not p.data_ready),
        "running": len(snapshot.running),
        "gpus": sum(len(h.gpus) for h in snapshot.hosts),
        "free_gpus": free,
        "starts": len(plan.starts),
        "preemptions": len(plan.preemptions),
        "decisions_ms_median": round(statistics.median(decisions), 2),
        "decisions_ms_max": round(max(decisions), 2),
        "with_reasons_ms_median": round(statistics.median(explained), 2),
        "with_reasons_ms_max": round(max(explained), 2),
        "waits_explained": len(full.waits),
        "fifo_ms_median": round(statistics.median(fifo), 2),
        "fifo_starts": len(fifo_plan.starts),
        "goal_decisions_le_200ms": statistics.median(decisions) <= 200,
        "goal_reasons_le_1s": statistics.median(explained) <= 1000,
    }
    width = max(len(key) for key in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
