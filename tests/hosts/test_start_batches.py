"""A cycle records all of its starts in one transaction, and confirms them in one. When
the batch fails (a GPU another writer took after the snapshot), nothing of it is kept and
each start is recorded on its own: only the one that lost the race waits."""

from __future__ import annotations

from typing import Any

import pytest
from agent_world import job, make_cycle, ok, submit, until
from sqlmodel import Session, col, select

import scheduler.cycle
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.notices.events import EventKind, RecordingObserver
from scheduler.policy.plan import Plan
from storage.db import session_scope
from storage.models import Allocation, Job, JobState
from storage.queries import cluster as cluster_queries

NAMES = ("one", "two", "three", "four")


def _submit_four(world: Paika) -> None:
    for name in NAMES:  # one card each: the four cards of the two hosts
        submit(world, name, "sleep 30")


def _active(world: Paika) -> list[Allocation]:
    with Session(world.engine) as session:
        return list(session.exec(select(Allocation).where(col(Allocation.ended_at).is_(None))))


def test_a_cycle_starting_several_jobs_records_and_confirms_each(
    world: Paika, clock: ManualClock
) -> None:
    notifier = RecordingObserver()
    cycle = make_cycle(world, notifier)
    _submit_four(world)
    result = cycle.run_once()
    assert sorted(result.started) == sorted(job(world, name).id for name in NAMES)
    for name in NAMES:
        started = job(world, name)
        assert started.state == JobState.RUNNING and started.attempts == 1
        assert started.confirmed_at is not None  # the host took it, in the same cycle
    assert len(_active(world)) == 4 and len({a.gpu_id for a in _active(world)}) == 4
    told = [e for e in result.events if e.kind == EventKind.JOB_STARTED]
    assert sorted(e.job_id for e in told) == sorted(result.started)
    assert all(e.detail["gpus"] == 1 and e.detail["hosts"] for e in told)
    cycle.run_once()  # confirmed starts are not resent, nor started again
    assert all(job(world, name).attempts == 1 for name in NAMES)


def test_a_gpu_taken_after_the_snapshot_costs_only_its_own_start(
    world: Paika, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer holds one planned GPU by the time the starts are recorded: the batch
    fails on it; the other three start, the fourth waits and starts once the GPU is free."""
    notifier = RecordingObserver()
    cycle = make_cycle(world, notifier)
    _submit_four(world)
    ok(world, "UALICE", 'submit name=holder gpus=1 hours=1 priority=normal data=pending cmd="true"')
    holder = job(world, "holder").id
    planned = scheduler.cycle.schedule
    stolen: dict[str, Any] = {}

    def plan_then_lose_a_gpu(*args: Any, **kwargs: Any) -> Plan:
        plan = planned(*args, **kwargs)
        if not stolen and len(plan.starts) > 1:
            victim = plan.starts[-1]
            with session_scope(world.engine) as session:  # another writer, after the snapshot
                taken = cluster_queries.open_allocation(
                    session=session,
                    job_id=holder or 0,
                    gpu_id=victim.gpu_ids[0],
                    at=clock.now(),
                )
                session.flush()
                stolen.update(job_id=victim.job_id, allocation=taken.id)
        return plan

    monkeypatch.setattr(scheduler.cycle, "schedule", plan_then_lose_a_gpu)
    result = cycle.run_once()
    assert stolen, "the policy planned the four starts in one cycle"
    others = {job(world, name).id for name in NAMES} - {stolen["job_id"]}
    assert set(result.started) == others and not result.errors
    with Session(world.engine) as session:
        waiting = session.get(Job, stolen["job_id"])
        assert waiting is not None and waiting.state == JobState.QUEUED
        assert waiting.attempts == 0  # nothing of its start was kept
        mine = select(Allocation).where(Allocation.job_id == stolen["job_id"])
        assert session.exec(mine).all() == []
    assert {a.job_id for a in _active(world)} == others | {holder}
    with session_scope(world.engine) as session:  # the other writer lets the GPU go
        allocation = session.get(Allocation, stolen["allocation"])
        assert allocation is not None
        cluster_queries.end_allocation(session=session, allocation=allocation, at=clock.now())
    with Session(world.engine) as session:
        assert session.get(Job, stolen["job_id"]) is not None
    until(cycle, clock, lambda: job_state(world, stolen["job_id"]) == JobState.RUNNING)
    assert all(job(world, name).attempts == 1 for name in NAMES)


def job_state(world: Paika, job_id: int) -> JobState:
    with Session(world.engine) as session:
        found = session.get(Job, job_id)
        assert found is not None
        return found.state
