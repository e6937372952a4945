"""The ledger report: GPU-hours, cost and what they bought, by team, user, project, round or
GPU type over any period, and every job that used GPUs in it (costliest first, in pages)."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import union

from scheduler.collector import collector_paused
from scheduler.errors import Problem, UserError
from scheduler.service.context import Context
from scheduler.service.lookup import team_by_name
from storage.models import JobState
from storage.queries import accounting
from storage.queries import cluster as cluster_queries
from storage.queries import org as org_queries
from storage.queries.accounting import JobFacts, JobFilter


class Grouping(StrEnum):
    """What one row of the report is (`by=`); without by= a row is a team on one GPU type."""

    TEAM = "team"
    USER = "user"
    PROJECT = "project"
    ROUND = "round"
    TYPE = "type"
    ARRAY = "array"  # an array (count=, sweep=) a row, its jobs' metrics judged together


GROUPINGS = tuple(grouping.value for grouping in Grouping)
# The runs whose cost bought nothing: shown apart as "wasted".
WASTED_STATES = frozenset({JobState.FAILED, JobState.CANCELLED})
# Metrics that improve as they fall (loss, error rates, perplexity, latency…); every other
# metric improves as it rises (accuracy, BLEU, reward…).
_LOWER_IS_BETTER = re.compile(r"loss|err|perplexity|ppl|wer|cer|mae|mse|latency|time", re.I)


def lower_is_better(metric: str) -> bool:
    """Whether a smaller value of this metric is the better one (by its name)."""
    return bool(_LOWER_IS_BETTER.search(metric))


@dataclass(frozen=True)
class UsageRow:
    """One group's GPU-hours and cost in the period, and what they bought.

    `group` is the team (by team × type, the default, and by=team), the owner's user id,
    the project, the round ("project/round" unless one project was asked for) or the GPU
    type; `gpu_type` is set only by team × type and by type. "" stands for none (jobs with
    no project or round).
    """

    group: str
    gpu_type: str
    gpu_hours: float
    cost: float
    jobs: int  # runs: jobs that used GPUs in the period
    idle_gpu_hours: float = 0.0
    lost_gpu_hours: float = 0.0  # of gpu_hours, what preemptions threw away
    finished: int = 0  # runs that succeeded
    wasted: float = 0.0  # cost of the runs that failed or were cancelled
    metric: str | None = None  # the metric `best` is of
    best: float | None = None  # the best value of `metric` among the group's runs
    # The best's improvement on the previous round of the same project (by=round only).
    gain: float | None = None
    # Cost per point gained (by round), else cost per unit of the best value (only for
    # metrics that improve as they rise).
    cost_per_unit: float | None = None

    @property
    def team(self) -> str:
        """The group, under the name the team × type report always used."""
        return self.group

    @property
    def cost_per_finished(self) -> float | None:
        """The whole cost (wasted runs included) over the runs that succeeded."""
        return self.cost / self.finished if self.finished else None


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
    project: str | None = None
    round: str | None = None
    idle_gpu_hours: float = 0.0
    artefacts: tuple[tuple[str, str], ...] = ()  # (label, location) as reported
    lost_gpu_hours: float = 0.0  # of gpu_hours, what preemptions threw away

    @property
    def wasted(self) -> bool:
        """Whether the run failed or was cancelled: its cost bought nothing."""
        return self.state in WASTED_STATES


@dataclass(frozen=True)
class ReportAsk:
    """What a report was asked for, as given (so a page button or an export can ask again)."""

    by: str | None = None
    team: str | None = None
    user: str | None = None
    project: str | None = None
    round: str | None = None
    gpu_type: str | None = None
    metric: str | None = None
    days: int | None = None
    since: date | None = None
    until: date | None = None
    page: int = 1
    file: str | None = None


@dataclass(frozen=True)
class ReportResult:
    """The ledger between `start` and `end` (charges are split at the period's edges)."""

    start: datetime
    end: datetime
    team: str | None  # None: all teams
    rows: tuple[UsageRow, ...]  # by team then type by default; else by `ask.by`
    jobs: tuple[JobOutcome, ...]  # this page of the jobs, costliest first
    total_gpu_hours: float
    total_cost: float
    job_count: int = 0  # every job that used GPUs in the period; `jobs` lists one page
    total_idle_gpu_hours: float = 0.0
    total_wasted: float = 0.0
    finished: int = 0
    page: int = 1
    pages: int = 1
    ask: ReportAsk = field(default_factory=ReportAsk)
    # Every job, when the whole report was asked for (an export, or file=csv).
    all_jobs: tuple[JobOutcome, ...] = ()
    total_lost_gpu_hours: float = 0.0

    @property
    def by(self) -> str | None:
        """The grouping asked for; None: team × GPU type."""
        return self.ask.by


# How many jobs one page of the report lists; totals still count every job.
JOB_LIMIT = 20
DEFAULT_DAYS = 7


def period(
    ctx: Context, days: int | None, since: date | None, until: date | None = None
) -> tuple[datetime, datetime]:
    """The report's period: from the start of `since` (or `days` before its end, seven days
    when neither is given) to the end of `until` (or now), days in the install's time zone;
    never past now."""
    if days is not None and since is not None:
        raise UserError(Problem.REPORT_DAYS_AND_SINCE)
    zone = ctx.policy.zone
    end = ctx.now
    if until is not None:
        after = datetime.combine(until + timedelta(days=1), time.min, tzinfo=zone).astimezone(UTC)
        end = min(end, after)
    if since is None:
        return end - timedelta(days=days or DEFAULT_DAYS), end
    start = datetime.combine(since, time.min, tzinfo=zone).astimezone(UTC)
    if start >= ctx.now:
        today = ctx.now.astimezone(zone).date()
        raise UserError(
            Problem.REPORT_SINCE_FUTURE,
            since=str(since),
            today=str(today),
            example=str(today - timedelta(days=7)),
        )
    if until is not None and start >= end:
        raise UserError(Problem.REPORT_UNTIL_BEFORE_SINCE, since=str(since), until=str(until))
    return start, end


def report(
    ctx: Context,
    team: str | None,
    start: datetime,
    end: datetime,
    *,
    ask: ReportAsk | None = None,
    whole: bool = False,
) -> ReportResult:
    """GPU-hours, cost and outputs between `start` and `end`, by the grouping asked for,
    and per job (one page of them, or every one when `whole`).

    Everyone may see every team: it is a shared cluster, and the totals are what the
    queue rules are argued about. A ledger entry that crosses the period's edges counts
    for its share inside; allocations still open count up to now at their type's price,
    so a long run shows up before it ends.
    """
    ask = ask or ReportAsk(team=team)
    if end <= start:
        raise UserError(Problem.REPORT_EMPTY_PERIOD)
    with collector_paused():
        return _report(ctx, team, start, end, ask, whole)


def _report(
    ctx: Context, team: str | None, start: datetime, end: datetime, ask: ReportAsk, whole: bool
) -> ReportResult:
    found = team_by_name(ctx, team) if team is not None else None
    team_id = found.id if found else None
    # The filters on jobs and on the type are applied in SQL; `_Usage.wanted` checks again.
    kept = JobFilter(owner=ask.user, project=ask.project, round=ask.round, team_id=team_id)
    charges = accounting.charges_between(
        session=ctx.session, start=start, end=end, jobs=kept, gpu_type=ask.gpu_type
    )
    still_open = cluster_queries.open_charges_between(session=ctx.session, end=end, jobs=kept)
    period_jobs = union(
        accounting.charged_job_ids(start=start, end=end, jobs=kept),
        cluster_queries.open_job_ids(end=end, jobs=kept),
    )
    # Each job's facts once, however many charges it has.
    jobs = accounting.facts_of_jobs_in(session=ctx.session, job_ids=period_jobs)
    usage = _Usage(ask, period_jobs)
    for charge in charges:
        share = (
            _share(charge.started_at, charge.ended_at, start, end)
            if charge.started_at is not None and charge.ended_at is not None
            else 1.0
        )
        usage.add(
            charge.team_id,
            charge.gpu_type,
            jobs[charge.job_id],
            charge.gpu_hours * share,
            charge.cost * share,
            charge.idle_gpu_hours * share,
            charge.lost_gpu_hours * share,
        )
    until = min(end, ctx.now)
    for allocation in still_open:
        job = jobs[allocation.job_id]
        held = max(0.0, (until - max(start, allocation.started_at)).total_seconds() / 3600)
        hours = held * allocation.part  # a shared card's job: its part of the card
        spec = ctx.policy.gpu_type(allocation.gpu_type)
        price = spec.price_per_gpu_hour if spec else 0.0
        usage.add(job.team_id, allocation.gpu_type, job, hours, hours * price, 0.0)
    return usage.result(ctx, found.name if found else None, start, end, whole)


def _share(started: datetime, ended: datetime, start: datetime, end: datetime) -> float:
    """The part of [started, ended] inside [start, end); all of it for an instant inside."""
    length = (ended - started).total_seconds()
    if length <= 0:
        return 1.0
    inside = (min(ended, end) - max(started, start)).total_seconds()
    return max(0.0, min(1.0, inside / length))


@dataclass
class _Sums:
    hours: float = 0.0
    cost: float = 0.0
    idle: float = 0.0
    wasted: float = 0.0  # of cost, what runs that failed or were cancelled spent
    job_ids: set[int] = field(default_factory=set)
    lost: float = 0.0  # of hours, what preemptions threw away

    def add(self, job: JobFacts, hours: float, cost: float, idle: float, lost: float) -> None:
        self.hours += hours
        self.cost += cost
        self.idle += idle
        self.lost += lost
        if job.state in WASTED_STATES:
            self.wasted += cost
        self.job_ids.add(job.id)


@dataclass(slots=True)
class _JobSums:
    hours: float = 0.0
    cost: float = 0.0
    idle: float = 0.0
    lost: float = 0.0


class _Usage:
    """Sums by group and by job, as charges are added (those outside the filters are not)."""

    def __init__(self, ask: ReportAsk, period_jobs: Any) -> None:
        self.ask = ask
        self.period_jobs = period_jobs  # a subquery of the ids of the jobs charged
        self.team_names: dict[int, str] = {}
        self.cells: dict[tuple[object, str], _Sums] = defaultdict(_Sums)
        self.jobs: dict[int, JobFacts] = {}
        self.by_job: dict[int, _JobSums] = defaultdict(_JobSums)
        self.filtered = any(
            wanted is not None for wanted in (ask.user, ask.project, ask.round, ask.gpu_type)
        )

    def wanted(self, job: JobFacts, gpu_type: str) -> bool:
        ask = self.ask
        return (
            (ask.user is None or job.owner == ask.user)
            and (ask.project is None or job.project == ask.project)
            and (ask.round is None or job.round == ask.round)
            and (ask.gpu_type is None or gpu_type == ask.gpu_type)
        )

    def cell_of(self, team_id: int, gpu_type: str, job: JobFacts) -> tuple[object, str]:
        by = self.ask.by
        if by is None:
            return team_id, gpu_type
        if by == Grouping.TEAM:
            return team_id, ""
        if by == Grouping.USER:
            return job.owner, ""
        if by == Grouping.PROJECT:
            return job.project or "", ""
        if by == Grouping.ROUND:
            return (job.project or "", job.round or ""), ""
        if by == Grouping.ARRAY:
            return (f"#{job.array_id}" if job.array_id is not None else ""), ""
        return gpu_type, gpu_type

    def add(
        self,
        team_id: int,
        gpu_type: str,
        job: JobFacts,
        hours: float,
        cost: float,
        idle: float,
        lost: float = 0.0,
    ) -> None:
        if self.filtered and not self.wanted(job, gpu_type):
            return
        job_id = job.id
        self.cells[self.cell_of(team_id, gpu_type, job)].add(job, hours, cost, idle, lost)
        self.jobs[job_id] = job
        spent = self.by_job[job_id]
        spent.hours += hours
        spent.cost += cost
        spent.idle += idle
        spent.lost += lost

    def result(
        self, ctx: Context, team: str | None, start: datetime, end: datetime, whole: bool
    ) -> ReportResult:
        self.team_names = {
            t.id: t.name for t in org_queries.all_teams(session=ctx.session) if t.id is not None
        }

        def team_of(team_id: int) -> str:
            return self.team_names.get(team_id, f"team {team_id}")

        # The groups are judged by their runs' metrics (every metric, or only the one asked
        # for); a job's other outputs only the jobs listed need: this page, or every job when
        # the whole report is asked for. Outcomes are made only for the jobs listed.
        whole = whole or bool(self.ask.file)
        judged = self.ask.metric is not None or self.ask.by in (
            Grouping.PROJECT,
            Grouping.ROUND,
            Grouping.ARRAY,
        )
        judged = judged or self.ask.project is not None
        spent = self.by_job
        order = sorted(spent, key=lambda i: (-spent[i].cost, -spent[i].hours, i))
        ranked = [spent[i] for i in order]
        facts = [self.jobs[i] for i in order]
        metrics: dict[int, dict[str, float]] = {}
        if whole or judged:
            asked = None if whole else self.ask.metric
            # A job's row holds the latest value of every metric it reported (each report,
            # `/gpu done` too, is merged into it as it is stored): the reports themselves
            # are read only for jobs whose row holds none.
            bare = [job.id for job in facts if not job.holds_metrics]
            for job_id, name, value in (
                accounting.metric_values(session=ctx.session, job_ids=bare, name=asked)
                if bare
                else ()
            ):
                metrics.setdefault(job_id, {})[name] = float(value)
            for job in facts:
                _with_latest(metrics.setdefault(job.id, {}), job, asked)
        metric_of = (
            _metrics_chosen((job.project, metrics[job.id]) for job in facts) if metrics else {}
        )
        keyed = [
            (key, self.row(key, gpu_type, sums, metrics, metric_of))
            for (key, gpu_type), sums in self.cells.items()
        ]
        rows = _ordered(ctx, self.ask.by, keyed)
        if self.ask.by == Grouping.ROUND:
            rows = _with_gains(keyed, rows)
        pages = max(1, math.ceil(len(order) / JOB_LIMIT))
        page = self.ask.page
        if page > pages:
            raise UserError(Problem.REPORT_PAGE_PAST_END, page=page, pages=pages)
        if whole:
            listed = order
            artefacts = accounting.artefact_locations(session=ctx.session, job_ids=self.period_jobs)
        else:
            listed = order[(page - 1) * JOB_LIMIT : page * JOB_LIMIT]
            # The page's jobs show every metric they reported, not only the one judged by.
            metrics = {i: {} for i in listed}
            for job_id, name, value in accounting.metric_values(
                session=ctx.session, job_ids=listed
            ):
                metrics[job_id][name] = float(value)
            for i in listed:
                _with_latest(metrics[i], self.jobs[i], None)
            artefacts = accounting.artefact_locations(session=ctx.session, job_ids=listed)
        made: dict[int, dict[str, str]] = defaultdict(dict)
        for job_id, name, text in artefacts:
            if text:
                made[job_id][name] = text
        outcomes = [
            self.outcome(self.jobs[i], team_of(self.jobs[i].team_id), metrics[i], made[i])
            for i in listed
        ]
        return ReportResult(
            start=start,
            end=end,
            team=team,
            rows=tuple(rows),
            jobs=tuple(outcomes[(page - 1) * JOB_LIMIT : page * JOB_LIMIT] if whole else outcomes),
            total_gpu_hours=sum(s.hours for s in ranked),
            total_cost=sum(s.cost for s in ranked),
            job_count=len(order),
            total_idle_gpu_hours=sum(s.idle for s in ranked),
            total_wasted=sum(
                s.cost for s, job in zip(ranked, facts, strict=True) if job.state in WASTED_STATES
            ),
            finished=sum(1 for job in facts if job.state == JobState.SUCCEEDED),
            page=page,
            pages=pages,
            ask=self.ask,
            all_jobs=tuple(outcomes) if whole else (),
            total_lost_gpu_hours=sum(s.lost for s in ranked),
        )

    def outcome(
        self, job: JobFacts, team: str, metrics: dict[str, float], artefacts: dict[str, str]
    ) -> JobOutcome:
        spent = self.by_job[job.id]
        return JobOutcome(
            job_id=job.id,
            name=job.name,
            team=team,
            owner=job.owner,
            state=job.state,
            gpu_hours=spent.hours,
            cost=spent.cost,
            output=job.output,
            metrics=metrics,
            project=job.project,
            round=job.round,
            idle_gpu_hours=spent.idle,
            artefacts=tuple(sorted(artefacts.items())),
            lost_gpu_hours=spent.lost,
        )

    def row(
        self,
        key: object,
        gpu_type: str,
        sums: _Sums,
        metrics: Mapping[int, Mapping[str, float]],
        metric_of: dict[str, str | None],
    ) -> UsageRow:
        metric = self.ask.metric
        if metric is None and self.ask.by in (Grouping.PROJECT, Grouping.ROUND):
            project = key[0] if isinstance(key, tuple) else key
            metric = metric_of.get(str(project))
        elif metric is None and self.ask.project is not None:
            metric = metric_of.get(self.ask.project)
        elif metric is None and self.ask.by == Grouping.ARRAY and sums.job_ids:
            # An array's jobs are of one submit, so of one project: judged by its metric.
            first = min(sums.job_ids)
            metric = metric_of.get(self.jobs[first].project or "")
        best = _best(metric, (metrics.get(i, {}) for i in sums.job_ids)) if metric else None
        per_unit = None
        rising = metric is not None and not lower_is_better(metric)
        if rising and best is not None and best > 0 and self.ask.by != Grouping.ROUND:
            per_unit = sums.cost / best
        return UsageRow(
            group=self.label(key),
            gpu_type=gpu_type,
            gpu_hours=sums.hours,
            cost=sums.cost,
            jobs=len(sums.job_ids),
            idle_gpu_hours=sums.idle,
            lost_gpu_hours=sums.lost,
            finished=sum(1 for i in sums.job_ids if self.jobs[i].state == JobState.SUCCEEDED),
            wasted=sums.wasted,
            metric=metric if best is not None else None,
            best=best,
            cost_per_unit=per_unit,
        )

    def label(self, key: object) -> str:
        if self.ask.by in (None, Grouping.TEAM):
            return self.team_names.get(int(str(key)), f"team {key}")
        if isinstance(key, tuple):  # by round: the round, within its project unless one was asked
            project, round_ = key
            return str(round_) if self.ask.project is not None else f"{project}/{round_}"
        return str(key)


def _with_latest(metrics: dict[str, float], job: JobFacts, only: str | None) -> None:
    """A job's reported metrics (each report kept, the latest of each name counting) with
    the job's own latest metrics (`/gpu done`), which win over reports of the same name;
    only the metric `only`, when given."""
    if job.metrics_json is None:
        return
    latest = job.latest_metrics()
    if only is not None:
        if only in latest:
            metrics[only] = float(latest[only])
        return
    metrics.update(latest)
    for name, value in latest.items():
        if type(value) is not float:  # an integer as JSON wrote it
            metrics[name] = float(value)


def _metrics_chosen(
    reported: Iterable[tuple[str | None, Iterable[str]]],
) -> dict[str, str | None]:
    """Per project, the metric a report without metric= judges it by: the one most of its
    runs in the period report (ties: the first by name). `reported`: each run's project and
    the names of its metrics."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for project, names in reported:
        for name in names:
            counts[project or ""][name] += 1
    return {
        project: min(named, key=lambda name: (-named[name], name)) if named else None
        for project, named in counts.items()
    }


def _best(metric: str, runs: Iterable[Mapping[str, float]]) -> float | None:
    values = [found[metric] for found in runs if metric in found]
    if not values:
        return None
    return min(values) if lower_is_better(metric) else max(values)


def _natural(text: str) -> tuple[tuple[int, int | str], ...]:
    """Round names in their natural order: 2 before 10, v2 before v10."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part)
        for part in re.split(r"([0-9]+)", text)
        if part
    )


def _ordered(
    ctx: Context, by: str | None, keyed: Sequence[tuple[object, UsageRow]]
) -> list[UsageRow]:
    """Team × type and type rows by team and then by price of type; rounds by project, then
    in their natural order; every other grouping costliest first."""
    rank = {
        card.name: i
        for i, card in enumerate(sorted(ctx.policy.catalog(), key=lambda c: c.price_per_gpu_hour))
    }

    def by_type(row: UsageRow) -> tuple[int, str]:
        return rank.get(row.gpu_type, len(rank)), row.gpu_type

    if by is None:
        return sorted((row for _, row in keyed), key=lambda r: (r.group, *by_type(r)))
    if by == Grouping.TYPE:
        return sorted((row for _, row in keyed), key=by_type)
    if by == Grouping.ROUND:
        ordered = sorted(keyed, key=lambda kr: _round_order(kr[0]))
        return [row for _, row in ordered]
    return sorted((row for _, row in keyed), key=lambda r: (-r.cost, r.group))


def _round_order(key: object) -> tuple[str, tuple[tuple[int, int | str], ...]]:
    project, round_ = key if isinstance(key, tuple) else ("", "")
    return str(project), _natural(str(round_))


def _with_gains(keyed: Sequence[tuple[object, UsageRow]], rows: list[UsageRow]) -> list[UsageRow]:
    """Rounds of one project, in order: each round's best against the best of the round
    before it, and what each point gained cost (the round's whole cost over its gain)."""
    project_of = {id(row): _round_order(key)[0] for key, row in keyed}
    out: list[UsageRow] = []
    previous: UsageRow | None = None
    for row in rows:
        gain = per_point = None
        if (
            previous is not None
            and project_of[id(previous)] == project_of[id(row)]
            and row.metric is not None
            and row.metric == previous.metric
            and row.best is not None
            and previous.best is not None
        ):
            gain = (
                previous.best - row.best
                if lower_is_better(row.metric)
                else row.best - previous.best
            )
            per_point = row.cost / gain if gain > 0 else None
        out.append(replace(row, gain=gain, cost_per_unit=per_point))
        previous = row
    return out


def ask_of(args: Mapping[str, Any]) -> ReportAsk:
    """The parsed keys of `/gpu report` (or `paika report`) as what the report is asked for."""
    return ReportAsk(
        by=args.get("by"),
        team=args.get("team"),
        user=args.get("user"),
        project=args.get("project"),
        round=args.get("round"),
        gpu_type=args.get("type"),
        metric=args.get("metric"),
        days=args.get("days"),
        since=args.get("since"),
        until=args.get("until"),
        page=args.get("page") or 1,
        file=args.get("file"),
    )
