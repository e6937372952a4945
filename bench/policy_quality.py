"""Policy quality: paika against FIFO, EASY, a Slurm-like multifactor baseline and an SJF oracle,
on every cluster configuration of the goals, with one set of defaults.

Configurations (`--configs`, all by default):
- `philly-56`, `philly-66`, `philly-80`: every Philly job pooled on 56, 66 or 80 nodes × 8 GPUs;
- `philly-40k`: the first 40,000 Philly jobs on 40 nodes × 8 GPUs;
- `openb-200x`: Alibaba openb (gpuspec33) on its typed nodes, arrivals 200× faster. Its node
  list was the cluster that ran those pods, so nothing waits there (every policy ties);
- `openb-200x-tenth`: the same on every 10th node of each type, where typed pods queue.
Draws: `--estimate-noise 0.5 --core-share 0.1 --not-ready-share 0.3 --seed 1`. Policies: fifo,
easy, slurm (multifactor + EASY), sjf (oracle: exact run times, no preemption), paika, and
`paika+pre`: paika where half the normal jobs declare they checkpoint (every 30 min, 5 min to
resume, both charged as lost GPU-hours) and may be preempted.

Waits are `wait_s`: from the moment a job could run (submitted, data ready) to its first start,
plus every stretch it was queued again after a preemption.

Goals, per configuration:
1. paika+pre's mean wait ≤ 1.25 × the SJF oracle's;
2. paika's and paika+pre's max wait ≤ 1.5 × EASY's max;
3. paika's mean wait ≤ slurm's and ≤ EASY's;
4. core jobs' mean wait ≤ 1/10 of the normal class's (paika and paika+pre);
5. 0 GPU-hours held waiting for data; utilization within 2 points of EASY's (both).

Usage (from the repository root):
    .venv/bin/python bench/policy_quality.py [--configs philly-66,openb-200x] [--policies ...]
        [--limit N] [--workers N]
Prints one table and the goals, then ONE JSON line with every figure. Exit status 1 when a goal
is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from scheduler.simulate.draw import DrawConfig
from scheduler.simulate.policies import policy_setup
from scheduler.simulate.run import ClusterOverride, resolve_cluster, simulate
from scheduler.simulate.traces import ClusterSpec, NodeGroup, Trace, read_trace

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "traces"
PHILLY = TRACES / "philly" / "philly_jobs_pollux.csv"
OPENB = TRACES / "alibaba-openb-2023" / "openb_pod_list_gpuspec33.csv"
DRAWS = DrawConfig(seed=1, core_share=0.1, not_ready_share=0.3, estimate_noise=0.5)
PREEMPTIBLE = replace(DRAWS, preemptible_share=0.5, checkpoint_s=1800.0, restart_s=300.0)
POLICIES = ("fifo", "easy", "slurm", "sjf", "paika", "paika+pre")


@dataclass(frozen=True)
class Config:
    name: str
    path: Path
    fmt: str
    nodes: int | None = None  # pooled on N × 8 GPUs; None: the trace's own nodes
    limit: int | None = None
    speedup: float = 1.0
    # Keep every n-th node of the trace's own list (each type keeps its share): openb's
    # cluster was sized for its pods, so only a smaller one makes them queue.
    node_every: int = 1


CONFIGS = {
    config.name: config
    for config in (
        Config("philly-56", PHILLY, "philly", nodes=56),
        Config("philly-66", PHILLY, "philly", nodes=66),
        Config("philly-80", PHILLY, "philly", nodes=80),
        Config("philly-40k", PHILLY, "philly", nodes=40, limit=40_000),
        Config("openb-200x", OPENB, "openb", speedup=200.0),
        Config("openb-200x-tenth", OPENB, "openb", speedup=200.0, node_every=10),
    )
}


def _trace(config: Config, limit: int | None) -> Trace:
    trace = read_trace(config.path, config.fmt)
    cap = (
        min(x for x in (config.limit, limit) if x is not None) if (config.limit or limit) else None
    )
    trace = trace.limited(cap)
    if config.speedup != 1.0:
        first = min((job.submit for job in trace.jobs), default=0.0)
        trace.jobs = [
            replace(job, submit=first + (job.submit - first) / config.speedup) for job in trace.jobs
        ]
    override = ClusterOverride(config.nodes, 8) if config.nodes else ClusterOverride()
    trace = resolve_cluster(trace, override, per_vc=False)
    if config.node_every > 1 and trace.cluster is not None:
        trace = trace.with_cluster(_every(trace.cluster, config.node_every), trace.catalog)
    return trace


def _every(cluster: ClusterSpec, n: int) -> ClusterSpec:
    """Every n-th node of each GPU type (at least one of each), in the cluster's order."""
    kept: list[NodeGroup] = []
    seen: dict[str, int] = {}
    for group in cluster.groups:
        for _ in range(group.count):
            index = seen.get(group.gpu_type, 0)
            seen[group.gpu_type] = index + 1
            if index % n == 0:
                kept.append(NodeGroup(1, group.gpus_per_node, group.gpu_type))
    return ClusterSpec(tuple(kept))


def _run(config: Config, policy: str, limit: int | None) -> dict[str, Any]:
    began, cpu = time.perf_counter(), time.process_time()
    trace = _trace(config, limit)
    name, draws = (policy, DRAWS)
    if policy == "paika+pre":
        name, draws = ("paika", PREEMPTIBLE)
    summary = simulate(trace, policy_setup(name), draws)
    summary["bench_wall_s"] = round(time.perf_counter() - began, 1)
    # The replay's own CPU time: what the wall time would be on an otherwise idle CPU.
    summary["bench_cpu_s"] = round(time.process_time() - cpu, 1)
    return summary


def _figures(summary: dict[str, Any]) -> dict[str, Any]:
    wait = summary["wait_s"]
    classes = summary["by_class"]

    def class_mean(name: str) -> float | None:
        value = classes.get(name, {}).get("wait_s", {}).get("mean")
        return None if value is None else float(value)

    return {
        "jobs": summary["jobs"],
        "never_fits": summary["never_fits"],
        "never_started": summary["never_started"],
        "wait_mean_s": wait["mean"],
        "wait_median_s": wait["median"],
        "wait_p99_s": wait["p99"],
        "wait_max_s": wait["max"],
        "core_wait_mean_s": class_mean("core"),
        "normal_wait_mean_s": class_mean("normal"),
        "idle_wait_mean_s": class_mean("idle"),
        "jct_mean_s": summary["jct_s"]["mean"],
        "utilization": summary["utilization"],
        "held_idle_gpu_hours": summary["held_idle_gpu_hours"],
        "lost_gpu_hours": summary["lost_gpu_hours"],
        "preemptions": summary["preemptions"],
        "pass_calls": summary["scheduling"]["calls"],
        "pass_mean_ms": round(summary["scheduling"]["mean_s"] * 1000, 3),
        "pass_max_ms": round(summary["scheduling"]["max_s"] * 1000, 3),
        "wall_s": summary["bench_wall_s"],
        "cpu_s": summary["bench_cpu_s"],
    }


def _num(value: Any, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _table(rows: dict[str, dict[str, dict[str, Any]]]) -> str:
    head = (
        f"{'config':<18}{'policy':<11}{'jobs':>7}{'mean wait':>11}{'median':>9}{'p99':>11}"
        f"{'max':>11}{'core':>9}{'normal':>10}{'idle':>10}{'util':>7}{'lost GPU-h':>11}"
        f"{'stops':>7}"
        f"{'pass ms':>9}{'max ms':>9}{'wall s':>8}{'cpu s':>8}"
    )
    lines = ["waits in seconds (first wait + waits after preemptions)", head]
    for config, policies in rows.items():
        for name, f in policies.items():
            lines.append(
                f"{config:<18}{name:<11}{f['jobs']:>7,}{_num(f['wait_mean_s']):>11}"
                f"{_num(f['wait_median_s']):>9}{_num(f['wait_p99_s']):>11}"
                f"{_num(f['wait_max_s']):>11}{_num(f['core_wait_mean_s']):>9}"
                f"{_num(f['normal_wait_mean_s']):>10}{_num(f.get('idle_wait_mean_s')):>10}"
                f"{f['utilization']:>7.1%}"
                f"{_num(f['lost_gpu_hours'], 1):>11}{f['preemptions']:>7,}"
                f"{f['pass_mean_ms']:>9.2f}{f['pass_max_ms']:>9.1f}{f['wall_s']:>8.1f}"
                f"{f.get('cpu_s', 0.0):>8.1f}"
            )
    return "\n".join(lines)


def _goal(value: float | None, limit: float | None, words: str) -> dict[str, Any]:
    met = value is not None and limit is not None and value <= limit
    return {"value": value, "limit": limit, "met": met, "goal": words}


def _times(figure: float | None, factor: float) -> float | None:
    return None if figure is None else round(figure * factor, 3)


def _goals(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The goals that the policies present in `rows` let us check."""
    goals: dict[str, dict[str, Any]] = {}
    easy, sjf, slurm = rows.get("easy"), rows.get("sjf"), rows.get("slurm")
    for name in ("paika", "paika+pre"):
        run = rows.get(name)
        if run is None:
            continue
        if name == "paika+pre" and sjf:
            goals["pre_mean_vs_sjf"] = _goal(
                run["wait_mean_s"],
                _times(sjf["wait_mean_s"], 1.25),
                "paika+pre mean wait <= 1.25 x SJF oracle's",
            )
        if easy:
            goals[f"{name}_max_vs_easy"] = _goal(
                run["wait_max_s"],
                _times(easy["wait_max_s"], 1.5),
                f"{name} max wait <= 1.5 x EASY's",
            )
            goals[f"{name}_utilization"] = _goal(
                -run["utilization"],
                -(easy["utilization"] - 0.02),
                f"{name} utilization within 2 points of EASY's (negated)",
            )
        if name == "paika" and easy:
            goals["mean_vs_easy"] = _goal(
                run["wait_mean_s"], easy["wait_mean_s"], "paika mean wait <= EASY's"
            )
        if name == "paika" and slurm:
            goals["mean_vs_slurm"] = _goal(
                run["wait_mean_s"], slurm["wait_mean_s"], "paika mean wait <= slurm's"
            )
        goals[f"{name}_core"] = _goal(
            run["core_wait_mean_s"],
            _times(run["normal_wait_mean_s"], 0.1),
            f"{name} core mean wait <= 1/10 of the normal class's",
        )
        goals[f"{name}_held_for_data"] = _goal(
            run["held_idle_gpu_hours"], 0.0, f"{name} holds 0 GPU-hours waiting for data"
        )
    return goals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated")
    parser.add_argument("--policies", default=",".join(POLICIES), help="comma-separated")
    parser.add_argument("--limit", type=int, default=None, help="only the first N jobs of each")
    parser.add_argument(
        "--workers", type=int, default=min(4, os.cpu_count() or 1), help="parallel replays"
    )
    args = parser.parse_args(argv)
    configs = [name for name in args.configs.split(",") if name]
    policies = [name for name in args.policies.split(",") if name]
    unknown = [c for c in configs if c not in CONFIGS] + [p for p in policies if p not in POLICIES]
    if unknown:
        print(f"policy_quality: unknown {', '.join(unknown)}", file=sys.stderr)
        return 2
    for name in configs:
        if not CONFIGS[name].path.is_file():
            print(f"policy_quality: trace not found: {CONFIGS[name].path}", file=sys.stderr)
            return 2
    began = time.perf_counter()
    work = [(CONFIGS[c], p) for c in configs for p in policies]
    rows: dict[str, dict[str, dict[str, Any]]] = {c: {} for c in configs}
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures = {
            pool.submit(_run, config, policy, args.limit): (config, policy)
            for config, policy in work
        }
        for future, (config, policy) in futures.items():
            figures = _figures(future.result())
            rows[config.name][policy] = figures
            print(f"… {config.name} {policy} {json.dumps(figures)}", file=sys.stderr, flush=True)
    print(_table(rows))
    goals = {config: _goals(by_policy) for config, by_policy in rows.items()}
    for config, checks in goals.items():
        print()
        print(config)
        for g in checks.values():
            state = "MET   " if g["met"] else "MISSED"
            print(f"  {state} {g['goal']}: {g['value']} (limit {g['limit']})")
    record = {
        "bench": "policy_quality",
        "limit": args.limit,
        "draws": {"seed": 1, "core_share": 0.1, "not_ready_share": 0.3, "estimate_noise": 0.5},
        "preemptible": {"share": 0.5, "checkpoint_s": 1800, "restart_s": 300},
        "rows": rows,
        "goals": goals,
        "all_goals_met": all(g["met"] for checks in goals.values() for g in checks.values()),
        "wall_s": round(time.perf_counter() - began, 1),
    }
    print(json.dumps(record))
    return 0 if record["all_goals_met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
