"""The ledger's reports on a large install: how long `/gpu report` takes by each grouping,
with a metric across rounds, the whole CSV export, `report matches` and `report estimates`.

A generated year of work goes into a SQLite file (or --database-url): 20,000 finished jobs by
40 people in 8 teams, 12 projects of 6 rounds, each job with 1-3 ledger entries on one of
three GPU types, two metrics and a checkpoint reported, and its match.

    .venv/bin/python bench/ledger_report.py [--jobs 20000] [--repeat 3] [--database-url URL]

Prints one line per command (median of --repeat runs) and ends with one JSON line.

Measured at 20,000 jobs on a shared 2-CPU machine under load (milliseconds, median of 3;
the PostgreSQL "before" ran once). Before: the reports loaded a whole `Job` per ledger
entry and every output of every job as ORM objects. After: plain rows, the charges wholly
inside the period summed in SQL, each job's facts read once, a job's metric reports read
only when its row holds no metrics, artefacts only for the jobs listed.

    command                                           SQLite before/after   PostgreSQL b/a
    report days=30                                            975 / 129        1,792 / 130
    report by=project days=366                             18,977 / 1,036     22,118 / 1,004
    report by=user days=90                                  6,012 / 244        4,499 / 191
    report by=round project=p3 metric=top1 since=…          8,269 / 110       12,201 / 141
    report by=type days=366 page=50                        15,823 / 495       19,249 / 666
    report matches days=90 limit=20                         4,679 / 313        7,273 / 611
    report estimates                                           65 / 67           142 / 81
    paika report by=project days=366 --format csv          17,627 / 2,481     19,295 / 2,553

by=project moved between 0.92 and 1.2 s from run to run with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import insert, text

from bot.console import render
from bot.report_export import export_report
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.settings import Settings
from storage.models import Job, JobOutput, JobState, LedgerEntry, Match

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
TYPES = {"T4-16GB": (0.35, 0.25), "A100-80GB": (2.20, 1.0), "H100-80GB": (4.50, 2.0)}
STATES = [JobState.SUCCEEDED] * 6 + [JobState.FAILED, JobState.CANCELLED]
COMMANDS = [
    "report days=30",
    "report by=project days=366",
    "report by=user days=90",
    "report by=round project=p3 metric=top1 since=2026-01-01",
    "report by=type days=366 page=50",
    "report matches days=90 limit=20",
    "report estimates",
]


def build(paika: Paika, jobs: int, seed: int) -> None:
    """Teams, members and a year of finished jobs with their ledger, outputs and matches."""
    rng = random.Random(seed)
    teams = [f"team{t}" for t in range(8)]
    for team in teams:
        paika.run(f"admin team add {team}", "UADMIN")
    users = [f"U{u:04d}" for u in range(40)]
    for i, user in enumerate(users):
        paika.run(f"admin member add <@{user}> team={teams[i % 8]}", "UADMIN")
    team_ids = {user: 1 + i % 8 for i, user in enumerate(users)}  # teams made in order
    job_rows, ledger, outputs, matches = [], [], [], []
    for job_id in range(1, jobs + 1):
        user = rng.choice(users)
        gpu_type = rng.choice(list(TYPES))
        price, _speed = TYPES[gpu_type]
        gpus = rng.choice((1, 2, 4, 8))
        start = NOW - timedelta(hours=rng.uniform(1, 365 * 24))
        hours = rng.uniform(0.2, 40)
        end = start + timedelta(hours=hours)
        state = rng.choice(STATES)
        job_rows.append(
            {
                "id": job_id,
                "name": f"run-{job_id}",
                "owner": user,
                "team_id": team_ids[user],
                "priority": "normal",
                "gpus": gpus,
                "est_gpu_hours": hours * gpus * rng.uniform(0.5, 2),
                "data_ready": True,
                "command": "python train.py",
                "state": state,
                "project": f"p{rng.randrange(12)}",
                "round": str(rng.randrange(1, 7)),
                "submitted_at": start - timedelta(minutes=rng.uniform(0, 600)),
                "started_at": start,
                "ended_at": end,
                "attempts": 1,
                "metrics": {"top1": rng.uniform(50, 80), "loss": rng.uniform(0.1, 2)},
                "output": f"s3://ckpt/run-{job_id}/final",
                "version": 1,
            }
        )
        pieces = rng.randint(1, 3)
        for piece in range(pieces):
            a = start + timedelta(hours=hours * piece / pieces)
            b = start + timedelta(hours=hours * (piece + 1) / pieces)
            gpu_hours = (b - a).total_seconds() / 3600 * gpus
            ledger.append(
                {
                    "job_id": job_id,
                    "team_id": team_ids[user],
                    "gpu_type": gpu_type,
                    "gpu_hours": gpu_hours,
                    "idle_gpu_hours": gpu_hours * rng.uniform(0, 0.2),
                    "cost": gpu_hours * price,
                    "started_at": a,
                    "ended_at": b,
                    "recorded_at": b,
                }
            )
        for name, value in job_rows[-1]["metrics"].items():
            outputs.append(_output(job_id, end, "metric", name, value, None))
        outputs.append(_output(job_id, end, "artefact", "output", None, job_rows[-1]["output"]))
        alternatives = [
            {"gpu_type": t, "price_per_gpu_hour": p, "verdict": "fits", "wait_s": None}
            for t, (p, _s) in TYPES.items()
        ]
        matches.append(
            {
                "job_id": job_id,
                "at": start,
                "chosen_type": gpu_type,
                "alternatives": alternatives,
                "reason": "cheapest type with free GPUs",
            }
        )
    with paika.engine.begin() as conn:
        for table, rows in (
            (Job, job_rows),
            (LedgerEntry, ledger),
            (JobOutput, outputs),
            (Match, matches),
        ):
            for first in range(0, len(rows), 2000):
                conn.execute(insert(table), rows[first : first + 2000])  # type: ignore[arg-type]
    if paika.engine.dialect.name == "postgresql":
        # A live install's tables have planner statistics (autovacuum keeps them); tables
        # filled a moment ago have none, and the planner takes them for nearly empty.
        with paika.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("ANALYZE"))


def _output(
    job_id: int, at: datetime, kind: str, name: str, value: float | None, text: str | None
) -> dict[str, object]:
    return {
        "job_id": job_id,
        "attempt": 1,
        "at": at,
        "source": "job",
        "kind": kind,
        "name": name,
        "value": value,
        "text": text,
    }


def _timed(run: object, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        result = run()  # type: ignore[operator]
        times.append((time.perf_counter() - began) * 1000)
    return round(statistics.median(times), 1), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = args.database_url or f"sqlite:///{Path(folder) / 'bench.db'}"
        settings = Settings(database_url=url, admins=("UADMIN",), config=None)
        paika = Paika.start(settings, clock=ManualClock(NOW), words=render)
        began = time.perf_counter()
        build(paika, args.jobs, args.seed)
        figures: dict[str, object] = {
            "jobs": args.jobs,
            "backend": paika.engine.dialect.name,
            "build_s": round(time.perf_counter() - began, 1),
        }
        for command in COMMANDS:
            ms, reply = _timed(lambda c=command: paika.run(c, "U0001"), args.repeat)
            assert reply.ok, reply.text  # type: ignore[attr-defined]
            print(f"{command:<58} {ms:>9.1f} ms")
            figures[command] = ms
        export = ["by=project", "days=366"]
        ms, _ = _timed(lambda: _quiet(export_report, export, "csv", "U0001", url), 1)
        print(f"{'paika report by=project days=366 --format csv':<58} {ms:>9.1f} ms")
        figures["export_csv_ms"] = ms
        paika.engine.dispose()
    print(json.dumps(figures))


def _quiet(export: object, words: list[str], fmt: str, user: str, url: str) -> int:
    """The export as `paika report` runs it (its own start, the whole CSV), output dropped."""
    import contextlib
    import io
    import os

    os.environ["PAIKA_DATABASE_URL"] = url
    os.environ["PAIKA_ADMINS"] = "UADMIN"
    with contextlib.redirect_stdout(io.StringIO()):
        return export(words, fmt, user)  # type: ignore[operator,no-any-return]


if __name__ == "__main__":
    main()
