"""`admin host remove` on a host whose starts were all refused (its start holds kept) works:
the refused starts opened no run there, and the holds name the host, not its row."""

from __future__ import annotations

import pwd
from datetime import timedelta

from agent_world import job, make_cycle, ok, submit
from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.notices.events import RecordingObserver
from storage.models import Host, JobState, StartHold

MISSING = "paika-nobody-here"


def test_a_host_that_refused_every_start_can_be_removed(world: Paika, clock: ManualClock) -> None:
    try:
        pwd.getpwnam(MISSING)
    except KeyError:
        pass
    else:
        raise AssertionError(f"this machine has an account {MISSING}; the test needs none")
    ok(world, "UADMIN", f"admin account set <@UALICE> account={MISSING}")
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "train", "sleep 300")
    train = job(world, "train").id or 0
    deadline = 30
    while deadline:
        clock.advance(timedelta(seconds=2))
        cycle.run_once()
        with Session(world.engine) as session:
            held = session.exec(select(StartHold).where(StartHold.job_id == train)).all()
        if {h.host for h in held} == {"gpu-a", "gpu-b"}:
            break
        deadline -= 1
    assert deadline, "both hosts should have refused the start"
    reply = world.run("admin host remove gpu-a", "UADMIN")
    assert reply.ok, reply.text
    with Session(world.engine) as session:
        assert session.exec(select(Host).where(Host.name == "gpu-a")).first() is None
        kept = session.exec(select(StartHold).where(StartHold.host == "gpu-a")).all()
    assert kept  # the refusal stays on record, by name
    assert job(world, "train").state == JobState.QUEUED
