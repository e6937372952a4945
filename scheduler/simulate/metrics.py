"""The summary of a replay, overall and per priority class (and per queue in per-VC runs).

Definitions
-----------
queue delay
    For policies that never hand GPUs to a job before its data is ready: first start −
    max(submit, data ready). For `fifo-hold` (the naive platform, where a job takes GPUs at
    once and holds them idle until its data is ready): the time from submit to the moment the
    job first holds GPUs. `wait_to_run` is the same for every policy: first real work −
    max(submit, data ready).
JCT
    end − submit.
makespan
    last end − first submit (per cluster; the longest in per-VC runs).
utilization
    GPU-seconds running real work ÷ (GPUs × makespan), summed over the clusters of a per-VC run.
    GPUs held idle waiting for data are not real work.
wait
    queue delay plus every later stretch a preempted job spent queued again: all the time a
    job could have run and did not. The policy goals are stated on it.
GPU-hours waited (`gpu_hours_waited`)
    each job's wait × the GPUs it asked for (a job asking for part of a card counts one): the
    demand left waiting. The mean wait counts a pod of one card and a job of a whole host
    alike; this weighs them by what they wait for, and tells a policy that serves many small
    jobs from one that serves big ones first.
lost GPU-hours
    held GPU time that produced nothing kept: a preempted job's work since its last
    checkpoint, its grace, and the restart time of each resume.
held idle waiting for data
    GPU-hours between taking GPUs and the data being ready (only `fifo-hold` has any).
costlier GPU-hours
    GPU-hours a job spent on a type whose price is above the cheapest adequate type present in
    its cluster; cost is every held GPU-hour at its type's catalog price.
scheduling pass
    wall time of `schedule()` alone (time.perf_counter), over the passes that were not skipped.
GPU-hours held (`gpu_hours_held`)
    the time cards were held: a shared card once while any job holds it, a whole-card job its
    GPUs × its time. `gpu_hours` sums each job's own held time (a shared card once per job).
waits
    mean wait per class of job: `shared` (it asks for part of one card, shared or not),
    `one_card`, `multi_card` (not core, one card or more than one) and `core` (every core job);
    `class_jobs` counts the jobs of each.
slowdowns
    over the jobs that ran on a shared card and ended: how much longer their runs took beside
    their neighbours (mean and p95; 0.1 is 10 %), how many ran on a shared card
    (`shared_jobs`) and how many of them beside another job (`with_neighbour`).
never fits
    jobs that ask more GPUs of their admitted types than the cluster has; they are not replayed
    and are left out of every delay figure. `never_started` jobs could fit but the policy never
    started them before the replay ran out of events.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from scheduler.policy.priority_classes import CLASS_RANK
from scheduler.policy.snapshot import HOUR
from scheduler.simulate.engine import JobRecord, RunResult


def percentile(ordered: Sequence[float], share: float) -> float:
    """Linear interpolation between closest ranks (as numpy's default) of sorted values."""
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * share
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def stats(values: Iterable[float | None]) -> dict[str, float | int | None]:
    """count, mean, median, p99 and max of the values that are not None."""
    ordered = sorted(value for value in values if value is not None)
    if not ordered:
        return {"count": 0, "mean": None, "median": None, "p99": None, "max": None}
    return {
        "count": len(ordered),
        "mean": round(statistics.fmean(ordered), 3),
        "median": round(statistics.median(ordered), 3),
        "p99": round(percentile(ordered, 0.99), 3),
        "max": round(ordered[-1], 3),
    }


def _job_figures(records: Sequence[JobRecord]) -> dict[str, Any]:
    return {
        "jobs": len(records),
        "finished": sum(1 for r in records if r.end is not None),
        "queue_delay_s": stats(r.queue_delay for r in records),
        "wait_s": stats(r.wait for r in records),
        "wait_to_run_s": stats(r.wait_to_run for r in records),
        "gpu_hours_waited": round(
            sum(wait * r.gpus for r in records if (wait := r.wait) is not None) / HOUR, 3
        ),
        "jct_s": stats(r.jct for r in records),
        "held_idle_gpu_hours": round(sum(r.held_idle_gpu_s for r in records) / HOUR, 3),
        "preempted_jobs": sum(1 for r in records if r.preemptions),
        "lost_gpu_hours": round(sum(r.lost_gpu_s for r in records) / HOUR, 3),
    }


WAIT_CLASSES = ("shared", "one_card", "multi_card", "core")


def _sharing_figures(records: Sequence[JobRecord]) -> dict[str, Any]:
    waits = {
        kind: stats(r.wait for r in records if r.kind == kind)["mean"] for kind in WAIT_CLASSES
    }
    slowdowns = sorted(s for r in records if (s := r.slowdown) is not None)
    return {
        "waits": waits,
        "class_jobs": {kind: sum(1 for r in records if r.kind == kind) for kind in WAIT_CLASSES},
        "slowdowns": {
            "mean": round(statistics.fmean(slowdowns), 4) if slowdowns else None,
            "p95": round(percentile(slowdowns, 0.95), 4) if slowdowns else None,
            "shared_jobs": sum(1 for r in records if r.shared),
            "with_neighbour": sum(1 for r in records if r.neighboured),
        },
    }


def summarize(results: Sequence[RunResult]) -> dict[str, Any]:
    """The JSON summary of one or more replays of the same policy (one per cluster)."""
    records = [record for result in results for record in result.records]
    capacity_s = sum(result.gpus * result.makespan for result in results)
    busy = sum(result.busy_gpu_s for result in results)
    calls = sum(result.calls for result in results)
    pass_total = sum(result.pass_total_s for result in results)
    summary: dict[str, Any] = {
        "policy": results[0].policy if results else None,
        "clusters": len(results),
        "gpus": sum(result.gpus for result in results),
        "nodes": sum(result.nodes for result in results),
        "never_fits": sum(result.never_fits for result in results),
        "never_started": sum(result.never_started for result in results),
        **_job_figures(records),
        "makespan_s": round(max((result.makespan for result in results), default=0.0), 3),
        "utilization": round(busy / capacity_s, 4) if capacity_s else 0.0,
        "gpu_hours": round(sum(r.held_gpu_s for r in records) / HOUR, 3),
        "gpu_hours_held": round(sum(result.held_card_gpu_s for result in results) / HOUR, 3),
        "busy_gpu_hours": round(busy / HOUR, 3),
        "costlier_gpu_hours": round(sum(r.costlier_gpu_s for r in records) / HOUR, 3),
        "cost": round(sum(r.cost for r in records), 3),
        "preemptions": sum(result.preemptions for result in results),
        "scheduling": {
            "calls": calls,
            "skipped": sum(result.skipped for result in results),
            "mean_s": round(pass_total / calls, 6) if calls else 0.0,
            "max_s": round(max((result.pass_max_s for result in results), default=0.0), 6),
            "total_s": round(pass_total, 3),
        },
        "wall_s": round(sum(result.wall_s for result in results), 3),
    }
    summary.update(_sharing_figures(records))
    classes = sorted({r.priority for r in records}, key=lambda name: CLASS_RANK.get(name, 9))
    summary["by_class"] = {
        name: _job_figures([r for r in records if r.priority == name]) for name in classes
    }
    if len(results) > 1:
        summary["by_queue"] = {
            result.label: {
                "gpus": result.gpus,
                "jobs": len(result.records),
                "never_fits": result.never_fits,
                "queue_delay_mean_s": stats(r.queue_delay for r in result.records)["mean"],
                "jct_mean_s": stats(r.jct for r in result.records)["mean"],
                "utilization": round(result.busy_gpu_s / (result.gpus * result.makespan), 4)
                if result.makespan
                else 0.0,
            }
            for result in results
        }
    return summary
