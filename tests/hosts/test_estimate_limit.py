"""The estimate's hard limit against real simulated agents: an idle-class run past its
estimate × the class's limit is stopped on its host and ends cancelled with the reason its
owner is told (DM, `/gpu status`); a normal run, whose class has no limit, runs on."""

from __future__ import annotations

from datetime import timedelta

from agent_world import Agent, job, make_cycle, submit, until
from sqlmodel import Session, select

from bot.notice_words import sentence
from scheduler.alerts.overrun import LIMIT_STOP, enforce_limits
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.config import Estimates
from scheduler.notices.events import RecordingObserver
from scheduler.notices.kinds import NoticeKind
from scheduler.notices.outbox import from_row
from storage.models import AuditEvent, JobState, Notice


def test_a_run_past_its_hard_limit_is_stopped_and_one_without_a_limit_runs_on(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    world.policy = world.policy.model_copy(
        update={"estimates": Estimates(overrun_factor=None, hard_limit={"idle": 3.0})}
    )
    cycle = make_cycle(world, RecordingObserver())
    # 0.1 GPU-hours on one GPU: 6 min estimated; the idle class is stopped past 18 min.
    submit(world, "filler", "sleep 120", hours=0.1, priority="idle")
    submit(world, "steady", "sleep 120", hours=0.1)
    result = cycle.run_once()
    filler, steady = job(world, "filler"), job(world, "steady")
    assert sorted(result.started) == sorted([filler.id, steady.id])

    clock.advance(timedelta(minutes=17))
    cycle.run_once()
    assert enforce_limits(world.engine, world.policy, clock.now()) == []
    clock.advance(timedelta(minutes=2))
    assert enforce_limits(world.engine, world.policy, clock.now()) == [filler.id]
    assert job(world, "filler").stop_reason == LIMIT_STOP

    until(cycle, clock, lambda: job(world, "filler").state == JobState.CANCELLED)
    ended = job(world, "filler")
    assert "ran past its estimate's hard limit" in (ended.state_reason or "")
    assert all(
        run.state != "running"
        for run in agents["gpu-b"].store.all_jobs()  # type: ignore[union-attr]
        if run.job_id.startswith(f"{filler.id}.")
    )
    assert job(world, "steady").state == JobState.RUNNING  # no limit for the normal class
    assert enforce_limits(world.engine, world.policy, clock.now()) == []

    status = world.run(f"status {filler.id}", "UALICE")
    assert "ran past its estimate's hard limit" in status.text
    with Session(world.engine) as session:
        told = [
            from_row(row)
            for row in session.exec(
                select(Notice).where(Notice.kind == NoticeKind.JOB_FINISHED)
            ).all()
        ]
        [audit] = session.exec(
            select(AuditEvent).where(AuditEvent.action == "job.estimate_limit")
        ).all()
    [finished] = [n for n in told if n.detail.get("job_id") == filler.id]
    assert finished.to_users == ("UALICE",)
    assert "stopped (ran past its estimate's hard limit)" in sentence("en", finished)
    assert "运行时间超过预估的硬上限" in sentence("zh", finished)
    assert audit.target_id == str(filler.id) and audit.actor == "scheduler"
