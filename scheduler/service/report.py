"""The ledger report: GPU-hours and cost by team and type over a period, and what each job produced."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from scheduler.errors import Problem, UserError
from scheduler.service.context import Context
from scheduler.service.lookup import team_by_name
from storage.models import Job
from storage.queries import accounting
from storage.queries import cluster as cluster_queries
from storage.queries import org as org_queries


@dataclass(frozen=True)
class UsageRow:
    """GPU-hours and cost of one team on one GPU type in the period."""

    team: str
    gpu_type: str
    gpu_hours: float
    cost: float
    jobs: int


@dataclass(frozen=True)
class JobOutcome:
    """One job that used GPUs in the period: its cost against what it produced."""

    job_id: int
    name: str
    team: str
    owner: str
    state: str
    gpu_hours: float
    cost: float
    output: str | None
    metrics: dict[str, float]


@dataclass(frozen=True)
class ReportResult:
    """The ledger between `start` and `end` (charges are split at the period's edges)."""

    start: datetime
    end: datetime
    team: str | None  # None: all teams
    rows: tuple[UsageRow, ...]  # by team, then by GPU type
    jobs: tuple[JobOutcome, ...]  # costliest first
    total_gpu_hours: float
    total_cost: float
    job_count: int = 0  # every job that used GPUs in the period; `jobs` lists the costliest


# How many jobs the report lists; totals still count every job.
JOB_LIMIT = 20
DEFAULT_DAYS = 7


def period(ctx: Context, days: int | None, since: date | None) -> tuple[datetime, datetime]:
    """The report's period ending now: the last `days` days, or from the start of `since`
    in the install's time zone; seven days when neither is given."""
    if days is not None and since is not None:
        raise UserError(Problem.REPORT_DAYS_AND_SINCE)
    if since is None:
        return ctx.now - timedelta(days=days or DEFAULT_DAYS), ctx.now
    start = datetime.combine(since, time.min, tzinfo=ctx.policy.zone).astimezone(UTC)
    if start >= ctx.now:
        today = ctx.now.astimezone(ctx.policy.zone).date()
        raise UserError(
            Problem.REPORT_SINCE_FUTURE,
            since=str(since),
            today=str(today),
            example=str(today - timedelta(days=7)),
        )
    return start, ctx.now


def report(ctx: Context, team: str | None, start: datetime, end: datetime) -> ReportResult:
    """GPU-hours and cost between `start` and `end`, by team and type, and per job.

    Everyone may see every team: it is a shared cluster, and the totals are what the
    queue rules are argued about. A ledger entry that crosses the period's edges counts
    for its share inside; allocations still open count up to now at their type's price,
    so a long run shows up before it ends.
    """
    if end <= start:
        raise UserError(Problem.REPORT_EMPTY_PERIOD)
    found = team_by_name(ctx, team) if team is not None else None
    team_id = found.id if found else None
    usage = _Usage()
    for entry, job in accounting.ledger_between(
        session=ctx.session, start=start, end=end, team_id=team_id
    ):
        share = _share(entry.started_at, entry.ended_at, start, end)
        usage.add(entry.team_id, entry.gpu_type, job, entry.gpu_hours * share, entry.cost * share)
    until = min(end, ctx.now)
    for allocation, gpu_type, job in cluster_queries.open_allocations_between(
        session=ctx.session, end=end, team_id=team_id
    ):
        hours = max(0.0, (until - max(start, allocation.started_at)).total_seconds() / 3600)
        spec = ctx.policy.gpu_type(gpu_type)
        price = spec.price_per_gpu_hour if spec else 0.0
        usage.add(job.team_id, gpu_type, job, hours, hours * price)
    return usage.result(ctx, found.name if found else None, start, end)


def _share(started: datetime, ended: datetime, start: datetime, end: datetime) -> float:
    """The part of [started, ended] inside [start, end); all of it for an instant inside."""
    length = (ended - started).total_seconds()
    if length <= 0:
        return 1.0
    inside = (min(ended, end) - max(started, start)).total_seconds()
    return max(0.0, min(1.0, inside / length))


class _Usage:
    """Sums by (team, type) and by job, as charges are added."""

    def __init__(self) -> None:
        self.cells: dict[tuple[int, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
        self.cell_jobs: dict[tuple[int, str], set[int]] = defaultdict(set)
        self.jobs: dict[int, Job] = {}
        self.by_job: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0])

    def add(self, team_id: int, gpu_type: str, job: Job, hours: float, cost: float) -> None:
        job_id = job.id or 0
        cell = self.cells[(team_id, gpu_type)]
        cell[0] += hours
        cell[1] += cost
        self.cell_jobs[(team_id, gpu_type)].add(job_id)
        self.jobs[job_id] = job
        spent = self.by_job[job_id]
        spent[0] += hours
        spent[1] += cost

    def result(
        self, ctx: Context, team: str | None, start: datetime, end: datetime
    ) -> ReportResult:
        names = {t.id: t.name for t in org_queries.all_teams(session=ctx.session)}
        rank = {
            card.name: i
            for i, card in enumerate(
                sorted(ctx.policy.catalog(), key=lambda card: card.price_per_gpu_hour)
            )
        }

        def team_of(team_id: int) -> str:
            return names.get(team_id, f"team {team_id}")

        rows = sorted(
            (
                UsageRow(team_of(tid), gpu_type, hours, cost, len(self.cell_jobs[(tid, gpu_type)]))
                for (tid, gpu_type), (hours, cost) in self.cells.items()
            ),
            key=lambda row: (row.team, rank.get(row.gpu_type, len(rank)), row.gpu_type),
        )
        outcomes = sorted(
            (
                JobOutcome(
                    job_id=job_id,
                    name=job.name,
                    team=team_of(job.team_id),
                    owner=job.owner,
                    state=job.state,
                    gpu_hours=self.by_job[job_id][0],
                    cost=self.by_job[job_id][1],
                    output=job.output,
                    metrics={k: float(v) for k, v in (job.metrics or {}).items()},
                )
                for job_id, job in self.jobs.items()
            ),
            key=lambda o: (-o.cost, -o.gpu_hours, o.job_id),
        )
        return ReportResult(
            start=start,
            end=end,
            team=team,
            rows=tuple(rows),
            jobs=tuple(outcomes[:JOB_LIMIT]),
            total_gpu_hours=sum(row.gpu_hours for row in rows),
            total_cost=sum(row.cost for row in rows),
            job_count=len(outcomes),
        )
