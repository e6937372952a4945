"""The take-over story, end to end: a paika runs a real workload on simulated agents over
HTTP; its last snapshot is restored into a new, empty database; a fresh paika with a fresh
cycle on that database carries on with the same queue, the same reasons and the same quotas,
and the agents' running jobs stay running where they are."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from agent_world import Agent, make_cycle, ok, submit, until
from paika_test_servers import fresh_engine
from sqlalchemy import Engine
from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.archive import state
from scheduler.clock import ManualClock
from scheduler.notices.events import RecordingObserver
from scheduler.policy.plan import Wait
from scheduler.service import jobs
from scheduler.settings import Settings
from storage.models import Allocation, Job, JobState

LONG = "sleep 600"


@pytest.fixture
def fresh(engine: Engine, tmp_path: Path) -> Iterator[Engine]:
    with fresh_engine(engine.dialect.name, tmp_path) as new:
        yield new


def reasons(waits: dict[int, Wait]) -> list[tuple[int, str, int, int, int]]:
    """The queue in order with each job's reason and the numbers it names (not its ETA,
    which moves with the clock)."""
    return [
        (w.job_id, w.code.value, w.higher, w.earlier, round(w.left_hours, 6))
        for w in sorted(waits.values(), key=lambda w: w.position)
    ]


def current(paika: Paika) -> dict[int, Wait]:
    with paika.context("UADMIN") as ctx:
        return jobs.current_waits(ctx)


def on_hosts(engine: Engine) -> dict[int, tuple[str, list[int]]]:
    with Session(engine) as session:
        running = session.exec(select(Job).where(Job.state == JobState.RUNNING)).all()
        held = session.exec(select(Allocation).where(Allocation.ended_at == None)).all()  # noqa: E711
        return {
            job.id or 0: (job.state, sorted(a.gpu_id for a in held if a.job_id == job.id))
            for job in running
        }


def quotas(paika: Paika) -> list[tuple[float, float]]:
    listing = paika.run("admin quota list", "UADMIN").result
    return [(v.state.used_hours, v.state.left_hours) for v in listing.quotas]  # type: ignore[attr-defined]


def test_a_new_install_restored_from_the_last_snapshot_carries_on_with_the_same_queue(
    world: Paika, agents: dict[str, Agent], clock: ManualClock, fresh: Engine
) -> None:
    ok(world, "UADMIN", "admin member add <@UNICK> team=nlp")
    ok(world, "UADMIN", "admin quota add team=vision hours=500 expires=2027-06-30 owner=<@UALICE>")
    ok(world, "UADMIN", "admin quota add team=nlp hours=3 expires=2027-06-30 owner=<@UNICK>")
    cycle = make_cycle(world, RecordingObserver())
    # A short run first, so a quota has GPU-hours used (the ledger stays with the old install).
    submit(world, "warmup", "sleep 0.2", gpus=1, hours=1, user="UNICK", extra="type=T4-16GB")
    until(cycle, clock, lambda: on_hosts(world.engine) == {} and _ended(world, "warmup"),
          step=timedelta(minutes=30))  # fmt: skip
    # Then the queue: two runs fill every card, the rest wait for various reasons.
    submit(world, "core-run", LONG, gpus=2, hours=20, priority="core", extra="type=A100-80GB")
    submit(world, "t4-run", LONG, gpus=2, hours=8, extra="type=T4-16GB")
    until(cycle, clock, lambda: len(on_hosts(world.engine)) == 2)
    submit(world, "next-a100", LONG, gpus=2, hours=4, extra="type=A100-80GB")
    submit(world, "urgent", LONG, gpus=1, hours=2, priority="core")
    submit(world, "filler", LONG, gpus=1, hours=1, priority="idle")
    submit(world, "too-big", LONG, gpus=1, hours=40, user="UNICK")
    ok(
        world,
        "UALICE",
        'submit name=needs-data gpus=1 hours=1 priority=normal data=s3://d/x cmd="sleep 600"',
    )
    result = cycle.run_once()
    assert result.plan is not None and not result.plan.starts
    # The reasons as the policy explains them for this state (the cycle's own pass decides
    # without explaining).
    waits = current(world)
    assert len(waits) == 5
    with Session(world.engine) as session:
        doc = state.build_document(session, world.policy, waits, clock.now(), 1)
    before = {"queue": reasons(waits), "running": on_hosts(world.engine), "quotas": quotas(world)}
    assert before["quotas"][1][0] > 0  # nlp's warm-up was charged

    # The old install is gone; a new one is restored from the snapshot and started.
    state.restore(fresh, state.decode(state.encode(doc)), clock.now())
    settings = Settings(
        database_url=fresh.url.render_as_string(hide_password=False),
        admins=("UADMIN",),
        config=None,
    )
    new = Paika.start(settings, clock=clock)
    new.policy = world.policy
    assert reasons(current(new)) == before["queue"]
    assert on_hosts(fresh) == before["running"]
    assert quotas(new) == before["quotas"]

    # Its own cycle polls the same agents: they keep running their jobs, nothing else starts.
    new_cycle = make_cycle(new, RecordingObserver())
    clock.advance(timedelta(seconds=10))
    taken = new_cycle.run_once()
    assert taken.plan is not None and not taken.plan.starts
    assert reasons(current(new)) == before["queue"]
    assert on_hosts(fresh) == before["running"]
    # Quotas count what running jobs have used so far: ten seconds more on each install alike.
    assert quotas(new) == quotas(world) != before["quotas"]
    for agent in agents.values():
        assert agent.store is not None
        assert sum(run.state == "running" for run in agent.store.all_jobs()) == 1
    # A job submitted on the new install gets a number of its own.
    submit(new, "after", LONG, gpus=1, hours=1)
    with Session(fresh) as session:
        after = session.exec(select(Job).where(Job.name == "after")).one()
    assert (after.id or 0) > max(row[0] for row in doc["jobs"]["rows"])
    new.engine.dispose()


def _ended(paika: Paika, name: str) -> bool:
    with Session(paika.engine) as session:
        found = session.exec(select(Job).where(Job.name == name)).one()
        return found.state == JobState.SUCCEEDED
