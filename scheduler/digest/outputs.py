"""Yesterday's spend linked to what it produced: the runs that finished (by outcome, with
their GPU-hours and cost) and, per project, the day's GPU-hours, cost, runs finished and
the best value of each metric reported.

The day's GPU-hours are counted as `/gpu report` counts them (a charge crossing the day's
edges counts for its share inside; a run still open counts up to now at its type's price),
so the projects' figures add up to the digest's total for the day.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from numbers import Real

from scheduler.digest.model import BestMetric, FinishedRuns, ProjectLine
from scheduler.service.context import Context
from storage.models import Job, JobState
from storage.queries import accounting
from storage.queries import cluster as cluster_queries
from storage.queries import digest as digest_queries

FINISHED = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
# Metrics where less is better, by the words their names are made of (loss, val_loss,
# error_rate, wer, ppl …); any other metric's best is its largest value.
_LOWER_IS_BETTER = re.compile(
    r"(^|[^a-z])(loss|err|error|errors|wer|cer|ppl|perplexity|latency|mse|mae|rmse|fid)([^a-z]|$)"
)


def lower_is_better(name: str) -> bool:
    """Whether a metric's best value is its smallest."""
    return bool(_LOWER_IS_BETTER.search(name.lower()))


def day_outputs(
    ctx: Context, start: datetime, end: datetime
) -> tuple[tuple[FinishedRuns, ...], tuple[ProjectLine, ...]]:
    """Runs finished in [start, end) by outcome, and every project's line for that span."""
    session = ctx.session
    project_of: dict[int, str | None] = {}
    spent: dict[str | None, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for entry, job in accounting.ledger_between(session=session, start=start, end=end):
        share = _inside(entry.started_at, entry.ended_at, start, end)
        project_of[job.id or 0] = job.project
        _add(spent[job.project], entry.gpu_hours * share, entry.cost * share)
    until = min(end, ctx.now)
    for allocation, gpu_type, job in cluster_queries.open_allocations_between(
        session=session, end=end
    ):
        hours = max(0.0, (until - max(start, allocation.started_at)).total_seconds() / 3600)
        spec = ctx.policy.gpu_type(gpu_type)
        project_of[job.id or 0] = job.project
        _add(spent[job.project], hours, hours * (spec.price_per_gpu_hour if spec else 0.0))
    ended = digest_queries.jobs_ended_between(
        session=session, start=start, end=end, states=FINISHED
    )
    whole = digest_queries.spend_by_job(session=session, job_ids=[job.id or 0 for job in ended])
    finished_in: dict[str | None, int] = defaultdict(int)
    for job in ended:
        project_of[job.id or 0] = job.project
        finished_in[job.project] += 1
    reported = list(
        digest_queries.metric_outputs(
            session=session, start=start, end=end, job_ids=[job.id or 0 for job in ended]
        )
    )
    # The latest values a job holds (`/gpu done metric=…`) count as reported when it ended.
    for job in ended:
        reported += [
            (job.id or 0, name, float(value))
            for name, value in (job.metrics or {}).items()
            if isinstance(value, Real) and not isinstance(value, bool)
        ]
    unknown = {job_id for job_id, _, _ in reported} - set(project_of)
    for job_id, job in digest_queries.jobs_by_id(session=session, job_ids=unknown).items():
        project_of[job_id] = job.project
    best = _best(reported, project_of)
    projects = set(spent) | set(finished_in) | set(best)
    lines = sorted(
        (
            ProjectLine(
                project,
                spent[project][0] if project in spent else 0.0,
                spent[project][1] if project in spent else 0.0,
                finished_in.get(project, 0),
                tuple(sorted(best.get(project, {}).values(), key=lambda m: m.name)),
            )
            for project in projects
        ),
        key=lambda line: (-line.gpu_hours, line.project is None, line.project or ""),
    )
    return _by_outcome(ended, whole), tuple(lines)


def _by_outcome(
    ended: Iterable[Job], whole: Mapping[int, tuple[float, float]]
) -> tuple[FinishedRuns, ...]:
    runs: dict[str, int] = defaultdict(int)
    spent: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for job in ended:
        runs[job.state] += 1
        _add(spent[job.state], *whole.get(job.id or 0, (0.0, 0.0)))
    return tuple(
        FinishedRuns(state.value, runs[state], *spent[state]) for state in FINISHED if runs[state]
    )


def _best(
    reported: Iterable[tuple[int, str, float]], project_of: Mapping[int, str | None]
) -> dict[str | None, dict[str, BestMetric]]:
    """Each project's best value of each metric; on a tie, the first job to reach it."""
    best: dict[str | None, dict[str, BestMetric]] = defaultdict(dict)
    for job_id, name, value in sorted(reported, key=lambda r: r[0]):
        lower = lower_is_better(name)
        known = best[project_of.get(job_id)].get(name)
        if known is None or (value < known.value if lower else value > known.value):
            best[project_of.get(job_id)][name] = BestMetric(name, value, job_id, lower)
    return best


def _add(cell: list[float], hours: float, cost: float) -> None:
    cell[0] += hours
    cell[1] += cost


def _inside(started: datetime, ended: datetime, start: datetime, end: datetime) -> float:
    """The part of [started, ended] inside [start, end), as `/gpu report` splits a charge."""
    length = (ended - started).total_seconds()
    if length <= 0:
        return 1.0
    inside = (min(ended, end) - max(start, started)).total_seconds()
    return max(0.0, min(1.0, inside / length))
