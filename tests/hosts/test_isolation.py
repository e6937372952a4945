"""One bad value never stops the cycle, a command or the digest: values that got into the
database before the door checked them (or by hand) fail their own item, with a reason."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from agent_world import Agent, job, make_cycle, ok, submit, until
from sqlmodel import Session, select

from scheduler.alerts.quota import raise_quota_alerts
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.notices.events import EventKind, RecordingObserver
from storage.models import Allocation, AuditEvent, Job, JobState, Quota, Team


def _set(paika: Paika, name: str, **values: object) -> None:
    """Write values straight into a job's row, as an old release or a hand edit might have."""
    with Session(paika.engine) as session:
        row = session.exec(select(Job).where(Job.name == name)).one()
        for key, value in values.items():
            setattr(row, key, value)
        session.add(row)
        session.commit()


def test_a_job_whose_image_no_host_accepts_fails_alone_and_the_others_start(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    notifier = RecordingObserver()
    cycle = make_cycle(world, notifier)
    submit(world, "bad-image", "python train.py", gpus=2, extra="type=A100-80GB")
    _set(world, "bad-image", image="ubuntu latest")
    submit(world, "fine", "sleep 5", gpus=2, extra="type=T4-16GB")
    for _ in range(3):  # not once: a job refused for its own data must not be retried forever
        result = cycle.run_once()
        assert result.errors == []
    bad = job(world, "bad-image")
    assert bad.state == JobState.FAILED
    assert "image" in (bad.state_reason or "") and "ubuntu latest" in (bad.state_reason or "")
    assert job(world, "fine").state == JobState.RUNNING
    assert EventKind.JOB_FAILED in notifier.kinds()
    assert bad.attempts == 1


@pytest.mark.parametrize("expires", [date(9999, 12, 31), date(1, 1, 1)])
def test_a_quota_dated_at_the_calendars_edge_stops_nothing(
    world: Paika, clock: ManualClock, agents: dict[str, Agent], expires: date
) -> None:
    with Session(world.engine) as session:
        team = session.exec(select(Team).where(Team.name == "vision")).one()
        session.add(
            Quota(
                team_id=team.id or 0,
                gpu_type=None,
                gpu_hours=100,
                expires_on=expires,
                owner="UVERA",
                created_by="UADMIN",
                created_at=clock.now(),
            )
        )
        session.commit()
    submit(world, "after-quota", "sleep 5", gpus=1)
    for command in ("queue", "board", "status after-quota", "quota", "report"):
        ok(world, "UALICE", command)
    result = make_cycle(world, RecordingObserver()).run_once()
    assert result.errors == []
    raise_quota_alerts(world.engine, world.policy, clock.now())


def test_an_allocation_its_ended_job_left_open_is_closed_and_reported_by_the_next_cycle(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "leaky", "sleep 30", gpus=2, extra="type=A100-80GB")
    cycle.run_once()
    # An older release let a cancel race a start: the job ended, its GPUs stayed booked.
    _set(world, "leaky", state=JobState.CANCELLED)
    submit(world, "waiting", "sleep 5", gpus=2, extra="type=A100-80GB")
    until(cycle, clock, lambda: job(world, "waiting").state == JobState.RUNNING)
    with Session(world.engine) as session:
        leaky = job(world, "leaky").id
        held = session.exec(select(Allocation).where(Allocation.job_id == leaky)).all()
        audited = session.exec(
            select(AuditEvent).where(AuditEvent.action == "allocation.leak_closed")
        ).all()
    assert held and all(a.ended_at is not None for a in held)
    assert {a.target_id for a in audited} == {str(leaky)}


def test_a_poller_that_fails_does_not_make_every_host_look_silent(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "steady", "sleep 30", gpus=2, extra="type=A100-80GB")
    cycle.run_once()

    def broken(targets: object) -> dict[str, object]:
        raise RuntimeError("a bug in the poller")

    cycle.poller = broken  # type: ignore[assignment]
    for _ in range(4):
        clock.advance(timedelta(seconds=60))
        result = cycle.run_once()
        assert result.errors and result.errors[0].startswith("poll:")
    steady = job(world, "steady")
    assert steady.state == JobState.RUNNING and steady.missing_since is None
