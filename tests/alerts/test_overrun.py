"""Runs past their estimate, on every backend: the owner is told once per estimate (and once
more after Extend), Stop is the owner's cancel, strangers are refused, and a class with a hard
limit is stopped at estimate × the limit while others run on. (Through real agents, the hard
limit is tested in tests/hosts/test_estimate_limit.py; the buttons in
tests/bot/test_overrun_slack.py.)"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import select

from bot.notice_words import sentence
from scheduler import lifecycle
from scheduler.alerts.overrun import (
    ENDED,
    EXTEND,
    KIND,
    LIMIT_STOP,
    STOP,
    answer_overrun,
    check_overrun,
    enforce_limits,
)
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.config import Estimates
from scheduler.notices.outbox import from_row
from storage.db import session_scope
from storage.models import AuditEvent, Job, JobState, Notice


def ok(paika: Paika, user: str, text: str) -> None:
    reply = paika.run(text, user)
    assert reply.ok, reply.text


@pytest.fixture
def world(paika: Paika) -> Paika:
    """Overrun notice at 1.5× the estimate; idle-class runs stopped at 3×."""
    paika.policy = paika.policy.model_copy(
        update={"estimates": Estimates(overrun_factor=1.5, hard_limit={"idle": 3.0})}
    )
    ok(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    ok(paika, "UADMIN", "admin member add <@UVERA> team=vision role=approver")
    ok(paika, "UADMIN", "admin member add <@UNICK> team=nlp")
    return paika


def _running(paika: Paika, name: str, *, hours: float, gpus: int, priority: str = "normal") -> int:
    """A job submitted now and started now (its host does not matter to the notice)."""
    ok(
        paika,
        "UALICE",
        f'submit name={name} gpus={gpus} hours={hours} priority={priority} data=ready cmd="x"',
    )
    now = paika.clock.now()
    with session_scope(paika.engine) as session:
        job = session.exec(select(Job).where(Job.name == name)).one()
        lifecycle.move(session, job, JobState.RUNNING, at=now, actor="scheduler")
        job.started_at, job.attempts = now, 1
        session.add(job)
        return job.id or 0


def _job(paika: Paika, job_id: int) -> Job:
    with session_scope(paika.engine) as session:
        job = session.get(Job, job_id)
        assert job is not None
        return job


def _told(paika: Paika) -> list[str]:
    return [n.key for n in check_overrun(paika.engine, paika.policy, paika.clock.now())]


def test_the_owner_is_told_once_and_once_more_after_extend(
    world: Paika, clock: ManualClock
) -> None:
    # 8 GPU-hours on 4 GPUs: 2 h of wall time; told past 1.5 × 2 = 3 h.
    job_id = _running(world, "long", hours=8, gpus=4)
    clock.advance(timedelta(hours=3))
    assert _told(world) == []  # at 3 h exactly it is not yet past
    clock.advance(timedelta(minutes=1))
    [key] = _told(world)
    assert key.startswith(f"overrun:{job_id}:1:")
    assert _job(world, job_id).overrun_warned_at == clock.now()
    clock.advance(timedelta(hours=1))
    assert _told(world) == []  # once per estimate
    with session_scope(world.engine) as session:
        row = session.get(Notice, key)
        assert row is not None and row.kind == KIND and from_row(row).to_users == ("UALICE",)

    # A stranger may not answer; the owner extends: 4 h 1 min run so far × 1.5.
    now = clock.now()
    refused = answer_overrun(world.engine, world.policy, ("UADMIN",), key, EXTEND, "UNICK", now)
    assert refused.known and not refused.allowed and not refused.changed
    extended = answer_overrun(world.engine, world.policy, ("UADMIN",), key, EXTEND, "UALICE", now)
    assert extended.changed and extended.answer == EXTEND
    elapsed = 4 + 1 / 60
    assert extended.estimate_hours == pytest.approx(elapsed * 1.5)
    job = _job(world, job_id)
    assert job.est_gpu_hours == pytest.approx(elapsed * 1.5 * 4) and job.overrun_warned_at is None
    again = answer_overrun(world.engine, world.policy, ("UADMIN",), key, STOP, "UVERA", now)
    assert again.allowed and not again.changed and again.answer == EXTEND  # first answer holds
    assert _job(world, job_id).stop_requested_at is None

    # The new estimate (6.025 h) warns once more past 1.5 × it = 9.0375 h.
    assert _told(world) == []
    clock.advance(timedelta(hours=5))  # 9 h 1 min
    assert _told(world) == []
    clock.advance(timedelta(minutes=5))
    [second] = _told(world)
    assert second != key
    assert _told(world) == []
    # Stop by an approver of the team: the owner's cancel.
    stopped = answer_overrun(
        world.engine, world.policy, ("UADMIN",), second, STOP, "UVERA", clock.now()
    )
    assert stopped.changed and stopped.answer == STOP
    job = _job(world, job_id)
    assert job.state == JobState.RUNNING and job.stop_reason == "cancel"
    assert job.stop_requested_at == clock.now()
    with session_scope(world.engine) as session:
        actions = [
            (a.action, a.actor)
            for a in session.exec(select(AuditEvent).order_by(AuditEvent.id)).all()  # type: ignore[arg-type]
            if a.action.startswith("job.") and a.target_id == str(job_id)
        ]
    assert ("job.estimate_extended", "UALICE") in actions and ("job.cancel", "UVERA") in actions
    assert actions.count(("job.overrun_told", "scheduler")) == 2


def test_the_notice_says_the_numbers_and_an_ended_run_is_not_acted_on(
    world: Paika, clock: ManualClock
) -> None:
    job_id = _running(world, "short", hours=1, gpus=1, priority="idle")
    clock.advance(timedelta(hours=2))
    [notice] = check_overrun(world.engine, world.policy, clock.now())
    assert notice.detail["limit_hours"] == pytest.approx(3.0)
    words = sentence("en", notice)
    assert f"Job #{job_id} short has run 2.0 h against an estimate of 1.0 h." in words
    assert "the estimate becomes 3.0 h" in words
    assert "已运行 2.0 小时" in sentence("zh", notice)
    ok(world, "UALICE", f"cancel {job_id}")  # the owner cancels it another way first
    answer = answer_overrun(
        world.engine, world.policy, ("UADMIN",), notice.key, EXTEND, "UALICE", clock.now()
    )
    assert answer.answer == ENDED and not answer.changed
    assert _job(world, job_id).est_gpu_hours == 1.0


def test_no_notice_when_the_policy_sets_no_factor_or_the_run_is_stopping(
    world: Paika, clock: ManualClock
) -> None:
    job_id = _running(world, "quiet", hours=1, gpus=1)
    ok(world, "UALICE", f"cancel {job_id}")  # stopping: nobody needs telling
    _running(world, "other", hours=1, gpus=1)
    world.policy = world.policy.model_copy(update={"estimates": Estimates(overrun_factor=None)})
    clock.advance(timedelta(hours=10))
    assert _told(world) == []


def test_a_hard_limit_stops_only_its_class_past_the_limit(world: Paika, clock: ManualClock) -> None:
    idle = _running(world, "filler", hours=2, gpus=2, priority="idle")  # 1 h; stopped past 3 h
    normal = _running(world, "normal", hours=2, gpus=2)  # no hard limit for normal
    clock.advance(timedelta(hours=3))
    assert enforce_limits(world.engine, world.policy, clock.now()) == []
    clock.advance(timedelta(minutes=1))
    assert enforce_limits(world.engine, world.policy, clock.now()) == [idle]
    assert enforce_limits(world.engine, world.policy, clock.now()) == []  # once
    stopped, running = _job(world, idle), _job(world, normal)
    assert stopped.stop_reason == LIMIT_STOP and stopped.stop_requested_at == clock.now()
    assert running.stop_requested_at is None
    with session_scope(world.engine) as session:
        [audit] = session.exec(
            select(AuditEvent).where(AuditEvent.action == "job.estimate_limit")
        ).all()
    assert audit.target_id == str(idle) and audit.detail is not None
    assert audit.detail["hard_limit"] == 3.0


def test_a_run_started_again_is_told_afresh(world: Paika, clock: ManualClock) -> None:
    job_id = _running(world, "again", hours=1, gpus=1)
    clock.advance(timedelta(hours=2))
    assert len(_told(world)) == 1
    # Preempted and started again later (the cycle's moves): a new run, a new notice.
    with session_scope(world.engine) as session:
        job = session.get(Job, job_id)
        assert job is not None
        lifecycle.move(session, job, JobState.PREEMPTED, at=clock.now(), actor="scheduler")
        lifecycle.move(session, job, JobState.QUEUED, at=clock.now(), actor="scheduler")
        clock.advance(timedelta(minutes=10))
        lifecycle.move(session, job, JobState.RUNNING, at=clock.now(), actor="scheduler")
        job.attempts = 2
        session.add(job)
    clock.advance(timedelta(hours=1))
    assert _told(world) == []  # 1 h of the new run: within 1.5 × 1 h
    clock.advance(timedelta(minutes=31))
    [key] = _told(world)
    assert key.startswith(f"overrun:{job_id}:2:")
