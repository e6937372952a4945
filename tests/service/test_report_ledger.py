"""`/gpu report` over a generated month of work, every figure of every grouping checked
against sums worked out here from the rows the test made (not by the code under test),
on every backend; the pages, and the CSV and JSON exports read back."""

from __future__ import annotations

import csv
import io
import json
import random
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from sqlmodel import Session, select

from bot.report_export import export_report, report_csv, report_json
from scheduler.app import Paika, Reply
from scheduler.service.report import JOB_LIMIT, ReportResult
from storage.models import Allocation, Gpu, Host, Job, JobOutput, JobState, LedgerEntry, Team

PRICES = {"T4-16GB": 0.35, "A100-80GB": 2.20, "H100-80GB": 4.50}
TEAMS = {"UALICE": "vision", "UBOB": "vision", "UNICK": "nlp", "UCAROL": "speech"}
# (project, its rounds, the metric all its runs report, one only some report)
PROJECTS = [
    ("llm-pretrain", ["1", "2", "3", "10"], "top1", "loss"),
    ("asr", ["v1", "v2"], "wer", None),
    (None, [None], None, None),
]
STATES = [
    JobState.SUCCEEDED,
    JobState.SUCCEEDED,
    JobState.SUCCEEDED,
    JobState.FAILED,
    JobState.CANCELLED,
    JobState.RUNNING,
]
DAYS = 30
APPROX = {"rel": 1e-9, "abs": 1e-9}


def gpu(paika: Paika, text: str, user: str = "UBOB") -> Reply:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply


def report_of(paika: Paika, text: str) -> ReportResult:
    result = gpu(paika, text).result
    assert isinstance(result, ReportResult)
    return result


@dataclass
class Made:
    """One generated job and what the test expects of it in the period."""

    id: int
    team: str
    owner: str
    project: str | None
    round: str | None
    state: str
    values: dict[str, float]  # the latest value of each metric it reported
    artefacts: dict[str, str] = field(default_factory=dict)
    hours: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # by type
    cost: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    idle: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    lost: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    @property
    def total_cost(self) -> float:
        return sum(self.cost.values())


def _inside(started: datetime, ended: datetime, start: datetime, end: datetime) -> float:
    length = (ended - started).total_seconds()
    if length <= 0:
        return 1.0 if start <= started < end else 0.0
    return max(0.0, (min(ended, end) - max(started, start)).total_seconds()) / length


@pytest.fixture
def month(paika: Paika) -> tuple[Paika, dict[int, Made]]:
    """40 days of work by four people in three teams: two projects with rounds and jobs of
    none, on three GPU types; failures and cancels, open allocations (some begun before the
    period), ledger entries crossing both edges of the last 30 days."""
    for team in sorted(set(TEAMS.values())):
        paika.run(f"admin team add {team}", "UADMIN")  # some come with the install
    for user, team in TEAMS.items():
        gpu(paika, f"admin member add <@{user}> team={team}", "UADMIN")
    rng = random.Random(15)
    now = paika.clock.now()
    start = now - timedelta(days=DAYS)
    made: dict[int, Made] = {}
    with Session(paika.engine) as session:
        team_ids = {t.name: t.id or 0 for t in session.exec(select(Team)).all()}
        host = Host(name="gpu-01", url="https://gpu-01:8470", state="up", added_at=now)
        session.add(host)
        session.flush()
        for i in range(48):
            owner = rng.choice(sorted(TEAMS))
            project, rounds, metric, extra = rng.choice(PROJECTS)
            state = rng.choice(STATES)
            job = Job(
                name=f"run-{i}",
                owner=owner,
                team_id=team_ids[TEAMS[owner]],
                est_gpu_hours=10,
                command="python train.py",
                state=state,
                project=project,
                round=rng.choice(rounds),
                submitted_at=now - timedelta(days=40),
            )
            values: dict[str, float] = {}
            if metric is not None and state != JobState.CANCELLED:
                values[metric] = round(rng.uniform(0.1, 0.9), 3)
                if extra is not None and rng.random() < 0.4:
                    values[extra] = round(rng.uniform(1.0, 3.0), 3)
            # Half report through /gpu done (jobs.metrics), half as the job's output rows.
            if values and i % 2 == 0:
                job.metrics = dict(values)
            if i % 5 == 0:
                job.output = f"s3://ckpt/run-{i}"
            session.add(job)
            session.flush()
            job_id = job.id or 0
            mine = Made(job_id, TEAMS[owner], owner, project, job.round, state, values)
            if values and i % 2 == 1:
                for name, value in values.items():
                    # An earlier, different report of the same metric: the latest counts.
                    for at, seen in ((now - timedelta(days=3), value + 0.05), (now, value)):
                        session.add(
                            JobOutput(
                                job_id=job_id,
                                attempt=1,
                                at=at,
                                source="job",
                                kind="metric",
                                name=name,
                                value=seen,
                            )
                        )
            if i % 7 == 0:  # an artefact reported twice: the later location counts
                for at, where in ((now - timedelta(days=2), "old"), (now, "final")):
                    session.add(
                        JobOutput(
                            job_id=job_id,
                            attempt=1,
                            at=at,
                            source="file",
                            kind="artefact",
                            name="checkpoint",
                            text=f"s3://ckpt/{i}/{where}",
                        )
                    )
                mine.artefacts["checkpoint"] = f"s3://ckpt/{i}/final"
            for _ in range(rng.randint(1, 3)):
                gpu_type = rng.choice(sorted(PRICES))
                began = now - timedelta(days=40) + timedelta(hours=rng.randint(0, 40 * 24 - 2))
                ended = min(now, began + timedelta(hours=rng.randint(1, 72)))
                gpus = rng.choice([1, 2, 4])
                hours = (ended - began).total_seconds() / 3600 * gpus
                idle = round(hours * rng.choice([0.0, 0.1, 0.5]), 6)
                lost = round(hours * rng.choice([0.0, 0.0, 0.25]), 6)  # a preempted stretch
                session.add(
                    LedgerEntry(
                        job_id=job_id,
                        team_id=job.team_id,
                        gpu_type=gpu_type,
                        gpu_hours=hours,
                        idle_gpu_hours=idle,
                        lost_gpu_hours=lost,
                        cost=hours * PRICES[gpu_type],
                        started_at=began,
                        ended_at=ended,
                        recorded_at=ended,
                    )
                )
                share = _inside(began, ended, start, now)
                if share > 0:
                    mine.hours[gpu_type] += hours * share
                    mine.cost[gpu_type] += hours * PRICES[gpu_type] * share
                    mine.idle[gpu_type] += idle * share
                    mine.lost[gpu_type] += lost * share
            if state == JobState.RUNNING:
                gpu_type = rng.choice(sorted(PRICES))
                card = Gpu(host_id=host.id or 0, index=i, gpu_type=gpu_type, memory_gib=80)
                session.add(card)
                session.flush()
                since = now - timedelta(hours=rng.choice([2, 30, 24 * 35]))  # some before the start
                session.add(
                    Allocation(
                        job_id=job_id, gpu_id=card.id or 0, active_gpu_id=card.id, started_at=since
                    )
                )
                hours = (now - max(since, start)).total_seconds() / 3600
                mine.hours[gpu_type] += hours
                mine.cost[gpu_type] += hours * PRICES[gpu_type]
            if mine.hours:
                made[job_id] = mine
        session.commit()
    return paika, made


LOWER_IS_BETTER = {"loss", "wer"}
GROUP_OF: dict[str | None, Callable[[Made, str], object]] = {
    None: lambda job, gpu_type: (job.team, gpu_type),
    "team": lambda job, gpu_type: job.team,
    "user": lambda job, gpu_type: job.owner,
    "project": lambda job, gpu_type: job.project or "",
    "round": lambda job, gpu_type: f"{job.project or ''}/{job.round or ''}",
    "type": lambda job, gpu_type: gpu_type,
}


@dataclass
class Expected:
    runs: set[int] = field(default_factory=set)
    finished: set[int] = field(default_factory=set)
    hours: float = 0.0
    cost: float = 0.0
    idle: float = 0.0
    lost: float = 0.0
    wasted: float = 0.0


def expected(made: Iterable[Made], by: str | None) -> dict[object, Expected]:
    """Each group's sums, from the rows the test made."""
    groups: dict[object, Expected] = defaultdict(Expected)
    for job in made:
        for gpu_type, hours in job.hours.items():
            group = groups[GROUP_OF[by](job, gpu_type)]
            group.runs.add(job.id)
            if job.state == JobState.SUCCEEDED:
                group.finished.add(job.id)
            group.hours += hours
            group.cost += job.cost[gpu_type]
            group.idle += job.idle[gpu_type]
            group.lost += job.lost[gpu_type]
            if job.state in (JobState.FAILED, JobState.CANCELLED):
                group.wasted += job.cost[gpu_type]
    return groups


def best(jobs: Iterable[Made], metric: str) -> float | None:
    values = [job.values[metric] for job in jobs if metric in job.values]
    if not values:
        return None
    return min(values) if metric in LOWER_IS_BETTER else max(values)


def chosen_metric(made: Iterable[Made], project: str | None) -> str | None:
    """The metric most of a project's runs report (ties: the first by name)."""
    counts: dict[str, int] = defaultdict(int)
    for job in made:
        if (job.project or "") == (project or ""):
            for name in job.values:
                counts[name] += 1
    return min(counts, key=lambda name: (-counts[name], name)) if counts else None


def key_of(by: str | None, row: object) -> object:
    group, gpu_type = row.group, row.gpu_type  # type: ignore[attr-defined]
    return (group, gpu_type) if by is None else group


@pytest.mark.parametrize("by", [None, "team", "user", "project", "round", "type"])
def test_every_figure_of_every_grouping_adds_up(
    month: tuple[Paika, dict[int, Made]], by: str | None
) -> None:
    paika, made = month
    result = report_of(paika, f"report days={DAYS}" + (f" by={by}" if by else ""))
    groups = expected(made.values(), by)
    rows = {key_of(by, row): row for row in result.rows}
    assert set(rows) == set(groups) and len(result.rows) == len(groups)
    for key, want in groups.items():
        row = rows[key]
        assert row.jobs == len(want.runs), key
        assert row.finished == len(want.finished), key
        assert row.gpu_hours == pytest.approx(want.hours, **APPROX), key
        assert row.cost == pytest.approx(want.cost, **APPROX), key
        assert row.idle_gpu_hours == pytest.approx(want.idle, **APPROX), key
        assert row.lost_gpu_hours == pytest.approx(want.lost, **APPROX), key
        assert row.wasted == pytest.approx(want.wasted, **APPROX), key
        per = want.cost / len(want.finished) if want.finished else None
        assert row.cost_per_finished == (pytest.approx(per, **APPROX) if per else None), key
    everything = list(made.values())
    assert result.job_count == len(made)
    assert result.total_cost == pytest.approx(sum(j.total_cost for j in everything), **APPROX)
    assert result.total_gpu_hours == pytest.approx(
        sum(sum(j.hours.values()) for j in everything), **APPROX
    )
    assert result.total_lost_gpu_hours == pytest.approx(
        sum(sum(j.lost.values()) for j in everything), **APPROX
    )
    assert result.total_idle_gpu_hours == pytest.approx(
        sum(sum(j.idle.values()) for j in everything), **APPROX
    )
    assert result.total_wasted == pytest.approx(
        sum(j.total_cost for j in everything if j.state in ("failed", "cancelled")), **APPROX
    )
    assert result.finished == sum(1 for j in everything if j.state == JobState.SUCCEEDED)
    assert result.total_wasted > 0 and result.finished > 0
    # The money of every grouping is the same money.
    assert sum(row.cost for row in result.rows) == pytest.approx(result.total_cost, **APPROX)


def test_a_projects_rows_judge_its_runs_by_the_metric_most_of_them_report(
    month: tuple[Paika, dict[int, Made]],
) -> None:
    paika, made = month
    result = report_of(paika, f"report days={DAYS} by=project")
    for row in result.rows:
        runs = [j for j in made.values() if (j.project or "") == row.group]
        metric = chosen_metric(runs, row.group or None)
        want = best(runs, metric) if metric else None
        assert (row.metric, row.best) == ((metric, want) if want is not None else (None, None))
        if want is not None and metric not in LOWER_IS_BETTER and want > 0:
            assert row.cost_per_unit == pytest.approx(row.cost / want, **APPROX)
        else:
            assert row.cost_per_unit is None
    assert {row.metric for row in result.rows} >= {"top1", "wer"}


def test_rounds_of_a_project_show_the_gain_over_the_round_before_and_its_cost(
    month: tuple[Paika, dict[int, Made]],
) -> None:
    paika, made = month
    result = report_of(paika, f"report days={DAYS} by=round project=llm-pretrain")
    runs = [j for j in made.values() if j.project == "llm-pretrain"]
    present = {j.round for j in runs}
    # Natural order: 10 comes after 3.
    order = [r for r in ["1", "2", "3", "10"] if r in present]
    assert [row.group for row in result.rows] == order
    previous = None
    for row in result.rows:
        mine = [j for j in runs if j.round == row.group]
        assert row.cost == pytest.approx(sum(j.total_cost for j in mine), **APPROX)
        assert row.metric in ("top1", None) and row.best == best(mine, "top1")
        if previous is None or previous.best is None or row.best is None:
            assert row.gain is None and row.cost_per_unit is None
        else:
            assert row.gain == pytest.approx(row.best - previous.best, **APPROX)
            if row.gain > 0:
                assert row.cost_per_unit == pytest.approx(row.cost / row.gain, **APPROX)
            else:
                assert row.cost_per_unit is None
        previous = row
    assert any(row.gain is not None for row in result.rows)
    assert all(job.project == "llm-pretrain" for job in result.jobs)
    assert "By round" in gpu(paika, f"report days={DAYS} by=round project=llm-pretrain").text


def test_a_metric_asked_for_judges_every_row_and_lower_is_better_for_losses(
    month: tuple[Paika, dict[int, Made]],
) -> None:
    paika, made = month
    for metric in ("top1", "loss"):
        result = report_of(paika, f"report days={DAYS} by=user metric={metric}")
        for row in result.rows:
            want = best([j for j in made.values() if j.owner == row.group], metric)
            assert row.best == want and row.metric == (metric if want is not None else None)
            if metric == "top1" and want:
                assert row.cost_per_unit == pytest.approx(row.cost / want, **APPROX)
            else:
                assert row.cost_per_unit is None  # cost per unit of a loss means nothing


@pytest.mark.parametrize(
    ("words", "keep"),
    [
        ("user=<@UNICK>", lambda job, gpu_type: job.owner == "UNICK"),
        ("project=asr", lambda job, gpu_type: job.project == "asr"),
        ("round=2", lambda job, gpu_type: job.round == "2"),
        ("type=H100-80GB", lambda job, gpu_type: gpu_type == "H100-80GB"),
        ("team=nlp", lambda job, gpu_type: job.team == "nlp"),
    ],
)
def test_filters_keep_only_the_charges_they_name(
    month: tuple[Paika, dict[int, Made]], words: str, keep: Callable[[Made, str], bool]
) -> None:
    paika, made = month
    result = report_of(paika, f"report days={DAYS} by=team {words}")
    kept: dict[str, float] = defaultdict(float)
    jobs = set()
    for job in made.values():
        for gpu_type, cost in job.cost.items():
            if keep(job, gpu_type):
                kept[job.team] += cost
                jobs.add(job.id)
    assert {row.group: pytest.approx(row.cost, **APPROX) for row in result.rows} == kept
    assert result.job_count == len(jobs)


def test_the_pages_list_every_job_once_costliest_first(
    month: tuple[Paika, dict[int, Made]],
) -> None:
    paika, made = month
    first = report_of(paika, f"report days={DAYS}")
    assert first.pages == -(-len(made) // JOB_LIMIT) and first.pages > 1
    seen = []
    for page in range(1, first.pages + 1):
        result = report_of(paika, f"report days={DAYS} page={page}")
        assert (result.page, result.pages) == (page, first.pages)
        seen += result.jobs
    assert sorted(job.job_id for job in seen) == sorted(made)
    assert [job.cost for job in seen] == sorted((job.cost for job in seen), reverse=True)
    for job in seen:
        assert job.cost == pytest.approx(made[job.job_id].total_cost, **APPROX)
        assert job.metrics == made[job.job_id].values
        assert dict(job.artefacts) == made[job.job_id].artefacts
    text = gpu(paika, f"report days={DAYS}").text
    assert f"page 1 of {first.pages}" in text
    assert f"Next page: /gpu report days={DAYS} page=2" in text
    refused = paika.run(f"report days={DAYS} page={first.pages + 1}", "UBOB")
    assert not refused.ok
    assert refused.text == (
        f"There is no page {first.pages + 1}: this report's jobs fill {first.pages} pages.\n"
        f"Example: /gpu report page={first.pages}"
    )


def test_the_csv_and_json_read_back_to_the_same_figures(
    month: tuple[Paika, dict[int, Made]],
) -> None:
    paika, made = month
    result = report_of(paika, f"report days={DAYS} by=project file=csv")
    assert len(result.all_jobs) == len(made) and len(result.jobs) == JOB_LIMIT
    rows = list(csv.DictReader(io.StringIO(report_csv(result))))
    groups = [row for row in rows if row["kind"] == "group"]
    jobs = [row for row in rows if row["kind"] == "job"]
    (total,) = [row for row in rows if row["kind"] == "total"]
    assert len(rows) == len(result.rows) + len(made) + 1
    for row, want in zip(groups, result.rows, strict=True):
        assert row["group"] == want.group and int(row["runs"]) == want.jobs
        assert float(row["cost"]) == want.cost and float(row["gpu_hours"]) == want.gpu_hours
        assert float(row["wasted"]) == want.wasted
        assert float(row["idle_gpu_hours"]) == want.idle_gpu_hours
        assert float(row["lost_gpu_hours"]) == want.lost_gpu_hours
        assert (float(row["best"]) if row["best"] else None) == want.best
    assert {int(row["job_id"]): float(row["cost"]) for row in jobs} == {
        job.job_id: job.cost for job in result.all_jobs
    }
    for row in jobs:
        want_values = made[int(row["job_id"])].values
        assert (json.loads(row["metrics"]) if row["metrics"] else {}) == want_values
        artefacts = json.loads(row["artefacts"]) if row["artefacts"] else {}
        assert artefacts == made[int(row["job_id"])].artefacts
    assert float(total["cost"]) == result.total_cost and int(total["runs"]) == len(made)
    assert float(total["lost_gpu_hours"]) == result.total_lost_gpu_hours
    assert {int(row["job_id"]): float(row["lost_gpu_hours"]) for row in jobs} == {
        job.job_id: job.lost_gpu_hours for job in result.all_jobs
    }
    document = json.loads(report_json(result))
    assert document["total"]["cost"] == result.total_cost
    assert [g["cost"] for g in document["groups"]] == [row.cost for row in result.rows]
    assert len(document["jobs"]) == len(made)


def test_paika_report_prints_the_whole_report(
    month: tuple[Paika, dict[int, Made]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    paika, made = month

    def start() -> Paika:
        return paika

    assert export_report([f"days={DAYS}", "by=type", "page=2"], "csv", None, start) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert sum(1 for row in rows if row["kind"] == "job") == len(made)
    assert {row["group"] for row in rows if row["kind"] == "group"} == set(PRICES)
    assert export_report([f"days={DAYS}"], "json", "UBOB", start) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["total"]["runs"] == len(made) and document["by"] == "team,type"
    assert export_report(["days=0"], "csv", None, start) == 1
    assert "days must be a whole number from 1 to 366" in capsys.readouterr().err
    assert export_report([], "xlsx", None, start) == 2
    assert "--format must be csv or json" in capsys.readouterr().err


def test_until_ends_the_period_at_the_end_of_that_day(month: tuple[Paika, dict[int, Made]]) -> None:
    paika, _ = month
    now = paika.clock.now()
    since, until = (now - timedelta(days=20)).date(), (now - timedelta(days=10)).date()
    result = report_of(paika, f"report since={since} until={until}")
    zone = paika.policy.zone
    assert result.start.astimezone(zone).date() == since
    assert result.end.astimezone(zone) == datetime.combine(
        until + timedelta(days=1), datetime.min.time(), tzinfo=zone
    )
    assert "until=" in paika.run(f"report since={until} until={since}", "UBOB").text
