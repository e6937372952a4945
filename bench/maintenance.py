"""What planning around maintenance keeps busy: paika's plan against draining at the notice.

Every host has one maintenance window a week (4 h from 22:00, a seventh of the hosts on each
night), known a day ahead (`--lead-hours`), and a team books `--booking-gpus` cards for 12 h
each week (known three days ahead). Each configuration (policy_quality.py's, `philly-40k` by
default) is replayed three times by `paika simulate`'s engine with the paika policy and
policy_quality's draws:
- `ignore`, the counterfactual: the same windows and bookings measured but not kept (what each
  host would have done in each notice with no window at all);
- `drain`, the baseline: the host is drained when its window is known (`admin host drain`):
  it takes nothing new, and its running jobs finish;
- `plan`, paika's: from the notice the policy starts nothing on the host that would still run
  at the window's start (its estimate × 1.25), puts the work that ends before it there first,
  and keeps long jobs' places elsewhere.
At a window's start what still runs there is stopped and queued again in both.

Lost to draining: the GPU-hours the hosts would have held in the notices with no window
(`ignore`'s busy) less what they held doing useful work (busy less `thrown`: the work of runs
begun in a notice that the window's start threw away; a run begun before its window was known
is counted apart, "unforeseen", as neither mode could have saved it). Idle notice time alone
overstates the loss: a host in its notice on a cluster with free cards elsewhere loses nothing.

Goal (issue 32): the plan keeps at least half of what the drain loses busy:
(lost by drain − lost by plan) ÷ lost by drain ≥ 0.5. Bookings: how many found their cards
free (or held by their team) at their start, in each mode; `ignore` says how many would have
without the booking.

Usage (from the repository root):
    .venv/bin/python bench/maintenance.py [--configs philly-40k] [--limit N] [--lead-hours H]
        [--hours H] [--booking-gpus N] [--workers N]
Prints one table and the goal, then ONE JSON line with every figure. Exit status 1 when the
goal is missed, 2 when a trace is not found.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from scheduler.simulate.calendar import WeeklyPlan
from scheduler.simulate.policies import policy_setup
from scheduler.simulate.run import simulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
import policy_quality  # noqa: E402  (the configurations and draws it defines, shared here)

MODES = ("ignore", "drain", "plan")
KEPT_AT_LEAST = 0.5


def _run(name: str, plan: WeeklyPlan, limit: int | None) -> dict[str, Any]:
    began = time.perf_counter()
    trace = policy_quality._trace(policy_quality.CONFIGS[name], limit)
    summary = simulate(trace, policy_setup("paika"), policy_quality.DRAWS, calendar=plan)
    summary["bench_wall_s"] = round(time.perf_counter() - began, 1)
    return summary


def _figures(summary: dict[str, Any]) -> dict[str, Any]:
    calendar = summary["calendar"]
    classes = summary["by_class"]
    return {
        "jobs": summary["jobs"],
        "finished": summary["finished"],
        "windows": calendar["windows"],
        "notice_gpu_hours": round(calendar["notice_gpu_hours"], 1),
        "busy_gpu_hours": round(calendar["busy_gpu_hours"], 1),
        "idle_gpu_hours": round(calendar["idle_gpu_hours"], 1),
        "thrown_gpu_hours": round(calendar["thrown_gpu_hours"], 1),
        "unforeseen_gpu_hours": round(calendar["unforeseen_gpu_hours"], 1),
        "unused_gpu_hours": round(calendar["unused_gpu_hours"], 1),
        "stopped_jobs": calendar["stopped_jobs"],
        "bookings": calendar["bookings"],
        "bookings_honoured": calendar["bookings_honoured"],
        "wait_mean_s": summary["wait_s"]["mean"],
        "core_wait_mean_s": classes.get("core", {}).get("wait_s", {}).get("mean"),
        "utilization": summary["utilization"],
        "wall_s": summary["bench_wall_s"],
    }


def _num(value: Any, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _with_losses(modes: dict[str, dict[str, Any]]) -> None:
    """Each mode's GPU-hours lost to draining, against the counterfactual's busy hours."""
    wanted = modes["ignore"]["busy_gpu_hours"]
    for figures in modes.values():
        useful = figures["busy_gpu_hours"] - figures["thrown_gpu_hours"]
        figures["lost_gpu_hours"] = round(max(0.0, wanted - useful), 1)


def _table(rows: dict[str, dict[str, dict[str, Any]]]) -> str:
    head = (
        f"{'config':<14}{'mode':<7}{'windows':>8}{'notice':>10}{'busy':>10}{'idle':>10}"
        f"{'thrown':>9}{'lost':>10}{'unforeseen':>12}{'stopped':>9}{'bookings':>10}"
        f"{'mean wait':>11}{'core':>8}{'wall s':>8}"
    )
    lines = ["GPU-hours in the windows' notices; waits in seconds (mean)", head]
    for config, modes in rows.items():
        for mode, f in modes.items():
            lines.append(
                f"{config:<14}{mode:<7}{f['windows']:>8,}{_num(f['notice_gpu_hours']):>10}"
                f"{_num(f['busy_gpu_hours']):>10}{_num(f['idle_gpu_hours']):>10}"
                f"{_num(f['thrown_gpu_hours']):>9}{_num(f['lost_gpu_hours']):>10}"
                f"{_num(f['unforeseen_gpu_hours']):>12}{f['stopped_jobs']:>9,}"
                f"{f['bookings_honoured']:>5}/{f['bookings']:<4}"
                f"{_num(f['wait_mean_s']):>11}{_num(f['core_wait_mean_s']):>8}{f['wall_s']:>8.1f}"
            )
    return "\n".join(lines)


def _goal(modes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    drain, plan = modes["drain"]["lost_gpu_hours"], modes["plan"]["lost_gpu_hours"]
    kept = (drain - plan) / drain if drain else None
    return {
        "goal": "the plan keeps at least half of the GPU-hours draining at the notice loses",
        "value": None if kept is None else round(kept, 4),
        "limit": KEPT_AT_LEAST,
        "met": kept is not None and kept >= KEPT_AT_LEAST,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--configs", default="philly-40k", help="comma-separated")
    parser.add_argument("--limit", type=int, default=None, help="only the first N jobs of each")
    parser.add_argument("--hours", type=float, default=4.0, help="each window's length")
    parser.add_argument("--lead-hours", type=float, default=24.0, help="each window's notice")
    parser.add_argument("--booking-gpus", type=int, default=16, help="0: no booking")
    parser.add_argument(
        "--workers", type=int, default=min(4, os.cpu_count() or 1), help="parallel replays"
    )
    args = parser.parse_args(argv)
    configs = [name for name in args.configs.split(",") if name]
    unknown = [name for name in configs if name not in policy_quality.CONFIGS]
    if unknown:
        print(f"maintenance: unknown configuration(s) {', '.join(unknown)}", file=sys.stderr)
        return 2
    for name in configs:
        path = policy_quality.CONFIGS[name].path
        if not path.is_file():
            print(f"maintenance: trace not found: {path}", file=sys.stderr)
            return 2
    plans = {
        mode: WeeklyPlan(
            mode, hours=args.hours, lead_hours=args.lead_hours, booking_gpus=args.booking_gpus
        )
        for mode in MODES
    }
    began = time.perf_counter()
    rows: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in configs}
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures = {
            (name, mode): pool.submit(_run, name, plans[mode], args.limit)
            for name in configs
            for mode in MODES
        }
        for (name, mode), future in futures.items():
            figures = _figures(future.result())
            rows[name][mode] = figures
            print(f"… {name} {mode} {json.dumps(figures)}", file=sys.stderr, flush=True)
    for modes in rows.values():
        _with_losses(modes)
    print(_table(rows))
    goals = {name: _goal(modes) for name, modes in rows.items()}
    for name, goal in goals.items():
        state = "MET   " if goal["met"] else "MISSED"
        print(f"{name}: {state} {goal['goal']}: {goal['value']} (at least {goal['limit']})")
    record = {
        "bench": "maintenance",
        "limit": args.limit,
        "hours": args.hours,
        "lead_hours": args.lead_hours,
        "booking_gpus": args.booking_gpus,
        "rows": rows,
        "goals": goals,
        "all_goals_met": all(goal["met"] for goal in goals.values()),
        "wall_s": round(time.perf_counter() - began, 1),
    }
    print(json.dumps(record))
    return 0 if record["all_goals_met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
