"""Match review (`/gpu match`, `/gpu report matches`) and estimates seen (`/gpu report
estimates`, the asker's own line in `/gpu status`), on every backend, with a small catalogue
whose figures are worked out by hand below."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from paika_test_time import T0
from sqlmodel import Session, select

from bot.console import render
from scheduler.app import Paika, Reply
from scheduler.clock import ManualClock
from scheduler.config import GpuType
from scheduler.service.estimates import EstimatesReport
from scheduler.service.matches import MatchesReport, MatchReview
from storage.models import Job, JobState, LedgerEntry, Match, Team

# small: cheap and slow; medium: the reference card; large: twice as fast, 8 per GPU-hour.
CATALOG = {
    "small": GpuType(memory_gib=16, speed=0.5, price_per_gpu_hour=1.0),
    "medium": GpuType(memory_gib=40, speed=1.0, price_per_gpu_hour=3.0),
    "large": GpuType(memory_gib=80, speed=2.0, price_per_gpu_hour=8.0),
}


def gpu(paika: Paika, user: str, text: str) -> Reply:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply


@pytest.fixture
def cluster(paika: Paika) -> Paika:
    paika.policy = paika.policy.model_copy(
        update={
            "gpu_types": CATALOG,
            "scheduler": paika.policy.scheduler.model_copy(update={"headroom": {}}),
        }
    )
    for user, team in [("UALICE", "vision"), ("UBOB", "vision"), ("UNICK", "nlp")]:
        gpu(paika, "UADMIN", f"admin member add <@{user}> team={team}")
    return paika


def _ran(
    paika: Paika,
    name: str,
    owner: str,
    team: str,
    on: str,
    gpu_hours: float,
    *,
    mem: float | None = None,
    alternatives: list[dict[str, Any]] | None = None,
    hours_ago: float = 10,
) -> int:
    """A job that ran on `on` for `gpu_hours` (1 GPU) and succeeded, with its match and ledger."""
    price = CATALOG[on].price_per_gpu_hour
    started = T0 - timedelta(hours=hours_ago)
    ended = started + timedelta(hours=gpu_hours)
    with Session(paika.engine) as session:
        team_id = session.exec(select(Team.id).where(Team.name == team)).one() or 0
        job = Job(
            name=name,
            owner=owner,
            team_id=team_id,
            gpus=1,
            min_memory_gib=mem,
            est_gpu_hours=gpu_hours,
            command="python train.py",
            state=JobState.SUCCEEDED,
            submitted_at=started - timedelta(hours=1),
            started_at=started,
            ended_at=ended,
            attempts=1,
        )
        session.add(job)
        session.flush()
        session.add(
            Match(
                job_id=job.id or 0,
                at=started,
                chosen_type=on,
                alternatives=alternatives or [],
                reason="the cheapest adequate type, with GPUs free now",
            )
        )
        session.add(
            LedgerEntry(
                job_id=job.id or 0,
                team_id=team_id,
                gpu_type=on,
                gpu_hours=gpu_hours,
                cost=gpu_hours * price,
                started_at=started,
                ended_at=ended,
                recorded_at=ended,
            )
        )
        session.commit()
        return job.id or 0


# The big job needed 24 GiB (medium and large are adequate, small is not) and ran 3 GPU-hours
# on large: work = 3 × 2.0 = 6 reference GPU-hours; its cost 3 × 8 = 24.
# On medium (cheapest adequate): 6 ÷ 1.0 = 6 GPU-hours × 3 = 18, so 6 more was spent;
# on large (fastest adequate): 3 GPU-hours, 24. Medium was busy: 45 min of wait saved.
BIG_WEIGHED = [
    {"gpu_type": "small", "price_per_gpu_hour": 1.0, "verdict": "16 GiB < 24 GiB needed"},
    {
        "gpu_type": "medium",
        "price_per_gpu_hour": 3.0,
        "verdict": "not enough free now",
        "wait_s": 2700.0,
    },
    {"gpu_type": "large", "price_per_gpu_hour": 8.0, "verdict": "chosen"},
]


def test_the_review_of_a_run_on_a_costlier_type_shows_what_it_cost_against_the_alternatives(
    cluster: Paika,
) -> None:
    big = _ran(cluster, "big", "UALICE", "vision", "large", 3.0, mem=24, alternatives=BIG_WEIGHED)
    reply = gpu(cluster, "UNICK", f"match {big}")  # anyone may look: the ledger is public
    review = reply.result
    assert isinstance(review, MatchReview)
    assert review.chosen == "large"
    assert [(w.gpu_type, w.wait_minutes) for w in review.weighed] == [
        ("small", None),
        ("medium", 45.0),
        ("large", None),
    ]
    assert [(p.gpu_type, p.gpu_hours, p.cost) for p in review.ran] == [("large", 3.0, 24.0)]
    assert review.cheapest is not None and review.fastest is not None
    assert review.cheapest.gpu_type == "medium"
    assert review.cheapest.gpu_hours == pytest.approx(6.0)
    assert review.cheapest.cost == pytest.approx(18.0)
    assert review.fastest.gpu_type == "large"
    assert review.fastest.gpu_hours == pytest.approx(3.0)
    assert review.fastest.cost == pytest.approx(24.0)
    assert review.extra_cost == pytest.approx(6.0)
    assert review.wait_saved_minutes == pytest.approx(45.0)
    text = reply.text
    assert "Ran 3.00 GPU-hours on large, cost 24.00." in text
    assert "cheapest adequate type, medium: 6.00 GPU-hours, cost 18.00." in text
    assert "fastest adequate type, large: 3.00 GPU-hours, cost 24.00." in text
    assert "cost 6.00 more than the cheapest adequate type would have" in text
    assert "saved about 45 min of waiting" in text
    assert "medium (3.00 per GPU-hour): not enough free now; it would have waited about 45 min" in (
        text
    )
    zh = render(review, cluster.policy.zone, "zh")
    assert "多花了 6.00" in zh and "少等了约 45 分钟" in zh


def test_a_run_on_its_cheapest_type_and_a_job_not_yet_started(cluster: Paika) -> None:
    # No needs: all three types are adequate; small is the cheapest, large the fastest.
    # 2 GPU-hours on small = work 1.0; on large 0.5 GPU-hours × 8 = 4.
    fine = _ran(cluster, "fine", "UBOB", "vision", "small", 2.0)
    review = gpu(cluster, "UBOB", f"match {fine}").result
    assert isinstance(review, MatchReview)
    assert review.extra_cost == 0.0
    assert review.fastest is not None and review.fastest.cost == pytest.approx(4.0)
    assert "no more than on the cheapest adequate type" in gpu(cluster, "UBOB", "match fine").text
    gpu(cluster, "UBOB", 'submit name=later gpus=1 hours=1 priority=normal data=ready cmd="x"')
    text = gpu(cluster, "UBOB", "match later").text
    assert "has not started, so it has no match yet" in text and "/gpu why #" in text
    assert not cluster.run("match 999", "UBOB").ok


def test_report_matches_lists_the_costlier_runs_with_the_extra_cost(cluster: Paika) -> None:
    big = _ran(cluster, "big", "UALICE", "vision", "large", 3.0, mem=24, alternatives=BIG_WEIGHED)
    _ran(cluster, "fine", "UBOB", "vision", "small", 2.0)
    # nlp's run: 2 GPU-hours on medium (cost 6) for work 2; on small 4 GPU-hours, cost 4.
    other = _ran(cluster, "other", "UNICK", "nlp", "medium", 2.0)
    # Long ago: outside the default seven days.
    _ran(cluster, "old", "UNICK", "nlp", "large", 1.0, hours_ago=24 * 30)

    reply = gpu(cluster, "UBOB", "report matches")
    found = reply.result
    assert isinstance(found, MatchesReport)
    assert [(r.job_id, round(r.extra_cost, 6)) for r in found.runs] == [(big, 6.0), (other, 2.0)]
    assert found.count == 2 and found.total_extra == pytest.approx(8.0)
    assert found.runs[0].cheapest.gpu_type == "medium"
    assert found.runs[0].wait_saved_minutes == pytest.approx(45.0)
    assert found.runs[1].wait_saved_minutes is None
    assert f"#{big} big · vision · <@UALICE>: 3.00 GPU-hours on large, cost 24.00; " in reply.text
    assert "on medium 18.00: 6.00 more (saved about 45 min of waiting)" in reply.text
    assert "2 runs cost 8.00 more than they had to." in reply.text

    vision = gpu(cluster, "UBOB", "report matches team=vision").result
    assert isinstance(vision, MatchesReport)
    assert [r.job_id for r in vision.runs] == [big]
    limited = gpu(cluster, "UBOB", "report matches limit=1")
    assert isinstance(limited.result, MatchesReport) and len(limited.result.runs) == 1
    assert "… and 1 more" in limited.text
    month = gpu(cluster, "UBOB", "report matches days=60").result
    assert isinstance(month, MatchesReport) and month.count == 3
    assert not cluster.run("report matches days=3 since=2026-10-01", "UBOB").ok


def _finished(paika: Paika, owner: str, team: str, est: float, gpus: int, ran_hours: float) -> None:
    with Session(paika.engine) as session:
        team_id = session.exec(select(Team.id).where(Team.name == team)).one() or 0
        started = T0 - timedelta(days=2)
        session.add(
            Job(
                name="done",
                owner=owner,
                team_id=team_id,
                gpus=gpus,
                est_gpu_hours=est,
                command="x",
                state=JobState.SUCCEEDED,
                submitted_at=started,
                started_at=started,
                ended_at=started + timedelta(hours=ran_hours),
            )
        )
        session.commit()


def test_report_estimates_per_user_and_the_own_line_in_status(
    cluster: Paika, clock: ManualClock
) -> None:
    # alice estimated 2 h three times and ran 1, 3 and 4 h: ratios 0.5, 1.5, 2.0; median 1.5,
    # two of three overran. bob: 4 GPU-hours on 2 GPUs = 2 h, ran 1 h: 0.5, none overran.
    for ran in (1.0, 3.0, 4.0):
        _finished(cluster, "UALICE", "vision", 2.0, 1, ran)
    _finished(cluster, "UBOB", "vision", 4.0, 2, 1.0)
    _finished(cluster, "UNICK", "nlp", 1.0, 1, 1.0)

    reply = gpu(cluster, "UNICK", "report estimates team=vision")
    found = reply.result
    assert isinstance(found, EstimatesReport)
    rows = {row.user: row for row in found.rows}
    assert set(rows) == {"UALICE", "UBOB"}
    assert rows["UALICE"].record.runs == 3
    assert rows["UALICE"].record.median == pytest.approx(1.5)
    assert rows["UALICE"].overran_share == pytest.approx(2 / 3)
    assert rows["UBOB"].record.runs == 1 and rows["UBOB"].record.median == pytest.approx(0.5)
    assert rows["UBOB"].overran_share == 0.0
    # furthest off first: bob's 0.5× is further from 1 than alice's 1.5×
    assert [row.user for row in found.rows] == ["UBOB", "UALICE"]
    assert "<@UALICE>: 3 runs, median 1.50× the estimate (paika plans with 1.50×), 67% overran" in (
        reply.text
    )
    assert "<@UBOB>: 1 run, 0.50× the estimate" in reply.text
    everyone = gpu(cluster, "UNICK", "report estimates").result
    assert isinstance(everyone, EstimatesReport) and len(everyone.rows) == 3

    gpu(cluster, "UALICE", 'submit name=mine gpus=1 hours=2 priority=normal data=ready cmd="x"')
    own = gpu(cluster, "UALICE", "status mine").text
    assert "Your last 3 runs took 1.5× your estimates; paika plans with that." in own
    assert "Your last" not in gpu(cluster, "UBOB", "status mine").text  # not bob's job
    assert "中位为预估的 1.50 倍" in render(found, cluster.policy.zone, "zh")
