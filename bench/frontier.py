"""The policy's trade between the mean wait and the longest, measured: the frontier.

Replays one of policy_quality.py's configurations (`--config`, philly-40k by default) with
policy_quality's draws, once per setting of the two ordering knobs that set the trade —
`aging_drains` (`--aging`, how fast a waiting job gains rank, in drain times of the queue)
and `starve_after_drains` (`--starve`, the starvation backstop) — and once per baseline
(`--baselines`: fifo, easy, slurm, sjf the oracle, sjf-est: shortest first on the same noisy
estimates paika sees). Prints each point's mean and longest wait (also as multiples of SJF's
mean and EASY's longest), core and normal jobs' mean waits and the replay's CPU time, marks
the settings on the frontier (no other setting is better on both; the baselines are points
beside it), and names the lowest mean
within a longest wait of `--bound` × EASY's (1.5): the point a default should sit at, and how
far the current default (0.25 / 6) is from it. `--png FILE` draws the points, the
frontier and the baselines. `--preemptible 0.1,0.3,0.6` adds the default replayed with that
share of the jobs checkpointing and resuming (policy_quality's checkpoint every 30 min and
5 min restart; labels `pre 10%` …): how far opt-in preemption moves the frontier itself.

`--choose FILE …` replays nothing: it reads the JSON lines earlier runs printed (one file per
configuration, each with its EASY row) and prints the setting the rule picks for every
cluster (scheduler/simulate/frontier.py `across`: of the settings within the bound on every
configuration, the least worst excess over each one's lowest mean within it).

Usage (from the repository root):
    .venv/bin/python bench/frontier.py [--config philly-40k] [--limit N]
        [--aging 0.25,0.5,1,2,4] [--starve 1.5,2.5,3.5,6] [--baselines fifo,easy,slurm,sjf,sjf-est]
        [--bound 1.5] [--preemptible 0.1,0.3,0.6] [--workers N] [--png frontier.png]
    .venv/bin/python bench/frontier.py --choose philly-40k.json philly-66.json [--bound 1.5]
Prints one table, then ONE JSON line with every figure. The same seed gives the same points.
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

from scheduler.policy.snapshot import Knobs
from scheduler.simulate.draw import DrawConfig
from scheduler.simulate.frontier import Point, across, best_within, frontier
from scheduler.simulate.policies import PolicySetup, policy_setup
from scheduler.simulate.run import simulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
import policy_quality  # noqa: E402  (the configurations and draws it defines, shared here)

# The policy's own aging_drains / starve_after_drains.
DEFAULT = (Knobs().aging_drains or 0.0, Knobs().starve_after_drains or 0.0)
BASELINES = ("fifo", "easy", "slurm", "sjf", "sjf-est")


PREEMPTIBLE = "pre "  # a label's start: the default with that share of jobs preemptible


def _preemptible_label(share: float) -> str:
    return f"{PREEMPTIBLE}{share:.0%}"


def _draws(label: str) -> DrawConfig:
    if not label.startswith(PREEMPTIBLE):
        return policy_quality.DRAWS
    share = float(label.removeprefix(PREEMPTIBLE).rstrip("%")) / 100
    return replace(policy_quality.PREEMPTIBLE, preemptible_share=share)


def _setup(label: str) -> PolicySetup:
    """A baseline by name, or paika at "aging/starve" (the default for a `pre N%` label)."""
    if label.startswith(PREEMPTIBLE):
        return policy_setup("paika")
    if label == "sjf-est":
        return replace(policy_setup("sjf"), name="sjf-est", oracle_estimates=False)
    if label in BASELINES:
        return policy_setup(label)
    aging, starve = (float(part) for part in label.split("/"))
    paika = policy_setup("paika")
    knobs = replace(paika.knobs, aging_drains=aging, starve_after_drains=starve)
    return replace(paika, knobs=knobs)


def _run(config: str, label: str, limit: int | None) -> dict[str, Any]:
    cpu = time.process_time()
    trace = policy_quality._trace(policy_quality.CONFIGS[config], limit)
    summary = simulate(trace, _setup(label), _draws(label))
    classes = summary["by_class"]

    def class_mean(name: str) -> float | None:
        value = classes.get(name, {}).get("wait_s", {}).get("mean")
        return None if value is None else round(float(value), 1)

    return {
        "label": label,
        "jobs": summary["jobs"],
        "mean_s": round(summary["wait_s"]["mean"], 1),
        "longest_s": round(summary["wait_s"]["max"], 1),
        "core_s": class_mean("core"),
        "normal_s": class_mean("normal"),
        "cpu_s": round(time.process_time() - cpu, 1),
    }


def _floats(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part]


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _ratio(value: float, reference: float | None) -> str:
    return "-" if not reference else f"{value / reference:.2f}×"


def _table(rows: list[dict[str, Any]], sjf: float | None, easy: float | None) -> str:
    head = (
        f"{'point':<14}{'mean':>10}{'÷ SJF':>8}{'longest':>12}{'÷ EASY':>8}{'core':>9}"
        f"{'normal':>10}{'frontier':>10}{'cpu s':>8}"
    )
    lines = ["waits in seconds, from when a job could run", head]
    for row in rows:
        lines.append(
            f"{row['label']:<14}{_num(row['mean_s']):>10}{_ratio(row['mean_s'], sjf):>8}"
            f"{_num(row['longest_s']):>12}{_ratio(row['longest_s'], easy):>8}"
            f"{_num(row['core_s']):>9}{_num(row['normal_s']):>10}"
            f"{'yes' if row['on_frontier'] else '':>10}{row['cpu_s']:>8.1f}"
        )
    return "\n".join(lines)


def _is_setting(label: str) -> bool:
    """A point of the knobs' own (not a baseline, nor the default with preemptible jobs)."""
    return label not in BASELINES and not label.startswith(PREEMPTIBLE)


def _hours(rows: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """The rows' longest and mean waits in hours: a plot's x and y."""
    return [r["longest_s"] / 3600 for r in rows], [r["mean_s"] / 3600 for r in rows]


def _draw(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 7), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    knobs = [r for r in rows if _is_setting(r["label"])]
    moved = [r for r in rows if r["label"].startswith(PREEMPTIBLE)]
    bases = [r for r in rows if r["label"] in BASELINES]
    edge = sorted((r for r in rows if r["on_frontier"]), key=lambda r: r["longest_s"])
    axes.scatter(*_hours(knobs), color="#1f77b4", label="paika (aging / backstop, in drain times)")
    axes.plot(*_hours(edge), color="#1f77b4", linestyle="--", label="frontier")
    axes.scatter(*_hours(bases), color="#d62728", marker="s", label="baselines")
    if moved:
        axes.scatter(
            *_hours(moved), color="#2ca02c", marker="^", label="default, with preemptible jobs"
        )
    for r in rows:
        axes.annotate(
            r["label"],
            (r["longest_s"] / 3600, r["mean_s"] / 3600),
            textcoords="offset points",
            xytext=(5, 4),
            fontsize=9,
        )
    means = [r["mean_s"] for r in rows if r["mean_s"] > 0]
    if means and max(means) > 20 * min(means):
        axes.set_yscale("log")  # FIFO's and EASY's means would flatten the policy's points
    axes.set_xlabel("longest wait (h)")
    axes.set_ylabel("mean wait (h)")
    axes.set_title(title)
    axes.grid(color="#e0e0e0")
    axes.legend(loc="upper right")
    figure.savefig(path, format="png")


def _record(path: Path) -> dict[str, Any]:
    """The JSON line a run printed (its last line that reads as the frontier's record)."""
    for line in reversed(path.read_text(encoding="utf-8").splitlines()):
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("bench") == "frontier":
                return dict(record)
    raise ValueError(f"{path}: no frontier record (the JSON line bench/frontier.py prints)")


def _choose(paths: list[Path], bound: float) -> int:
    configurations: dict[str, list[Point]] = {}
    bounds: dict[str, float] = {}
    for path in paths:
        try:
            record = _record(path)
        except (OSError, ValueError) as exc:
            print(f"frontier: {exc}", file=sys.stderr)
            return 2
        rows = {row["label"]: row for row in record["rows"]}
        if "easy" not in rows:
            print(f"frontier: {path}: no EASY row to bound the longest wait", file=sys.stderr)
            return 2
        name = record["config"]
        bounds[name] = bound * rows["easy"]["longest_s"]
        configurations[name] = [
            Point(label, row["mean_s"], row["longest_s"])
            for label, row in rows.items()
            if _is_setting(label)
        ]
    chosen = across(configurations, bounds)
    if chosen is None:
        print(f"no setting replayed on every configuration is within {bound:g} × EASY's on each")
    else:
        for name in configurations:
            print(
                f"{name}: lowest mean within the bound {chosen.best[name]}; "
                f"{chosen.label} is {chosen.excess[name]:+.1%} from it"
            )
        print(f"one setting for every cluster: {chosen.label} (at most {chosen.worst:+.1%})")
    record = {
        "bench": "frontier-choice",
        "bound": bound,
        "configs": sorted(configurations),
        "chosen": chosen.label if chosen else None,
        "excess": chosen.excess if chosen else None,
        "best": chosen.best if chosen else None,
    }
    print(json.dumps(record))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--config", default="philly-40k")
    parser.add_argument("--limit", type=int, default=None, help="only the first N jobs")
    parser.add_argument("--aging", default="0.25,0.5,1,2,4", help="aging_drains values")
    parser.add_argument("--starve", default="1.5,2.5,3.5,6", help="starve_after_drains values")
    parser.add_argument("--baselines", default=",".join(BASELINES))
    parser.add_argument("--bound", type=float, default=1.5, help="longest wait ÷ EASY's, at most")
    parser.add_argument(
        "--workers", type=int, default=min(4, os.cpu_count() or 1), help="parallel replays"
    )
    parser.add_argument("--png", type=Path, default=None, help="draw the points there")
    parser.add_argument(
        "--preemptible", default="", help="shares of preemptible jobs to replay the default with"
    )
    parser.add_argument(
        "--choose", type=Path, nargs="+", default=None, help="earlier runs' JSON lines"
    )
    args = parser.parse_args(argv)
    if args.choose:
        return _choose(args.choose, args.bound)
    config = policy_quality.CONFIGS.get(args.config)
    if config is None:
        print(f"frontier: unknown configuration {args.config}", file=sys.stderr)
        return 2
    if not config.path.is_file():
        print(f"frontier: trace not found: {config.path}", file=sys.stderr)
        return 2
    baselines = [name for name in args.baselines.split(",") if name]
    unknown = [name for name in baselines if name not in BASELINES]
    if unknown:
        print(f"frontier: unknown baseline(s) {', '.join(unknown)}", file=sys.stderr)
        return 2
    settings = [(a, s) for a in _floats(args.aging) for s in _floats(args.starve)]
    if DEFAULT not in settings:
        settings.append(DEFAULT)
    moved = [_preemptible_label(share) for share in _floats(args.preemptible)]
    labels = [f"{a:g}/{s:g}" for a, s in settings] + baselines + moved
    began = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures = [pool.submit(_run, args.config, label, args.limit) for label in labels]
        rows = []
        for future in futures:
            rows.append(future.result())
            print(f"… {json.dumps(rows[-1])}", file=sys.stderr, flush=True)
    points = [Point(r["label"], r["mean_s"], r["longest_s"]) for r in rows]
    knob_points = [p for p in points if _is_setting(p.label)]
    # The policy's frontier: its knob settings; the baselines are points beside it.
    edge = {p.label for p in frontier(knob_points)}
    for row in rows:
        row["on_frontier"] = row["label"] in edge
    by_label = {r["label"]: r for r in rows}
    sjf = by_label.get("sjf", {}).get("mean_s")
    easy = by_label.get("easy", {}).get("longest_s")
    print(_table(rows, sjf, easy))
    bound = args.bound * easy if easy else None
    best = best_within(knob_points, bound) if bound is not None else None
    default = by_label[f"{DEFAULT[0]:g}/{DEFAULT[1]:g}"]
    if best is not None:
        gap = default["mean_s"] / best.mean_s - 1
        within = default["longest_s"] <= (bound or 0)
        print(
            f"lowest mean within a longest wait of {args.bound:g} × EASY's: {best.label} "
            f"({best.mean_s:,.0f} s); the default {default['label']} is {gap:+.1%} from it"
            f"{'' if within else ', and past the bound'}"
        )
    if args.png is not None:
        _draw(rows, args.png, f"{args.config}: mean against longest wait")
    record = {
        "bench": "frontier",
        "config": args.config,
        "limit": args.limit,
        "bound": args.bound,
        "rows": rows,
        "frontier": sorted(edge),
        "best_within_bound": best.label if best is not None else None,
        "wall_s": round(time.perf_counter() - began, 1),
    }
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
