"""A host's planned maintenance against real simulated agents over HTTP: short work still
fills the host before the window, long work is kept off it, what runs at the start is
stopped on time and queued again (nothing lost), and the host takes jobs again by itself
when the window ends (issue 32)."""

from __future__ import annotations

from datetime import timedelta

from agent_world import job, make_cycle, ok, submit, until

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.notices.events import RecordingObserver
from storage.models import JobState


def _at(paika: Paika, delta: timedelta) -> str:
    moment = (paika.clock.now() + delta).astimezone(paika.policy.zone)
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


def test_a_window_drains_its_host_on_time_and_the_host_comes_back(
    world: Paika, clock: ManualClock
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "before", "sleep 60", hours=2, extra="type=A100-80GB")
    cycle.run_once()
    assert job(world, "before").state == JobState.RUNNING
    ok(
        world,
        "UADMIN",
        f"admin maintenance add host=gpu-a from={_at(world, timedelta(minutes=20))} "
        f'until={_at(world, timedelta(minutes=80))} reason="driver 570"',
    )
    # Before the window: short work still fills the host, long work is kept off it.
    submit(world, "short", "true", hours=0.1, extra="type=A100-80GB")
    submit(world, "long", "true", hours=3, extra="type=A100-80GB")
    cycle.run_once()
    assert job(world, "short").state in (JobState.RUNNING, JobState.SUCCEEDED)
    assert job(world, "long").state == JobState.QUEUED
    # At the start what still runs there is stopped and queued again, with nothing lost.
    clock.advance(timedelta(minutes=21))
    until(cycle, clock, lambda: job(world, "before").state == JobState.QUEUED, step=timedelta(0))
    before = job(world, "before")
    assert before.attempts == 1 and "maintenance" in (before.state_reason or "")
    for _ in range(2):  # inside the window nothing starts there
        cycle.run_once()
        assert job(world, "before").state == JobState.QUEUED
        assert job(world, "long").state == JobState.QUEUED
    # After it the host takes jobs again by itself.
    clock.advance(timedelta(minutes=60))
    until(
        cycle,
        clock,
        lambda: (
            job(world, "long").state != JobState.QUEUED
            and job(world, "before").state != JobState.QUEUED
        ),
        step=timedelta(0),
    )
    assert job(world, "before").attempts == 2
