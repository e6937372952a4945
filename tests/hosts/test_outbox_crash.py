"""A notice is written with the change that caused it: a `paika up` killed between the
commit and the delivery loses nothing, and the notice is delivered once after a restart."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

from agent_world import TOKEN, Agent, make_cycle, submit, until
from agent_world import job as job_named

from bot.notice_words import sentence
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.notices.events import EventKind, RecordingObserver
from scheduler.notices.outbox import LEASE, RecordingAnnouncer, deliver_pending
from storage.db import make_engine
from storage.models import JobState

ROOT = Path(__file__).resolve().parents[2]

# The leader of another process: one cycle, which records the job's end with its notice;
# then the courier's first sending kills the process (SIGKILL: no cleanup, no rollback).
CRASHING_LEADER = textwrap.dedent(
    """
    import os, signal, sys
    from datetime import datetime
    from scheduler.app import Paika
    from scheduler.clock import ManualClock
    from scheduler.notices.events import RecordingObserver
    from scheduler.periodic import Periodic
    from scheduler.runner import agent_cycle
    from scheduler.settings import Settings

    url, token, at = sys.argv[1:4]

    class DiesWhileSending:
        def announce(self, announcement):
            print("sending", announcement.kind, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    clock = ManualClock(datetime.fromisoformat(at))
    settings = Settings(database_url=url, agent_token=token, config=None)
    paika = Paika.start(settings, clock=clock)
    cycle = agent_cycle(paika, RecordingObserver())
    periodic = Periodic(paika.engine, paika.policy, clock, cycle, DiesWhileSending())
    periodic.tick()
    print("ended", [e.kind.value for e in cycle.observer.events], flush=True)
    periodic.courier.deliver_now()
    sys.exit(3)
    """
)


def test_a_notice_survives_a_crash_between_commit_and_delivery(
    world: Paika, agents: dict[str, Agent], clock: ManualClock
) -> None:
    observer = RecordingObserver()
    cycle = make_cycle(world, observer)
    submit(world, "quick", "true")
    until(cycle, clock, lambda: job_named(world, "quick").state == JobState.RUNNING)
    started = RecordingAnnouncer()
    assert deliver_pending(world.engine, started, clock.now()) == 1  # "started": told
    assert started.kinds() == [EventKind.JOB_STARTED]
    # The run ends on its host; nobody has reconciled it yet.
    agent = next(a for a in agents.values() if a.store and a.store.all_jobs())
    assert agent.store is not None
    assert until_exited(agent)
    url = world.engine.url.render_as_string(hide_password=False)
    clock.advance(timedelta(seconds=5))
    crashed = subprocess.run(
        [sys.executable, "-c", CRASHING_LEADER, url, TOKEN, clock.now().isoformat()],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert crashed.returncode == -9, crashed.stdout + crashed.stderr
    assert crashed.stdout == "ended ['job_finished']\nsending job_finished\n"
    assert job_named(world, "quick").state == JobState.SUCCEEDED  # the change was committed
    # A restarted paika (a fresh engine): the dead sender's lease still holds the notice …
    restarted = make_engine(url)
    try:
        announcer = RecordingAnnouncer()
        assert deliver_pending(restarted, announcer, clock.now()) == 0
        # … and once it has run out, the notice goes out, once.
        later = clock.now() + LEASE + timedelta(seconds=1)
        assert deliver_pending(restarted, announcer, later) == 1
        assert deliver_pending(restarted, announcer, later + timedelta(minutes=30)) == 0
    finally:
        restarted.dispose()
    [told] = announcer.announcements
    assert told.kind == EventKind.JOB_FINISHED
    assert told.to_users == ("UALICE",) and "quick finished" in sentence("en", told)


def until_exited(agent: Agent, timeout: float = 60.0) -> bool:
    """Wait (real time: the job is a real process) until the agent's one run has exited."""
    assert agent.store is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(run.state != "running" for run in agent.store.all_jobs()):
            return True
        time.sleep(0.05)
    return False
