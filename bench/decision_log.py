"""What the decision log adds to a cycle, on policy_pass.py's cluster and queue (10,000
pending jobs, 1,024 GPUs): the reasons the cycle now asks the policy for, the first write
(every waiting job's reason) and a steady cycle's write (only what changed), into a SQLite
file. A steady queue writes lines by changes, not by cycles.

    .venv/bin/python bench/decision_log.py [--cycles 10] [--seed 1]

Prints a table and ends with one JSON line of the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from policy_pass import build  # the same synthetic cluster and queue
from sqlalchemy import func
from sqlmodel import Session, select

from scheduler.decision_log import DecisionLog, Outcome
from scheduler.policy.scheduler import schedule
from storage.db import make_engine, upgrade
from storage.models import Decision


def _ms(began: float) -> float:
    return round((time.perf_counter() - began) * 1000, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    snapshot = build(args.seed)
    with tempfile.TemporaryDirectory() as folder:
        engine = make_engine(f"sqlite:///{Path(folder) / 'bench.db'}")
        upgrade(engine)
        log = DecisionLog()

        def cycle(step: int) -> tuple[float, float, float, int]:
            moved = replace(snapshot, now=snapshot.now + 10 * step)
            began = time.perf_counter()
            schedule(moved, explain=False)
            decisions = _ms(began)
            began = time.perf_counter()
            plan = schedule(moved, explain=True)
            with_reasons = _ms(began)
            at = datetime.fromtimestamp(moved.now, UTC)
            began = time.perf_counter()
            written = log.write(engine, moved, plan, Outcome(at, {}, [], []))
            return decisions, with_reasons, _ms(began), written

        _, _, first_ms, first_lines = cycle(0)
        steady = [cycle(step) for step in range(1, args.cycles + 1)]
        with Session(engine) as session:
            rows = int(session.exec(select(func.count()).select_from(Decision)).one())
        engine.dispose()
    figures = {
        "pending": len(snapshot.pending),
        "first_write_lines": first_lines,
        "first_write_ms": first_ms,
        "steady_cycles": args.cycles,
        "steady_lines_per_cycle_max": max(s[3] for s in steady),
        "steady_write_ms_median": statistics.median(s[2] for s in steady),
        "policy_decisions_ms_median": statistics.median(s[0] for s in steady),
        "policy_with_reasons_ms_median": statistics.median(s[1] for s in steady),
        "rows_after_all_cycles": rows,
    }
    figures["added_ms_per_steady_cycle"] = round(
        figures["policy_with_reasons_ms_median"]
        - figures["policy_decisions_ms_median"]
        + figures["steady_write_ms_median"],
        2,
    )
    width = max(len(key) for key in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
