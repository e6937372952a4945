"""A running cycle takes a new config version at its next run, without a restart: a version
stored by another paika (another `paika up`, or `paika cmd`) changes what the cycle decides."""

from __future__ import annotations

from agent_world import TOKEN, Agent, job, ok, submit
from sqlalchemy import Engine

from bot.console import render
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.cycle import Cycle
from scheduler.dispatch import AgentDispatcher
from scheduler.hosts.poll import Poller
from scheduler.notices.events import RecordingObserver
from scheduler.settings import Settings
from storage.models import JobState


def test_a_new_version_changes_the_next_cycles_decision(
    world: Paika, engine: Engine, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    poller = Poller(TOKEN, timeout=2.0)
    # As `paika up` builds it (scheduler/runner.py): the cycle follows the holder.
    cycle = Cycle(
        world.engine,
        world.live,
        clock,
        AgentDispatcher(TOKEN, timeout=2.0),
        RecordingObserver(),
        poller,
    )
    try:
        submit(world, "first", "sleep 30", extra="type=T4-16GB")
        assert cycle.run_once().started == [job(world, "first").id]

        # Another paika on the same database keeps both T4 cards for core work.
        other = Paika.start(
            Settings(
                database_url=engine.url.render_as_string(hide_password=False),
                admins=("UADMIN",),
            ),
            clock=clock,
            words=render,
        )
        try:
            ok(other, "UADMIN", 'config set scheduler.headroom.T4-16GB=2 reason="core week"')
        finally:
            other.engine.dispose()

        submit(world, "second", "sleep 30", extra="type=T4-16GB")
        result = cycle.run_once()
        assert result.started == [] and cycle.policy.scheduler.headroom["T4-16GB"] == 2
        waiting = job(world, "second")
        assert waiting.state == JobState.QUEUED
        assert "headroom" in ok(world, "UALICE", "status second")

        ok(world, "UADMIN", 'config rollback 1 reason="core week is over"')
        assert cycle.run_once().started == [waiting.id]
    finally:
        cycle.close()
