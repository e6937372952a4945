"""Cost of a queue-and-cluster snapshot (scheduler/archive/state.py) at scale.

10,000 jobs not yet ended (400 running on 800 GPUs, the rest waiting,
30% of them for data), 1,024 GPUs on 128 hosts of 4 types, 8 teams with quotas and a few
hundred people, in a SQLite database; every waiting job carries the policy's real reason and
ETA (one explained pass of the policy). Measures:

- build: reading every table the document keeps (scheduler.archive.state.build_document);
- encode: compact JSON and gzip (state.encode);
- build + encode together (the goal: <= 50 ms median), and the digest (state.content_digest);
- the document's size, raw JSON and gzipped (the goal: <= 2 MB gzipped);
- the archiver over hours of 10 s cycles: what it adds to a cycle (goal: <= 5%), and the
  objects it writes a day on a steady queue and on one that changes every ten minutes (goal:
  bounded by the changes, not by the cycles).

    .venv/bin/python bench/state_store.py [--repeat 15] [--seed 1] [--database FILE] [--hours 6]

Prints a table and ends with one JSON line of the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert
from sqlmodel import Session, col, select

from scheduler.archive import state
from scheduler.archive.archiver import Archiver
from scheduler.config import PolicyConfig, load_policy
from scheduler.policy.plan import Wait
from scheduler.policy.scheduler import schedule
from scheduler.settings import BUNDLED_POLICY
from scheduler.snapshots import build_snapshot
from storage.db import make_engine, upgrade
from storage.models import (
    Allocation,
    ArchiveMark,
    Decision,
    Gpu,
    Host,
    Job,
    Member,
    Quota,
    Team,
    Template,
)
from storage.objects.local import LocalStore
from storage.objects.shipper import Shipper
from storage.objects.spool import Spool

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
TYPES = (("T4-16GB", 16), ("A10-24GB", 24), ("A100-40GB", 40), ("A100-80GB", 80))
TEAMS = 8
HOSTS, GPUS_PER_HOST = 128, 8
JOBS, RUNNING = 10_000, 400


def fill(engine: Engine, seed: int) -> None:
    """The benchmark's install, the same for a given seed (bulk inserts: a few seconds)."""
    rng = random.Random(seed)
    with Session(engine) as session:
        rows: list[tuple[Any, list[dict[str, Any]]]] = []
        teams = [
            {"id": t + 1, "name": f"team{t}", "channel": f"#team{t}", "created_at": NOW}
            for t in range(TEAMS)
        ]
        members = [
            {"id": i + 1, "slack_user_id": f"U{i:08d}", "team_id": i % TEAMS + 1,
             "role": "member", "created_at": NOW}
            for i in range(240)
        ]  # fmt: skip
        quotas = [
            {"id": q + 1, "team_id": q % TEAMS + 1, "gpu_type": TYPES[q % 4][0] if q % 2 else None,
             "gpu_hours": 5000.0, "expires_on": date(2027, 6, 30), "owner": f"U{q:08d}",
             "note": "Q1 grant", "created_by": "UADMIN", "created_at": NOW}
            for q in range(2 * TEAMS)
        ]  # fmt: skip
        templates = [
            {"id": t + 1, "team_id": t % TEAMS + 1, "name": f"tpl{t}", "version": 1 + t % 3,
             "fields": {"gpus": 2, "type": "A100-80GB", "cmd": "python train.py --config x.yml"},
             "created_by": "UADMIN", "created_at": NOW, "updated_at": NOW}
            for t in range(24)
        ]  # fmt: skip
        hosts = [
            {"id": h + 1, "name": f"gpu-{h:03d}", "url": f"https://gpu-{h:03d}.lab:8470",
             "state": "up", "added_at": NOW - timedelta(days=30), "last_seen_at": NOW,
             "agent_version": "0.9.0"}
            for h in range(HOSTS)
        ]  # fmt: skip
        gpus = [
            {"id": h * GPUS_PER_HOST + i + 1, "host_id": h + 1, "index": i,
             "uuid": f"GPU-{h:03d}-{i}", "name": TYPES[h % 4][0], "gpu_type": TYPES[h % 4][0],
             "memory_gib": float(TYPES[h % 4][1]), "utilization_pct": 90.0}
            for h in range(HOSTS)
            for i in range(GPUS_PER_HOST)
        ]  # fmt: skip
        jobs, allocations = _jobs(rng, gpus)
        rows = [
            (Team, teams),
            (Member, members),
            (Quota, quotas),
            (Template, templates),
            (Host, hosts),
            (Gpu, gpus),
            (Job, jobs),
            (Allocation, allocations),
        ]
        for model, found in rows:
            session.execute(insert(model.__table__), found)  # type: ignore[attr-defined]
        session.commit()


def _jobs(
    rng: random.Random, gpus: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    free = [gpu["id"] for gpu in gpus]
    rng.shuffle(free)
    jobs, allocations = [], []
    for n in range(JOBS):
        running = n < RUNNING
        size = rng.choice((1, 1, 1, 2, 2, 4)) if not running else 2
        submitted = NOW - timedelta(minutes=rng.randint(1, 3 * 24 * 60))
        job = {
            "id": n + 1,
            "name": f"run-{n:05d}",
            "owner": f"U{rng.randrange(240):08d}",
            "team_id": rng.randrange(TEAMS) + 1,
            "priority": rng.choice(("core", "normal", "normal", "normal", "idle")),
            "gpus": size,
            "gpu_types": [rng.choice(TYPES)[0]] if rng.random() < 0.5 else None,
            "min_memory_gib": 24.0 if rng.random() < 0.2 else None,
            "est_gpu_hours": round(rng.uniform(1, 200), 1),
            "data_ready": running or rng.random() >= 0.3,
            "data_location": f"s3://datasets/set-{n % 97}" if rng.random() < 0.4 else None,
            "command": f"python train.py --config configs/run-{n % 50}.yml --seed {n}",
            "image": "registry.lab/train:2026.11" if rng.random() < 0.5 else None,
            "account": f"user{n % 40}" if rng.random() < 0.5 else None,
            "template": f"tpl{n % 24}" if rng.random() < 0.3 else None,
            "template_version": 1 if n % 3 == 0 else None,
            "spec": {"name": f"run-{n:05d}", "gpus": size, "hours": 10.0, "priority": "normal"},
            "state": "running" if running else "queued",
            "submitted_at": submitted,
            "started_at": submitted + timedelta(minutes=5) if running else None,
            "confirmed_at": submitted + timedelta(minutes=5) if running else None,
            "attempts": 1 if running else 0,
        }
        if not job["data_ready"]:
            job["state"] = "waiting_data"
        jobs.append(job)
        if running:
            for _ in range(size):
                gpu = free.pop()
                allocations.append(
                    {"id": len(allocations) + 1, "job_id": n + 1, "gpu_id": gpu,
                     "active_gpu_id": gpu, "started_at": job["started_at"]}
                )  # fmt: skip
    return jobs, allocations


def waits_of(engine: Engine, policy: PolicyConfig) -> dict[int, Wait]:
    """Every waiting job's reason and ETA, from one explained pass of the real policy."""
    with Session(engine) as session:
        return schedule(build_snapshot(session, policy, NOW), explain=True).waits


def timed(call: Callable[[], object], repeat: int) -> tuple[list[float], list[float], object]:
    """Milliseconds per call, wall clock and this process's CPU time (the CPU time reads
    true on a machine busy with other work; the wall clock does not)."""
    wall, cpu, result = [], [], None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = call()
        cpu.append((time.process_time() - start_cpu) * 1000)
        wall.append((time.perf_counter() - start) * 1000)
    return wall, cpu, result


def cycle_and_day_figures(
    engine: Engine, policy: PolicyConfig, waits: dict[int, Wait], hours: float
) -> dict[str, float]:
    """The archiver at a 10 s cycle over `hours` of simulated time, with a local store and
    spool: what it adds to each cycle, against the cycle's own policy step (snapshot of the
    database and an explained pass: the part of a real cycle that grows with the queue, so the
    ratio is an upper bound), and the objects it writes per day on a steady queue and on one
    that changes every ten minutes (a job submitted and a decision line written)."""
    with Session(engine) as session:
        policy_ms, _, _ = timed(
            lambda: schedule(build_snapshot(session, policy, NOW), explain=True), 5
        )
    figures: dict[str, float] = {"cycle_policy_step_ms": round(statistics.median(policy_ms), 1)}
    cycles = int(hours * 3600 / CYCLE_S)
    for label, change_every in (("steady", 0), ("changing", 60)):
        with tempfile.TemporaryDirectory() as folder:
            store = LocalStore(Path(folder) / "objects")
            spool = Spool(Path(folder) / "spool", 256 * 2**20)
            shipper = Shipper(store, spool, lambda: NOW)
            archiver = Archiver(engine, spool, shipper)
            # The install's own history (10,000 specs, the first snapshot) is handed over once
            # when the store is first set up; the figures are of the steady state after it.
            while archiver.after_cycle(NOW, policy, waits=waits, changed=True).objects:
                shipper.flush()
            shipper.flush()
            before = _count(store)
            added: list[float] = []
            for n in range(cycles):
                now = NOW + timedelta(seconds=CYCLE_S * n)
                changed = bool(change_every) and n % change_every == 0 and n > 0
                if changed:
                    _change(engine, now)
                start = time.perf_counter()
                archiver.after_cycle(now, policy, waits=waits, changed=changed, config_version=1)
                added.append((time.perf_counter() - start) * 1000)
                shipper.flush()
            written = _count(store) - before
            spool.close()
            _undo_changes(engine)
        per_day = written * 86400 / (cycles * CYCLE_S)
        figures[f"{label}_added_mean_ms"] = round(statistics.fmean(added), 2)
        figures[f"{label}_added_median_ms"] = round(statistics.median(added), 2)
        figures[f"{label}_added_max_ms"] = round(max(added), 1)
        figures[f"{label}_added_share_pct"] = round(
            100 * statistics.fmean(added) / figures["cycle_policy_step_ms"], 2
        )
        figures[f"{label}_objects_per_day"] = round(per_day)
    figures["cycles_per_day"] = 86400 / CYCLE_S
    return figures


CYCLE_S = 10


def _count(store: LocalStore) -> int:
    """Objects in the store: every version of every key the archiver writes per cycle."""
    folders = ("config", "templates", "specs", "snapshots", "decisions")
    return sum(len(store.versions(key)) for f in folders for key in store.keys(f + "/"))


BENCH_NAME = "bench-change-"


def _change(engine: Engine, now: datetime) -> None:
    """A new waiting job and a line of the decision log about it."""
    with Session(engine) as session:
        job = Job(
            name=f"{BENCH_NAME}{now:%H%M%S}",
            owner="U00000001",
            team_id=1,
            priority="normal",
            gpus=1,
            est_gpu_hours=1.0,
            command="python train.py",
            state="queued",
            submitted_at=now,
        )
        session.add(job)
        session.flush()
        session.add(Decision(at=now, job_id=job.id, kind="wait", detail={"code": "higher"}))
        session.commit()


def _undo_changes(engine: Engine) -> None:
    """Back to the benchmark's install, and the archive forgets what it handed over."""
    with Session(engine) as session:
        for row in session.exec(select(Job).where(col(Job.name).startswith(BENCH_NAME))):
            session.delete(row)
        for table in (Decision, ArchiveMark):
            for row in session.exec(select(table)):
                session.delete(row)
        session.commit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--database", type=Path, help="SQLite file (default: a temporary one)")
    parser.add_argument(
        "--hours", type=float, default=6, help="simulated hours of 10 s cycles with the archiver"
    )
    args = parser.parse_args()
    folder = tempfile.TemporaryDirectory()
    path = args.database or Path(folder.name) / "bench.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    policy = load_policy(BUNDLED_POLICY)
    start = time.perf_counter()
    fill(engine, args.seed)
    filled = time.perf_counter() - start
    waits = waits_of(engine, policy)

    def build() -> dict[str, Any]:
        with Session(engine) as session:
            return state.build_document(session, policy, waits, NOW, 1)

    build_ms, build_cpu, doc = timed(build, args.repeat)
    assert isinstance(doc, dict)
    encode_ms, encode_cpu, data = timed(lambda: state.encode(doc), args.repeat)
    assert isinstance(data, bytes)
    both_ms, both_cpu, _ = timed(lambda: state.encode(build()), args.repeat)
    digest_ms, digest_cpu, _ = timed(lambda: state.content_digest(doc), args.repeat)
    raw = len(json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())
    median = statistics.median
    figures: dict[str, float] = {
        "jobs": len(doc["jobs"]["rows"]),
        "gpus": len(doc["gpus"]["rows"]),
        "waits": len(waits),
        "build_ms": round(median(build_ms), 1),
        "build_cpu_ms": round(median(build_cpu), 1),
        "encode_ms": round(median(encode_ms), 1),
        "encode_cpu_ms": round(median(encode_cpu), 1),
        "build_encode_ms": round(median(both_ms), 1),
        "build_encode_cpu_ms": round(median(both_cpu), 1),
        "digest_ms": round(median(digest_ms), 1),
        "digest_cpu_ms": round(median(digest_cpu), 1),
        "raw_mb": round(raw / 1e6, 2),
        "gzip_mb": round(len(data) / 1e6, 3),
    }
    figures.update(cycle_and_day_figures(engine, policy, waits, args.hours))
    print(f"filled in {filled:.1f} s: {figures['jobs']:g} jobs, {figures['gpus']:g} GPUs, "
          f"{figures['waits']:g} waiting with reasons")  # fmt: skip
    print(f"{'median':>38}{'CPU':>12}")
    for label, key in (
        ("build (read every table)", "build"),
        ("encode (JSON + gzip)", "encode"),
        ("build + encode", "build_encode"),
        ("content digest", "digest"),
    ):
        print(f"{label:28}{figures[key + '_ms']:>8.1f} ms{figures[key + '_cpu_ms']:>9.1f} ms")
    print(f"{'size':28}{figures['raw_mb']:>8.2f} MB raw, {figures['gzip_mb']:.3f} MB gzipped")
    print("goals: build + encode <= 50 ms, gzipped <= 2 MB")
    print(
        f"the cycle's policy step (snapshot + explained pass): {figures['cycle_policy_step_ms']:.1f} ms"
    )
    for label in ("steady", "changing"):
        print(
            f"archiver, {label} queue: +{figures[label + '_added_mean_ms']:.2f} ms a cycle on average "
            f"(median {figures[label + '_added_median_ms']:.2f}, max {figures[label + '_added_max_ms']:.1f}) = "
            f"{figures[label + '_added_share_pct']:.2f}% of the policy step; "
            f"{figures[label + '_objects_per_day']:g} objects a day at {figures['cycles_per_day']:g} cycles a day"
        )
    print("goals: <= 5% of the cycle; objects a day bounded by changes, not cycles")
    print(json.dumps(figures))
    engine.dispose()
    folder.cleanup()


if __name__ == "__main__":
    main()
