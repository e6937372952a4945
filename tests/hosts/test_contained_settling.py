"""One job whose settling raises is never stuck: the trouble is kept to it, the other jobs
settle, the admins hear of it once, and a cancel ends it and gives its GPUs back, also
across a restart. Real simulated agents over HTTP, real job processes; the failure is
injected into the function that raised for one job id."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from agent_world import job, make_cycle, ok, submit, until
from sqlmodel import Session, col, select

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.hosts import reconcile
from scheduler.notices.events import RecordingObserver
from scheduler.notices.kinds import NoticeKind
from storage.models import Allocation, JobEvent, JobState, Notice


def notices(paika: Paika, kind: NoticeKind) -> list[Notice]:
    with Session(paika.engine) as session:
        return list(session.exec(select(Notice).where(Notice.kind == kind.value)).all())


def open_allocations(paika: Paika, job_id: int) -> list[Allocation]:
    with Session(paika.engine) as session:
        query = select(Allocation).where(
            Allocation.job_id == job_id, col(Allocation.ended_at).is_(None)
        )
        return list(session.exec(query).all())


def broken_for(job_id: int, real: Callable[..., Any]) -> Callable[..., Any]:
    """`real`, raising for one job (its first Job argument, or `job=`) as a bug would."""

    def broken(*args: Any, **kwargs: Any) -> Any:
        for value in (*args, *kwargs.values()):
            if getattr(value, "id", None) == job_id and hasattr(value, "attempts"):
                raise RuntimeError(f"settling job #{job_id} broke")
        return real(*args, **kwargs)

    return broken


@pytest.mark.parametrize("broken", ["_ended", "close_allocations_at"])
def test_a_job_whose_settling_raises_is_ended_by_cancel_and_the_others_settle(
    world: Paika,
    clock: ManualClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    broken: str,
) -> None:
    go = tmp_path / "go"
    notifier = RecordingObserver()
    cycle = make_cycle(world, notifier)
    submit(world, "stuck", "sleep 300", extra="type=A100-80GB")
    submit(world, "fine", f"while [ ! -e {go} ]; do sleep 0.1; done", extra="type=A100-80GB")
    until(cycle, clock, lambda: job(world, "stuck").state == JobState.RUNNING)
    until(cycle, clock, lambda: job(world, "fine").state == JobState.RUNNING)
    stuck_id = job(world, "stuck").id or 0
    monkeypatch.setattr(reconcile, broken, broken_for(stuck_id, getattr(reconcile, broken)))

    # Before: the cancel said "Stopping…" and the job held its GPUs for good, every cycle.
    ok(world, "UALICE", f"cancel #{stuck_id}")
    go.touch()
    until(cycle, clock, lambda: job(world, "fine").state == JobState.SUCCEEDED)
    until(cycle, clock, lambda: job(world, "stuck").state == JobState.CANCELLED)
    assert open_allocations(world, stuck_id) == []
    with Session(world.engine) as session:
        history = session.exec(
            select(JobEvent).where(JobEvent.job_id == stuck_id).order_by(col(JobEvent.id))
        ).all()
    assert "could not be settled" in (history[-1].reason or "")
    assert f"settling job #{stuck_id} broke" in (history[-1].reason or "")

    # A restart (a new cycle on the same database) does not bring it back; its GPUs take work.
    monkeypatch.undo()
    restarted = make_cycle(world, RecordingObserver())
    submit(world, "next", "sleep 300", gpus=2, extra="type=A100-80GB")
    until(restarted, clock, lambda: job(world, "next").state == JobState.RUNNING)
    assert job(world, "stuck").state == JobState.CANCELLED
    told = notices(world, NoticeKind.JOB_UNSETTLED)
    assert len(told) == 1  # the admins hear once, however many cycles it failed
    assert told[0].detail and told[0].detail["to_channel"] is True


def test_report_lines_that_raise_are_skipped_once_and_the_admins_told_once(
    world: Paika, clock: ManualClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notifier = RecordingObserver()
    cycle = make_cycle(world, notifier)
    report = (
        "import os, time\n"
        "for i in range(3):\n"
        "    with open(os.environ['PAIKA_REPORT_FILE'], 'a') as out:\n"
        "        out.write(f'metric=step:{i}\\n')\n"
        "    time.sleep(0.3)\n"
        "time.sleep(300)\n"
    )
    path = tmp_path / "report.py"
    path.write_text(report)
    submit(world, "noisy", f"{sys.executable} {path}")
    until(cycle, clock, lambda: job(world, "noisy").state == JobState.RUNNING)
    noisy = job(world, "noisy").id or 0
    real = reconcile.take_file_lines
    monkeypatch.setattr(reconcile, "take_file_lines", broken_for(noisy, real))

    def skipped_all() -> bool:
        taken = job(world, "noisy").report_lines_taken or {}
        return max((taken.get("hosts") or {}).values(), default=0) >= 3

    until(cycle, clock, skipped_all)
    for _ in range(3):  # the same lines do not raise again, nor tell the admins again
        clock.advance(timedelta(seconds=5))
        result = cycle.run_once()
        assert result.errors == []
    assert job(world, "noisy").state == JobState.RUNNING  # its run goes on, GPUs kept
    assert job(world, "noisy").metrics is None  # the lines were skipped, not half-stored
    assert len(notices(world, NoticeKind.JOB_UNSETTLED)) == 1
    ok(world, "UALICE", f"cancel #{noisy}")
    until(cycle, clock, lambda: job(world, "noisy").state == JobState.CANCELLED)
    assert open_allocations(world, noisy) == []


def test_a_broken_job_whose_host_cannot_be_asked_ends_after_its_cancels_grace(
    world: Paika,
    clock: ManualClock,
    agents: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "stuck", "sleep 300", extra="type=A100-80GB")
    until(cycle, clock, lambda: job(world, "stuck").state == JobState.RUNNING)
    stuck = job(world, "stuck").id or 0
    monkeypatch.setattr(reconcile, "_silent", broken_for(stuck, reconcile._silent))
    agents["gpu-a"].stop()  # its host stops answering: the stop cannot be sent
    ok(world, "UALICE", f"cancel #{stuck}")
    clock.advance(timedelta(seconds=10))
    cycle.run_once()
    assert job(world, "stuck").state == JobState.RUNNING  # within the stop's grace it waits
    clock.advance(timedelta(seconds=reconcile.ENDING_STOP_GRACE_S))
    cycle.run_once()
    assert job(world, "stuck").state == JobState.CANCELLED
    assert open_allocations(world, stuck) == []
    assert len(notices(world, NoticeKind.JOB_UNSETTLED)) == 1


def test_a_broken_job_whose_start_never_arrived_is_sent_again_not_ended(
    world: Paika,
    clock: ManualClock,
    agents: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from test_outages import LostAnswers

    cycle = make_cycle(world, RecordingObserver())
    cycle.dispatcher = LostAnswers(deliver=False)  # its first start never reaches the agent
    submit(world, "late", "sleep 300", extra="type=A100-80GB")
    cycle.run_once()
    late = job(world, "late")
    assert late.state == JobState.RUNNING and late.confirmed_at is None
    monkeypatch.setattr(reconcile, "_gone", broken_for(late.id or 0, reconcile._gone))
    clock.advance(timedelta(seconds=5))
    cycle.run_once()  # its settling raises; the start may still be on its way: sent again
    assert job(world, "late").state == JobState.RUNNING
    until(cycle, clock, lambda: job(world, "late").confirmed_at is not None)
    assert open_allocations(world, late.id or 0) != []
