"""Policy quality on Microsoft Philly: paika against FIFO, naive FIFO, EASY and an SJF oracle.

Pooled run: every Philly job on one cluster of 66 nodes × 8 GPUs, with
`--estimate-noise 0.5 --core-share 0.1 --not-ready-share 0.3 --seed 1`, under fifo, fifo-hold,
easy, sjf (oracle) and paika. Goals checked:

1. paika's mean queueing delay ≤ 1.25 × the SJF oracle's;
2. paika's MAX queueing delay ≤ 1.5 × EASY's (no starvation for the sake of the mean);
3. the core class's mean delay ≤ 1/10 of paika's overall mean;
4. paika holds no GPU-hours idle waiting for data.

Per-VC run: each of the 11 VCs with published sizes (HeliosArtifact's philly_vc.csv, 8 GPUs per
node) on its own cluster, summed up as in the Helios simulator, next to the Helios figures.

Usage (from the repository root):
    .venv/bin/python bench/policy_quality.py [--limit N] [--trace FILE] [--workers N]
Prints tables, then ONE JSON line with every figure. Exit status 1 when a goal is missed.
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

from scheduler.simulate.draw import DrawConfig
from scheduler.simulate.policies import policy_setup
from scheduler.simulate.run import ClusterOverride, resolve_cluster, simulate
from scheduler.simulate.traces import Trace, read_trace

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = REPO.parent / "shared" / "traces" / "philly" / "philly_jobs_pollux.csv"
POOLED_POLICIES = ("fifo", "fifo-hold", "easy", "sjf", "paika")
PER_VC_POLICIES = ("fifo", "sjf", "easy", "paika")
DRAWS = DrawConfig(seed=1, core_share=0.1, not_ready_share=0.3, estimate_noise=0.5)
# HeliosArtifact, QSSF Service result_plot.ipynb: Philly, 11 VCs, 8 GPUs per node (seconds).
HELIOS = {
    "fifo": {"jct_mean_s": 86_072, "queue_delay_mean_s": 56_531},
    "sjf": {"jct_mean_s": 34_272, "queue_delay_mean_s": 4_731},
    "srtf": {"jct_mean_s": 30_683, "queue_delay_mean_s": 1_138},
    "qssf": {"jct_mean_s": 37_324, "queue_delay_mean_s": 7_783},
}


def _run(trace: Trace, policy: str, per_vc: bool) -> dict[str, Any]:
    began = time.perf_counter()
    summary = simulate(trace, policy_setup(policy), DRAWS, per_vc=per_vc)
    summary["bench_wall_s"] = round(time.perf_counter() - began, 1)
    return summary


def _figures(summary: dict[str, Any]) -> dict[str, Any]:
    delay = summary["queue_delay_s"]
    core = summary["by_class"].get("core", {}).get("queue_delay_s", {})
    return {
        "jobs": summary["jobs"],
        "never_fits": summary["never_fits"],
        "never_started": summary["never_started"],
        "delay_mean_s": delay["mean"],
        "delay_median_s": delay["median"],
        "delay_p99_s": delay["p99"],
        "delay_max_s": delay["max"],
        "core_delay_mean_s": core.get("mean"),
        "wait_to_run_mean_s": summary["wait_to_run_s"]["mean"],
        "jct_mean_s": summary["jct_s"]["mean"],
        "makespan_s": summary["makespan_s"],
        "utilization": summary["utilization"],
        "held_idle_gpu_hours": summary["held_idle_gpu_hours"],
        "preemptions": summary["preemptions"],
        "pass_calls": summary["scheduling"]["calls"],
        "pass_mean_ms": round(summary["scheduling"]["mean_s"] * 1000, 3),
        "pass_max_ms": round(summary["scheduling"]["max_s"] * 1000, 3),
        "wall_s": summary["bench_wall_s"],
    }


def _num(value: Any, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _table(title: str, rows: dict[str, dict[str, Any]]) -> str:
    head = (
        f"{'policy':<10}{'jobs':>7}{'mean delay':>12}{'median':>9}{'p99':>11}{'max':>11}"
        f"{'core mean':>11}{'mean JCT':>11}{'util':>7}{'held idle':>11}{'pass ms':>9}"
        f"{'max ms':>9}{'calls':>8}{'wall s':>8}"
    )
    lines = [title, head]
    for name, f in rows.items():
        lines.append(
            f"{name:<10}{f['jobs']:>7,}{_num(f['delay_mean_s']):>12}{_num(f['delay_median_s']):>9}"
            f"{_num(f['delay_p99_s']):>11}{_num(f['delay_max_s']):>11}"
            f"{_num(f['core_delay_mean_s']):>11}{_num(f['jct_mean_s']):>11}"
            f"{f['utilization']:>7.1%}{_num(f['held_idle_gpu_hours'], 1):>11}"
            f"{f['pass_mean_ms']:>9.2f}{f['pass_max_ms']:>9.1f}{f['pass_calls']:>8,}"
            f"{f['wall_s']:>8.1f}"
        )
    return "\n".join(lines)


def _goals(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    paika, sjf, easy = rows["paika"], rows["sjf"], rows["easy"]

    def goal(value: float | None, limit: float | None, words: str) -> dict[str, Any]:
        met = value is not None and limit is not None and value <= limit
        return {"value": value, "limit": limit, "met": met, "goal": words}

    def times(figure: float | None, factor: float) -> float | None:
        return None if figure is None else round(figure * factor, 3)

    return {
        "mean_delay_vs_sjf": goal(
            paika["delay_mean_s"],
            times(sjf["delay_mean_s"], 1.25),
            "paika mean queueing delay <= 1.25 x SJF oracle's",
        ),
        "max_delay_vs_easy": goal(
            paika["delay_max_s"],
            times(easy["delay_max_s"], 1.5),
            "paika max queueing delay <= 1.5 x EASY's",
        ),
        "core_mean_delay": goal(
            paika["core_delay_mean_s"],
            times(paika["delay_mean_s"], 0.1),
            "core mean delay <= 1/10 of paika's overall mean",
        ),
        "no_gpus_held_for_data": goal(
            paika["held_idle_gpu_hours"], 0.0, "paika holds 0 GPU-hours waiting for data"
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="philly_jobs_pollux.csv")
    parser.add_argument("--limit", type=int, default=None, help="only the first N jobs")
    parser.add_argument("--nodes", type=int, default=66)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--no-per-vc", action="store_true", help="skip the per-VC run")
    parser.add_argument(
        "--workers", type=int, default=min(4, os.cpu_count() or 1), help="parallel replays"
    )
    args = parser.parse_args(argv)
    if not args.trace.is_file():
        print(f"policy_quality: trace not found: {args.trace}", file=sys.stderr)
        return 2
    began = time.perf_counter()
    trace = read_trace(args.trace, "philly").limited(args.limit)
    pooled = resolve_cluster(trace, ClusterOverride(args.nodes, args.gpus_per_node), per_vc=False)
    per_vc = resolve_cluster(trace, ClusterOverride(), per_vc=True)
    work = [(pooled, policy, False) for policy in POOLED_POLICIES]
    if not args.no_per_vc:
        work += [(per_vc, policy, True) for policy in PER_VC_POLICIES]
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures = [pool.submit(_run, *item) for item in work]
        summaries = []
        for (_, policy, vc), future in zip(work, futures, strict=True):
            summaries.append(future.result())
            where = "per-VC" if vc else "pooled"
            print(f"… {where} {policy} done ({summaries[-1]['bench_wall_s']} s)", file=sys.stderr)
    pooled_rows = {
        policy: _figures(s) for (_, policy, vc), s in zip(work, summaries, strict=True) if not vc
    }
    vc_rows = {
        policy: _figures(s) for (_, policy, vc), s in zip(work, summaries, strict=True) if vc
    }
    print(
        _table(
            f"Philly pooled: {len(pooled.jobs):,} jobs on {args.nodes} nodes x "
            f"{args.gpus_per_node} GPUs (delays and JCT in seconds)",
            pooled_rows,
        )
    )
    goals = _goals(pooled_rows)
    print()
    for g in goals.values():
        print(
            f"{'MET   ' if g['met'] else 'MISSED'} {g['goal']}: {g['value']} (limit {g['limit']})"
        )
    if vc_rows:
        gpus = sum(spec.gpus for spec in per_vc.queue_clusters.values())
        print()
        print(
            _table(
                f"Philly per VC: {len(per_vc.queue_clusters)} VCs, {gpus:,} GPUs "
                "(jobs of VCs without a size dropped)",
                vc_rows,
            )
        )
        print(
            "Helios (HeliosArtifact, per VC): "
            + ", ".join(
                f"{name} mean JCT {h['jct_mean_s']:,} s, mean queue {h['queue_delay_mean_s']:,} s"
                for name, h in HELIOS.items()
            )
        )
    record = {
        "bench": "policy_quality",
        "trace": str(args.trace.name),
        "limit": args.limit,
        "pooled_cluster": {"nodes": args.nodes, "gpus_per_node": args.gpus_per_node},
        "draws": {"seed": 1, "core_share": 0.1, "not_ready_share": 0.3, "estimate_noise": 0.5},
        "pooled": pooled_rows,
        "per_vc": vc_rows,
        "helios_per_vc": HELIOS,
        "goals": goals,
        "all_goals_met": all(g["met"] for g in goals.values()),
        "wall_s": round(time.perf_counter() - began, 1),
    }
    print(json.dumps(record))
    return 0 if record["all_goals_met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
