"""`/gpu priority`: a waiting job's terms, checked by hand on a queue built in the database,
and the breakdown's order equal to the policy's own (property test)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlmodel import Session, select

from bot.console import render
from scheduler.app import Paika
from scheduler.policy.matching import CardNeeds
from scheduler.policy.ranking import ordered, rank_key, rank_terms, usage_shares
from scheduler.policy.snapshot import Knobs, Pending, WithinClass
from scheduler.service.priority import PriorityResult
from storage.models import Gpu, Host, HostState, Job, JobState, LedgerEntry, Team

HOUR = 3600.0


def _job(team_id: int, name: str, priority: str, gpus: int, hours: float, at: datetime) -> Job:
    return Job(
        name=name,
        owner="UALICE",
        team_id=team_id,
        priority=priority,
        gpus=gpus,
        est_gpu_hours=hours,
        command="python train.py",
        state=JobState.QUEUED,
        submitted_at=at,
    )


def _absolute(paika: Paika) -> None:
    """Aging and the backstop in hours (24 h per doubling, 432 h), so they can be worked out
    by hand whatever the queue's drain time."""
    ordering = paika.policy.scheduler.ordering.model_copy(
        update={"aging_drains": None, "starve_after_drains": None, "starve_after_hours": 432}
    )
    scheduler = paika.policy.scheduler.model_copy(update={"ordering": ordering})
    paika.policy = paika.policy.model_copy(update={"scheduler": scheduler})


@pytest.fixture
def queue(paika: Paika) -> dict[str, int]:
    """Five waiting jobs with known submit times and sizes; vision used 30 GPU-hours just
    now and nlp 10, so their shares of recent usage are 75 % and 25 %."""
    _absolute(paika)
    now = paika.clock.now()
    with Session(paika.engine) as session:
        teams = {t.name: t.id for t in session.exec(select(Team)).all()}
        vision, nlp = teams["vision"], teams["nlp"]
        assert vision is not None and nlp is not None
        jobs = {
            "a": _job(vision, "a", "core", 1, 8, now - timedelta(hours=1)),
            "b": _job(vision, "b", "normal", 2, 4, now - timedelta(hours=24)),
            "c": _job(nlp, "c", "normal", 1, 4, now - timedelta(hours=2)),
            "d": _job(nlp, "d", "normal", 1, 1, now - timedelta(hours=500)),
            "e": _job(nlp, "e", "idle", 1, 1, now),
            "done": _job(vision, "done", "normal", 1, 1, now - timedelta(hours=3)),
        }
        jobs["done"].state = JobState.SUCCEEDED
        jobs["done"].owner = "ULEDGER"  # its history does not correct Alice's estimates
        jobs["done"].started_at = now - timedelta(hours=2)
        jobs["done"].ended_at = now - timedelta(hours=1)
        session.add_all(jobs.values())
        session.flush()
        for team_id, hours in ((vision, 30.0), (nlp, 10.0)):
            session.add(
                LedgerEntry(
                    job_id=jobs["done"].id or 0,
                    team_id=team_id,
                    gpu_type="A100-80GB",
                    gpu_hours=hours,
                    cost=0.0,
                    started_at=now - timedelta(hours=1),
                    ended_at=now,  # no decay: the shares are exactly 3:1
                    recorded_at=now,
                )
            )
        session.commit()
        return {name: job.id or 0 for name, job in jobs.items()}


def _ask(paika: Paika, job_id: int) -> PriorityResult:
    reply = paika.run(f"priority {job_id}", "UBOB")  # anyone may ask, as with status
    assert reply.ok, reply.text
    assert isinstance(reply.result, PriorityResult)
    return reply.result


def test_the_terms_of_a_waiting_job_are_those_worked_out_by_hand(
    paika: Paika, queue: dict[str, int]
) -> None:
    result = _ask(paika, queue["b"])
    terms = result.terms
    assert terms is not None
    # Core first, then the starving normal job, then b: 3rd of 5.
    assert (result.position, result.queue_length) == (3, 5)
    assert [a.id for a in result.ahead] == [queue["a"], queue["d"]]
    assert terms.class_rank == 1 and not terms.starving and not terms.by_submit
    assert terms.size_gpu_s == pytest.approx(4 * HOUR)  # 2 GPUs × 2 h
    assert terms.wait_s == pytest.approx(24 * HOUR)
    assert terms.aging_factor == pytest.approx(2.0)  # one doubling per 24 h waited
    assert terms.team_share == pytest.approx(0.75)
    assert terms.fair_share == pytest.approx(1 + 0.5 * 0.75)
    assert terms.score == pytest.approx(math.log2(4 * HOUR * 1.375) - 1)
    usage = {u.team: (u.gpu_hours, u.share) for u in result.usage}
    assert usage == {"vision": pytest.approx((30.0, 0.75)), "nlp": pytest.approx((10.0, 0.25))}

    c = _ask(paika, queue["c"]).terms
    assert c is not None
    assert c.aging_factor == pytest.approx(2 ** (2 / 24))
    assert c.fair_share == pytest.approx(1.125)
    assert c.score > terms.score  # b's wait outweighs its team's usage


def test_the_backstop_puts_a_starving_job_ahead_of_its_class(
    paika: Paika, queue: dict[str, int]
) -> None:
    result = _ask(paika, queue["d"])
    assert result.terms is not None and result.terms.starving and result.terms.by_submit
    assert result.position == 2
    text = render(result, paika.policy.zone, "en")
    assert "Starvation backstop: applies" in text
    assert f"#{queue['a']} (core, vision)" in text


def test_the_breakdown_is_said_in_english_and_chinese(paika: Paika, queue: dict[str, int]) -> None:
    result = _ask(paika, queue["b"])
    en = render(result, paika.policy.zone, "en")
    assert "place 3 of 5" in en
    assert "Aging: waited 24.0 h, factor 2.00" in en
    assert "team vision used 75% of recent GPU-hours, factor 1.38" in en
    assert "vision 30.0 GPU-h (75%), nlp 10.0 GPU-h (25%)" in en
    assert "not yet, it applies after 432 h of waiting (408.0 h to go)" in en
    zh = render(result, paika.policy.zone, "zh")
    assert "队列中第 3 位，共 5 个" in zh and "系数 2.00" in zh
    first = render(_ask(paika, queue["a"]), paika.policy.zone, "en")
    assert "Nothing is ahead of it" in first


def test_a_job_that_is_not_waiting_says_where_it_is(paika: Paika, queue: dict[str, int]) -> None:
    result = _ask(paika, queue["done"])
    assert result.terms is None and result.position == 0
    text = render(result, paika.policy.zone, "en")
    assert "is not waiting: succeeded since 2026-11-02 16:00 CST" in text


# The property: ordering by the breakdown is ordering by the policy's key.
_pending = st.builds(
    Pending,
    id=st.integers(1, 10_000),
    priority=st.sampled_from(("core", "normal", "idle", "odd")),
    team=st.sampled_from(("vision", "nlp", "speech", "")),
    owner=st.just("U1"),
    submitted_at=st.floats(0, 4e6, allow_nan=False),
    data_ready=st.booleans(),
    gpus=st.integers(1, 64),
    needs=st.just(CardNeeds(None, None, None)),
    est_gpu_hours=st.floats(0.001, 1e5, allow_nan=False),
    estimate_ratio=st.floats(0.25, 4.0),
)
_knobs = st.builds(
    Knobs,
    respect_classes=st.booleans(),
    within_class=st.sampled_from(tuple(WithinClass)),
    aging_hours=st.floats(0.1, 500),
    max_aging_factor=st.one_of(st.none(), st.floats(1.0, 1e6)),
    starve_after_hours=st.one_of(st.none(), st.floats(0, 1000)),
    fair_share_weight=st.floats(0, 5),
)
_usage = st.dictionaries(st.sampled_from(("vision", "nlp", "speech")), st.floats(0, 1e4))


@settings(max_examples=300, deadline=None)
@given(
    jobs=st.lists(_pending, max_size=25, unique_by=lambda job: job.id),
    now=st.floats(0, 1e7, allow_nan=False),
    knobs=_knobs,
    usage=_usage,
)
def test_ordering_by_the_breakdown_is_the_policys_order(
    jobs: list[Pending], now: float, knobs: Knobs, usage: dict[str, float]
) -> None:
    shares = usage_shares(usage)
    for job in jobs:
        assert rank_terms(job, now, knobs, shares).key == rank_key(job, now, knobs, shares)
    by_terms = sorted(jobs, key=lambda job: rank_terms(job, now, knobs, shares).key)
    assert [j.id for j in by_terms] == [j.id for j in ordered(jobs, now, knobs, usage)]


def test_scale_free_aging_and_backstop_are_read_in_drain_times(paika: Paika) -> None:
    """By default aging doubles every quarter of the queue's drain time and the backstop is
    `starve_after_drains` drain times: the ready jobs' GPU-hours over the cluster's GPUs."""
    from scheduler.policy.capacity import Capacity
    from scheduler.snapshots import build_snapshot

    now = paika.clock.now()
    with Session(paika.engine) as session:
        team = session.exec(select(Team).where(Team.name == "vision")).one()
        assert team.id is not None
        host = Host(name="gpu-01", url="https://gpu-01:8470", added_at=now, state=HostState.UP)
        session.add(host)
        session.flush()
        session.add_all(
            Gpu(host_id=host.id or 0, index=i, gpu_type="A100-80GB", memory_gib=80)
            for i in range(4)
        )
        session.add(_job(team.id, "long", "normal", 1, 300, now - timedelta(hours=10)))
        session.add(_job(team.id, "short", "normal", 1, 1, now - timedelta(hours=1)))
        session.commit()
        snapshot = build_snapshot(session, paika.policy, now)
    gpus = Capacity(snapshot).total_gpus
    assert gpus > 0
    drain_h = 301 / gpus
    backstop = paika.policy.scheduler.ordering.starve_after_drains
    assert backstop is not None
    result = _ask(paika, _id_of(paika, "short"))
    assert result.knobs.scale_free
    assert result.knobs.aging_hours == pytest.approx(max(0.25 * drain_h, 1 / 60))
    assert result.knobs.starve_after_hours == pytest.approx(backstop * drain_h)
    terms = result.terms
    assert terms is not None
    assert terms.aging_log2 == pytest.approx(1.0 / result.knobs.aging_hours)
    waited = _ask(paika, _id_of(paika, "long")).terms
    assert waited is not None
    assert waited.starving == (backstop * drain_h <= 10)


def _id_of(paika: Paika, name: str) -> int:
    with Session(paika.engine) as session:
        found = session.exec(select(Job).where(Job.name == name)).one()
        return found.id or 0
