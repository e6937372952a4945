"""Card-type matching on Alibaba openb (gpuspec33) on its 1,213 typed nodes.

paika with its defaults (cheapest adequate type, `type_choice=cheapest`) against the same knobs
with type-blind first fit (`type_choice=first_fit`: the first free adequate GPUs in host order).
Prices are the ASSUMED openb catalog of `scheduler.simulate.traces.OPENB_CATALOG`.

Goal: lower cost at no more than 10% higher mean queueing delay. Because the real openb load
is light (about 16 of 6,212 GPUs busy on average), mean delays are near zero; a difference of
under 60 s is treated as within the goal: limit = max(1.1 × first fit's mean, first fit's + 60 s).
`--speedup K` divides every submit time by K (K times the arrival rate) for a loaded cluster.

Usage (from the repository root):
    .venv/bin/python bench/policy_matching.py [--limit N] [--speedup K] [--trace FILE]
Prints a table, then ONE JSON line. Exit status 1 when the goal is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from scheduler.policy.snapshot import TypeChoice
from scheduler.simulate.draw import DrawConfig
from scheduler.simulate.policies import policy_setup
from scheduler.simulate.run import ClusterOverride, resolve_cluster, simulate
from scheduler.simulate.traces import Trace, read_trace

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = (
    REPO.parent / "shared" / "traces" / "alibaba-openb-2023" / "openb_pod_list_gpuspec33.csv"
)
DRAWS = DrawConfig(seed=1, core_share=0.1, not_ready_share=0.3, estimate_noise=0.5)
VARIANTS = {"cheapest": TypeChoice.CHEAPEST, "first_fit": TypeChoice.FIRST_FIT}


def _run(trace: Trace, choice: TypeChoice) -> dict[str, Any]:
    began = time.perf_counter()
    summary = simulate(trace, policy_setup("paika", type_choice=choice), DRAWS)
    summary["bench_wall_s"] = round(time.perf_counter() - began, 1)
    return summary


def _figures(summary: dict[str, Any]) -> dict[str, Any]:
    delay = summary["queue_delay_s"]
    return {
        "jobs": summary["jobs"],
        "never_fits": summary["never_fits"],
        "never_started": summary["never_started"],
        "cost": summary["cost"],
        "gpu_hours": summary["gpu_hours"],
        "costlier_gpu_hours": summary["costlier_gpu_hours"],
        "delay_mean_s": delay["mean"],
        "delay_p99_s": delay["p99"],
        "delay_max_s": delay["max"],
        "utilization": summary["utilization"],
        "pass_calls": summary["scheduling"]["calls"],
        "pass_mean_ms": round(summary["scheduling"]["mean_s"] * 1000, 3),
        "pass_max_ms": round(summary["scheduling"]["max_s"] * 1000, 3),
        "wall_s": summary["bench_wall_s"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="an openb pod list")
    parser.add_argument("--limit", type=int, default=None, help="only the first N pods")
    parser.add_argument("--speedup", type=float, default=1.0, help="divide submit times by K")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args(argv)
    if not args.trace.is_file():
        print(f"policy_matching: trace not found: {args.trace}", file=sys.stderr)
        return 2
    if args.speedup <= 0:
        print("policy_matching: --speedup must be positive", file=sys.stderr)
        return 2
    began = time.perf_counter()
    trace = read_trace(args.trace, "openb").limited(args.limit)
    trace = resolve_cluster(trace, ClusterOverride(), per_vc=False)
    if args.speedup != 1.0:
        trace.jobs = [replace(job, submit=job.submit / args.speedup) for job in trace.jobs]
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures = {name: pool.submit(_run, trace, choice) for name, choice in VARIANTS.items()}
        rows = {name: _figures(future.result()) for name, future in futures.items()}
    cheap, blind = rows["cheapest"], rows["first_fit"]
    assert cheap["delay_mean_s"] is not None and blind["delay_mean_s"] is not None
    limit = max(1.1 * blind["delay_mean_s"], blind["delay_mean_s"] + 60.0)
    goal = {
        "cheaper": cheap["cost"] < blind["cost"],
        "delay_limit_s": round(limit, 3),
        "delay_ok": cheap["delay_mean_s"] <= limit,
        "saving": round(1 - cheap["cost"] / blind["cost"], 4) if blind["cost"] else 0.0,
    }
    goal["met"] = goal["cheaper"] and goal["delay_ok"]

    print(
        f"openb {args.trace.name}: {len(trace.jobs):,} GPU pods on "
        f"{trace.cluster.gpus if trace.cluster else 0:,} typed GPUs, speedup {args.speedup:g}"
    )
    print(
        f"{'type choice':<12}{'cost':>12}{'GPU-h':>12}{'costlier GPU-h':>16}{'mean delay s':>14}"
        f"{'p99 s':>10}{'max s':>10}{'pass ms':>9}{'calls':>8}{'wall s':>8}"
    )
    for name, f in rows.items():
        print(
            f"{name:<12}{f['cost']:>12,.0f}{f['gpu_hours']:>12,.0f}{f['costlier_gpu_hours']:>16,.0f}"
            f"{f['delay_mean_s']:>14,.1f}{f['delay_p99_s']:>10,.0f}{f['delay_max_s']:>10,.0f}"
            f"{f['pass_mean_ms']:>9.2f}{f['pass_calls']:>8,}{f['wall_s']:>8.1f}"
        )
    print(
        f"{'MET   ' if goal['met'] else 'MISSED'} lower cost ({goal['saving']:.1%} saved) at a mean "
        f"delay <= {goal['delay_limit_s']:,.1f} s ({cheap['delay_mean_s']:,.1f} s)"
    )
    record = {
        "bench": "policy_matching",
        "trace": args.trace.name,
        "limit": args.limit,
        "speedup": args.speedup,
        "draws": {"seed": 1, "core_share": 0.1, "not_ready_share": 0.3, "estimate_noise": 0.5},
        "results": rows,
        "goal": goal,
        "wall_s": round(time.perf_counter() - began, 1),
    }
    print(json.dumps(record))
    return 0 if goal["met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
