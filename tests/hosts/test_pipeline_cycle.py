"""Pipelines against real simulated agents over HTTP: prep → train → eval runs in order,
each step starting only once the one before succeeded; a step that fails holds the rest and
tells their owner once (issue 32)."""

from __future__ import annotations

from agent_world import job, make_cycle, ok, until
from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.notices.events import RecordingObserver
from scheduler.notices.kinds import NoticeKind
from storage.models import JobState, Notice


def _submit(paika: Paika, name: str, cmd: str, extra: str = "") -> int:
    ok(
        paika,
        "UALICE",
        f'submit name={name} gpus=1 hours=1 priority=normal data=ready cmd="{cmd}" {extra}',
    )
    return job(paika, name).id or 0


def test_a_three_step_pipeline_runs_in_order(world: Paika, clock: ManualClock) -> None:
    cycle = make_cycle(world, RecordingObserver())
    prep = _submit(world, "prep", "sleep 0.5")
    # The data of train is what prep makes; eval waits for train to succeed.
    ok(
        world,
        "UALICE",
        f'submit name=train gpus=1 hours=1 priority=normal data=after:#{prep} cmd="sleep 0.3"',
    )
    train = job(world, "train").id or 0
    _submit(world, "eval", "true", f"after=#{train}")
    first = cycle.run_once()
    assert first.started == [prep]  # two cards are free, yet only prep may start
    assert job(world, "train").state == JobState.WAITING_DATA
    until(cycle, clock, lambda: job(world, "train").state != JobState.WAITING_DATA)
    assert job(world, "prep").state == JobState.SUCCEEDED
    until(cycle, clock, lambda: job(world, "eval").state == JobState.SUCCEEDED)
    order = sorted(
        (job(world, name) for name in ("prep", "train", "eval")),
        key=lambda j: j.started_at,  # type: ignore[arg-type, return-value]
    )
    assert [j.name for j in order] == ["prep", "train", "eval"]
    ended = {name: job(world, name).ended_at for name in ("prep", "train")}
    assert job(world, "train").started_at >= ended["prep"]  # type: ignore[operator]
    assert job(world, "eval").started_at >= ended["train"]  # type: ignore[operator]


def test_a_failed_step_holds_the_rest_and_tells_the_owner_once(
    world: Paika, clock: ManualClock
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    prep = _submit(world, "prep", "exit 4")
    _submit(world, "train", "true", f"after={prep}")
    cycle.run_once()
    until(cycle, clock, lambda: job(world, "prep").state == JobState.FAILED)
    for _ in range(3):  # held, pass after pass: never started, told once
        cycle.run_once()
    assert job(world, "train").state == JobState.QUEUED and job(world, "train").attempts == 0
    with Session(world.engine) as session:
        told = session.exec(
            select(Notice).where(Notice.kind == NoticeKind.JOB_UPSTREAM_FAILED)
        ).all()
    assert [n.detail["to_users"] for n in told] == [["UALICE"]]  # type: ignore[index]
    # Released, it runs.
    ok(world, "UALICE", f"release {job(world, 'train').id}")
    until(cycle, clock, lambda: job(world, "train").state == JobState.SUCCEEDED)
