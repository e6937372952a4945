"""What sharing cards buys: paika's policy replayed with whole cards and with shared ones.

Configurations (`--configs`, both by default):
- `openb-48`: Alibaba openb's default pod list (`openb_pod_list_default.csv`, 7,064 GPU pods, 36 %
  of them asking for part of one GPU) at its own pace on 48 GPUs, 6 hosts × 8, of the reference
  card policy_quality.py pools traces on (V100-16GB);
- `openb-200x-tenth`: policy_quality.py's configuration of that name (the gpuspec33 pod list,
  arrivals 200× faster, every 10th typed node of the trace's cluster).

Each is replayed twice by `paika simulate`'s engine with the paika policy and policy_quality's
draws (`--estimate-noise 0.5 --core-share 0.1 --not-ready-share 0.3 --seed 1`): `--sharing none`
(every job holds whole cards, as today) and `--sharing memory` (every host shares cards with
MPS; a pod with `gpu_milli` below 1000 declares that part of the smallest card type it may use
and gets a fingerprint from Lucid's profiles nearest in memory; neighbours slow each other by
the policy's expected slowdown).

Knobs of the sharing run (`--share-reserve-gib`, `--share-max-jobs`, `--share-max-slowdown`):
the policy's defaults, but for the reserve, 0 GiB here. openb's `gpu_milli` is already the part
of the card its scheduler gave the pod (its pods were packed up to 1000 thousandths a card), so
the policy's 2 GiB reserve on top of it counts the slack twice: on a 16 GiB card it refuses two
pods of 470 thousandths (openb's median), and sharing then saves under 2 % of the GPU-hours
held.

Goals (issue 31), per configuration, sharing against whole cards:
1. GPU-hours held (a shared card once while any job holds it) at least 7 % fewer;
2. mean wait at least 60 % lower;
3. no class's mean wait worse: shared (the pods asking for part of a card), one card, more
   than one card (the 8-card jobs among them), core.

`--ceiling` adds a third replay of each, `--sharing ideal`: the same share jobs by the same
memory, but every one light (no pair refused for bandwidth or slowdown, nobody slowed) and up
to `--ceiling-max-jobs` of them a card. No real pair shares that well: its mean wait is about
the least sharing could give on the configuration, and a wait goal past it is out of reach of
any pairing rule (whole-card work is placed and ordered by the same policy). It bounds the
wait, not the GPU-hours held: those fall by how long the long jobs overlap on one card, and
that depends on where they land (at openb-200x-tenth the ideal replay holds more than the
rule's).

`--seeds` replays each configuration with other draws (policy_quality's are seed 1's: which
jobs are core, which data is late, how far each estimate is off, which profile each pod gets):
one row per seed, the goals judged for each, and a line per configuration with the change of
each seed. The mean wait on openb is decided by a few crowded days near the trace's end and by
which big jobs get a host then, so one seed's figure can mislead.

"GPU-h waited" weighs each job's wait by the GPUs it asked for (simulate's
`gpu_hours_waited`): where sharing makes a host whole for a job of eight cards sooner, many
one-card pods may wait behind it, and the mean wait (per job) and this (per GPU) disagree.

The table's "multi part" is what the jobs of more than one card add to the mean wait: the mean
there would be were every other job to wait nothing. Sharing seats none of them (they hold
whole cards), so it bounds what sharing can do to the mean unless their own waits fall too.

Usage (from the repository root):
    .venv/bin/python bench/sharing.py [--configs openb-48,openb-200x-tenth] [--limit N]
        [--share-reserve-gib G] [--share-max-jobs N] [--share-max-slowdown S] [--workers N]
        [--ceiling [--ceiling-max-jobs N]] [--seeds 1,2,3]
Prints one table and the goals, then ONE JSON line with every figure. Exit status 1 when a goal
is missed, 2 when a trace or the profiles are not found.
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

from scheduler.simulate.policies import policy_setup
from scheduler.simulate.run import ClusterOverride, Sharing, resolve_cluster, simulate
from scheduler.simulate.shares import default_profiles
from scheduler.simulate.traces import Trace, read_trace

sys.path.insert(0, str(Path(__file__).resolve().parent))
import policy_quality  # noqa: E402  (the configuration and draws it defines, shared here)

OPENB_DEFAULT = policy_quality.TRACES / "alibaba-openb-2023" / "openb_pod_list_default.csv"
MODES = ("none", "memory")
CEILING = "ideal"  # the --ceiling replay's sharing mode
CEILING_MAX_JOBS = 8  # jobs a card in it (the memory they declare still has to fit)
CLASSES = ("shared", "one_card", "multi_card", "core")
HELD_AT_MOST = 0.93  # sharing's GPU-hours held ÷ whole cards'
WAIT_AT_MOST = 0.40  # sharing's mean wait ÷ whole cards'


@dataclass(frozen=True)
class Config:
    name: str
    path: Path


CONFIGS = {
    "openb-48": Config("openb-48", OPENB_DEFAULT),
    "openb-200x-tenth": Config("openb-200x-tenth", policy_quality.OPENB),
}


@dataclass(frozen=True)
class ShareKnobs:
    reserve_gib: float | None = None
    max_jobs: int | None = None
    max_slowdown: float | None = None
    ceiling_max_jobs: int = CEILING_MAX_JOBS


def _trace(name: str, limit: int | None) -> Trace:
    if name == "openb-48":
        trace = read_trace(OPENB_DEFAULT, "openb").limited(limit)
        return resolve_cluster(trace, ClusterOverride(6, 8), per_vc=False)
    return policy_quality._trace(policy_quality.CONFIGS[name], limit)


def _given(value: Any, default: Any) -> Any:
    return default if value is None else value


def _run(
    name: str, mode: str, limit: int | None, knobs: ShareKnobs, seed: int = 1
) -> dict[str, Any]:
    began = time.perf_counter()
    trace = _trace(name, limit)
    setup = policy_setup("paika")
    if mode != "none":
        policy = setup.knobs
        max_jobs = knobs.ceiling_max_jobs if mode == CEILING else knobs.max_jobs
        policy = replace(
            policy,
            share_reserve_gib=_given(knobs.reserve_gib, policy.share_reserve_gib),
            share_max_jobs=_given(max_jobs, policy.share_max_jobs),
            share_max_slowdown=_given(knobs.max_slowdown, policy.share_max_slowdown),
        )
        setup = replace(setup, knobs=policy)
    draws = replace(policy_quality.DRAWS, seed=seed)
    summary = simulate(trace, setup, draws, sharing=Sharing(mode))
    summary["bench_wall_s"] = round(time.perf_counter() - began, 1)
    return summary


def _figures(summary: dict[str, Any]) -> dict[str, Any]:
    slow = summary["slowdowns"]
    knobs = summary["knobs"]
    return {
        "jobs": summary["jobs"],
        "finished": summary["finished"],
        "gpu_hours_held": summary["gpu_hours_held"],
        "wait_mean_s": summary["wait_s"]["mean"],
        "gpu_hours_waited": summary["gpu_hours_waited"],
        "waits": summary["waits"],
        "multi_card_part_s": _part_of_mean(summary, "multi_card"),
        "class_jobs": summary["class_jobs"],
        "slowdown_mean": slow["mean"],
        "slowdown_p95": slow["p95"],
        "shared_jobs": slow["shared_jobs"],
        "with_neighbour": slow["with_neighbour"],
        "preemptions": summary["preemptions"],
        "utilization": summary["utilization"],
        "share_knobs": {
            name: knobs[name]
            for name in ("share_reserve_gib", "share_max_jobs", "share_max_slowdown")
        },
        "pass_mean_ms": round(summary["scheduling"]["mean_s"] * 1000, 3),
        "wall_s": summary["bench_wall_s"],
    }


def _part_of_mean(summary: dict[str, Any], kind: str) -> float | None:
    """What one class's waits add to the mean wait of all jobs: its mean × its share of them."""
    mean, count = summary["waits"].get(kind), summary["class_jobs"].get(kind)
    if mean is None or not count or not summary["jobs"]:
        return None
    return round(mean * count / summary["jobs"], 1)


def _num(value: Any, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _change(new: float | None, old: float | None) -> str:
    if new is None or not old:
        return "-"
    return f"{new / old - 1:+.1%}"


def _table(rows: dict[str, dict[str, dict[str, Any]]]) -> str:
    head = (
        f"{'config':<24}{'sharing':<8}{'jobs':>7}{'GPU-h held':>12}{'Δ':>8}{'mean wait':>11}"
        f"{'Δ':>8}{'GPU-h waited':>14}{'Δ':>8}{'shared':>9}{'one card':>10}{'multi':>10}{'core':>8}{'multi part':>12}"
        f"{'slow mean':>11}"
        f"{'p95':>7}{'beside':>8}{'wall s':>8}"
    )
    lines = [
        "waits in seconds (mean, from when a job could run); multi part: what the jobs of more"
        " than one card add to the mean wait (were every other job to wait nothing)",
        head,
    ]
    for config, modes in rows.items():
        base = modes.get("none") or {}
        for mode, f in modes.items():
            w = f["waits"]
            lines.append(
                f"{config:<24}{mode:<8}{f['jobs']:>7,}{_num(f['gpu_hours_held']):>12}"
                f"{_change(f['gpu_hours_held'], base.get('gpu_hours_held')):>8}"
                f"{_num(f['wait_mean_s']):>11}"
                f"{_change(f['wait_mean_s'], base.get('wait_mean_s')):>8}"
                f"{_num(f['gpu_hours_waited']):>14}"
                f"{_change(f['gpu_hours_waited'], base.get('gpu_hours_waited')):>8}"
                f"{_num(w['shared']):>9}{_num(w['one_card']):>10}{_num(w['multi_card']):>10}"
                f"{_num(w['core']):>8}{_num(f['multi_card_part_s']):>12}"
                f"{_pct(f['slowdown_mean']):>11}{_pct(f['slowdown_p95']):>7}"
                f"{f['with_neighbour']:>8,}{f['wall_s']:>8.1f}"
            )
    return "\n".join(lines)


def _goal(value: float | None, limit: float | None, words: str) -> dict[str, Any]:
    met = value is not None and limit is not None and value <= limit
    return {"value": value, "limit": limit, "met": met, "goal": words}


def _goals(modes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    base, shared = modes.get("none"), modes.get("memory")
    if base is None or shared is None:
        return {}
    goals = {
        "held": _goal(
            shared["gpu_hours_held"],
            round(base["gpu_hours_held"] * HELD_AT_MOST, 3),
            "GPU-hours held at least 7 % fewer with sharing",
        ),
        "wait": _goal(
            shared["wait_mean_s"],
            round(base["wait_mean_s"] * WAIT_AT_MOST, 3),
            "mean wait at least 60 % lower with sharing",
        ),
    }
    for name in CLASSES:
        before, after = base["waits"].get(name), shared["waits"].get(name)
        if before is None and after is None:
            continue
        goals[f"{name}_wait"] = _goal(after, before, f"{name} mean wait no worse with sharing")
    return goals


def _by_seed(name: str, replays: list[dict[str, dict[str, Any]]], seeds: list[int]) -> str:
    """One configuration's change with sharing, seed by seed."""
    parts = []
    for seed, modes in zip(seeds, replays, strict=True):
        base, shared = modes.get("none"), modes.get("memory")
        if base is None or shared is None:
            continue
        held = _change(shared["gpu_hours_held"], base["gpu_hours_held"])
        wait = _change(shared["wait_mean_s"], base["wait_mean_s"])
        waited = _change(shared["gpu_hours_waited"], base["gpu_hours_waited"])
        parts.append(f"seed {seed} {held} / {wait} / {waited}")
    return f"{name}, GPU-hours held / mean wait / GPU-hours waited with sharing: " + ", ".join(
        parts
    )


def _row(name: str, seed: int, seeds: list[int]) -> str:
    """A row's name: the configuration's, and the seed's when the draws are not seed 1's
    alone (policy_quality's)."""
    return name if seeds == [1] else f"{name} seed {seed}"


def _ceiling(modes: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """What the ideal replay says of the goals: how far sharing could go at most."""
    base, ideal = modes.get("none"), modes.get(CEILING)
    if base is None or ideal is None:
        return None
    wait_limit = base["wait_mean_s"] * WAIT_AT_MOST
    return {
        "gpu_hours_held": ideal["gpu_hours_held"],
        "held_change": round(ideal["gpu_hours_held"] / base["gpu_hours_held"] - 1, 4),
        "wait_mean_s": ideal["wait_mean_s"],
        "wait_change": round(ideal["wait_mean_s"] / base["wait_mean_s"] - 1, 4)
        if base["wait_mean_s"]
        else None,
        "wait_goal_within_reach": ideal["wait_mean_s"] <= wait_limit,
    }


def _ceiling_line(ceiling: dict[str, Any]) -> str:
    held = f"{ceiling['held_change']:+.1%}"
    wait = "-" if ceiling["wait_change"] is None else f"{ceiling['wait_change']:+.1%}"
    verdict = (
        "the wait goal is within reach"
        if ceiling["wait_goal_within_reach"]
        else "the wait goal is out of reach of any pairing rule here"
    )
    return (
        f"  CEILING every pair admitted, nobody slowed: GPU-hours held {held}, mean wait "
        f"{wait} ({verdict})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated")
    parser.add_argument("--limit", type=int, default=None, help="only the first N jobs of each")
    parser.add_argument(
        "--share-reserve-gib", type=float, default=0.0, help="the policy's is 2; see above"
    )
    parser.add_argument("--share-max-jobs", type=int, default=None)
    parser.add_argument("--share-max-slowdown", type=float, default=None)
    parser.add_argument(
        "--ceiling", action="store_true", help="also replay --sharing ideal: the bound, see above"
    )
    parser.add_argument("--ceiling-max-jobs", type=int, default=CEILING_MAX_JOBS)
    parser.add_argument(
        "--seeds", default="1", help="comma-separated draw seeds; each is replayed, see above"
    )
    parser.add_argument(
        "--workers", type=int, default=min(4, os.cpu_count() or 1), help="parallel replays"
    )
    args = parser.parse_args(argv)
    configs = [name for name in args.configs.split(",") if name]
    unknown = [name for name in configs if name not in CONFIGS]
    if unknown:
        print(f"sharing: unknown configuration(s) {', '.join(unknown)}", file=sys.stderr)
        return 2
    for name in configs:
        path = CONFIGS[name].path
        if not path.is_file():
            print(f"sharing: trace not found: {path}", file=sys.stderr)
            return 2
        if not default_profiles(path).is_file():
            print(f"sharing: Lucid's profiles not found: {default_profiles(path)}", file=sys.stderr)
            return 2
    try:
        seeds = [int(seed) for seed in args.seeds.split(",") if seed.strip()]
    except ValueError:
        seeds = []
    if not seeds:
        print(f"sharing: --seeds wants whole numbers, as 1,2,3: {args.seeds!r}", file=sys.stderr)
        return 2
    if args.ceiling_max_jobs < 1:
        print("sharing: --ceiling-max-jobs must be at least 1", file=sys.stderr)
        return 2
    knobs = ShareKnobs(
        args.share_reserve_gib, args.share_max_jobs, args.share_max_slowdown, args.ceiling_max_jobs
    )
    modes = (*MODES, CEILING) if args.ceiling else MODES
    began = time.perf_counter()
    runs = [(name, seed, _row(name, seed, seeds)) for name in configs for seed in seeds]
    rows: dict[str, dict[str, dict[str, Any]]] = {row: {} for _, _, row in runs}
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures = {
            (row, mode): pool.submit(_run, name, mode, args.limit, knobs, seed)
            for name, seed, row in runs
            for mode in modes
        }
        for (row, mode), future in futures.items():
            figures = _figures(future.result())
            rows[row][mode] = figures
            print(f"… {row} {mode} {json.dumps(figures)}", file=sys.stderr, flush=True)
    print(_table(rows))
    goals = {name: _goals(replays) for name, replays in rows.items()}
    ceilings = {name: _ceiling(replays) for name, replays in rows.items()}
    for name, checks in goals.items():
        print()
        print(name)
        for g in checks.values():
            state = "MET   " if g["met"] else "MISSED"
            print(f"  {state} {g['goal']}: {g['value']} (limit {g['limit']})")
        ceiling = ceilings[name]
        if ceiling is not None:
            print(_ceiling_line(ceiling))
    if len(seeds) > 1:
        print()
        for name in configs:
            print(_by_seed(name, [rows[_row(name, seed, seeds)] for seed in seeds], seeds))
    record = {
        "bench": "sharing",
        "limit": args.limit,
        "draws": {"seeds": seeds, "core_share": 0.1, "not_ready_share": 0.3, "estimate_noise": 0.5},
        "share_knobs": {
            "reserve_gib": knobs.reserve_gib,
            "max_jobs": knobs.max_jobs,
            "max_slowdown": knobs.max_slowdown,
            "ceiling_max_jobs": knobs.ceiling_max_jobs if args.ceiling else None,
        },
        "rows": rows,
        "goals": goals,
        "ceiling": {name: c for name, c in ceilings.items() if c is not None} or None,
        "all_goals_met": all(g["met"] for checks in goals.values() for g in checks.values()),
        "wall_s": round(time.perf_counter() - began, 1),
    }
    print(json.dumps(record))
    return 0 if record["all_goals_met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
