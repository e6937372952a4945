"""A full cluster with a queue: once a pass finds that it can decide nothing (no ready job
fits a free GPU, nothing running may be stopped), the following cycles reuse it until
something it read changes or REPLAN_EVERY passes; then the policy runs again at once."""

from __future__ import annotations

from datetime import timedelta

from agent_world import job, make_cycle, ok, submit, until
from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.cycle import REPLAN_EVERY, Cycle, CycleResult
from scheduler.notices.events import RecordingObserver
from storage.models import Decision, JobState

FILLERS = ("f1", "f2", "f3", "f4")


def _fill(world: Paika, cycle: Cycle, clock: ManualClock, *, priority: str = "normal") -> None:
    """Every card held by a long job, one more job waiting, and the pass that saw it."""
    for name in FILLERS:
        submit(world, name, "sleep 60", priority=priority)
    until(cycle, clock, lambda: all(job(world, n).state == JobState.RUNNING for n in FILLERS))
    submit(world, "waiter", "sleep 60")
    clock.advance(timedelta(seconds=1))
    assert cycle.run_once().planned  # the starts' confirmations changed what a pass reads


def _again(cycle: Cycle, clock: ManualClock, seconds: float = 1) -> CycleResult:
    clock.advance(timedelta(seconds=seconds))
    return cycle.run_once()


def _decisions(world: Paika) -> int:
    with Session(world.engine) as session:
        return len(session.exec(select(Decision)).all())


def test_a_full_cluster_reuses_the_pass_until_something_changes(
    world: Paika, clock: ManualClock
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    _fill(world, cycle, clock)
    logged = _decisions(world)
    quiet = _again(cycle, clock)
    assert not quiet.planned and not quiet.started and not quiet.errors
    waiter = job(world, "waiter").id
    assert quiet.plan is not None and waiter in quiet.plan.waits  # the reasons still stand
    assert quiet.snapshot is not None and len(quiet.snapshot.pending) == 1
    assert _decisions(world) == logged  # nothing decided, nothing logged
    # A new job is something the pass reads: the policy runs again.
    submit(world, "late", "sleep 60")
    assert _again(cycle, clock).planned
    assert not _again(cycle, clock).planned
    # The clock alone: reasons and ETAs are worked out afresh every REPLAN_EVERY.
    assert _again(cycle, clock, REPLAN_EVERY.total_seconds()).planned
    # A running job cancelled frees its card: the next pass starts the waiter on it.
    ok(world, "UALICE", f"cancel {job(world, 'f1').id}")
    until(cycle, clock, lambda: job(world, "waiter").state == JobState.RUNNING)


def test_a_new_policy_is_planned_with_at_once(world: Paika, clock: ManualClock) -> None:
    cycle = make_cycle(world, RecordingObserver())
    _fill(world, cycle, clock)
    assert not _again(cycle, clock).planned
    cycle.policy = cycle.policy.model_copy()
    assert _again(cycle, clock).planned


def test_running_work_the_policy_may_stop_keeps_every_pass(
    world: Paika, clock: ManualClock
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    _fill(world, cycle, clock, priority="idle")  # idle-class work may be preempted
    assert _again(cycle, clock).planned
    assert _again(cycle, clock).planned
