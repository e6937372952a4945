"""Object storage is never on the scheduling path: the S3 server (moto's, over HTTP on
loopback, bucket versioning on) is killed in the middle of a run with jobs moving through
real agents. Scheduling goes on, the spool fills, the channel hears of it once; the server
comes back, and every config version, decision line, spec and snapshot arrives once and in
order."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from agent_world import job, make_cycle, ok, submit
from paika_test_s3 import S3Server, fake_aws, s3_store, wait_for
from sqlmodel import Session, col, select

from scheduler.app import Paika
from scheduler.archive.archiver import ArchivePace, Archiver
from scheduler.clock import ManualClock
from scheduler.cycle import Cycle
from scheduler.notices.events import RecordingObserver
from storage.models import ConfigVersion, Decision, Job, JobState, Notice
from storage.objects import keys
from storage.objects.base import ObjectStore
from storage.objects.shipper import Shipper
from storage.objects.spool import Spool

QUICK = "sleep 0.3"


@pytest.fixture
def s3(tmp_path: Path) -> Iterator[S3Server]:
    with pytest.MonkeyPatch.context() as env:
        fake_aws(env, tmp_path / "no-aws-files")
        server = S3Server()
        server.start()
        yield server
        if server.running:
            server.kill()


def turn(cycle: Cycle, archiver: Archiver, clock: ManualClock) -> None:
    """One cycle and the archiver's pass after it, as Periodic.tick runs them."""
    clock.advance(timedelta(seconds=20))
    result = cycle.run_once()
    assert not result.errors, result.errors
    archiver.after_cycle(
        result.at,
        cycle.policy,
        waits=result.plan.waits if result.plan is not None else None,
        changed=True,
        config_version=None,
    )


def turns_until(cycle: Cycle, archiver: Archiver, clock: ManualClock, done: object) -> None:
    wait_for(lambda: turn(cycle, archiver, clock) or done(), timeout=60, what="the jobs to move")  # type: ignore[operator]


def states(paika: Paika, *names: str) -> set[str]:
    return {job(paika, name).state for name in names}


def decision_ids_in(store: ObjectStore) -> list[int]:
    ids = []
    for key in store.keys(keys.DECISIONS):
        assert len(store.versions(key)) == 1, key  # each chunk written once
        ids += [json.loads(line)["id"] for line in store.get(key).decode().splitlines()]
    return ids


def test_killing_the_store_mid_run_stops_no_job_and_loses_no_write(
    world: Paika, clock: ManualClock, s3: S3Server, tmp_path: Path
) -> None:
    store = s3_store(s3.url, versioned=True)
    spool = Spool(tmp_path / "spool", 64 * 2**20)
    shipper = Shipper(store, spool, clock.now)
    pace = ArchivePace(snapshot_min_seconds=0, decisions_every_seconds=0, down_alert_seconds=60)
    archiver = Archiver(world.engine, spool, shipper, pace=pace)
    cycle = make_cycle(world, RecordingObserver())
    shipper.start()
    try:
        for name in ("a1", "a2"):
            submit(world, name, QUICK, hours=0.1)
        turns_until(cycle, archiver, clock, lambda: states(world, "a1", "a2") == {"succeeded"})
        wait_for(lambda: len(spool) == 0, what="the first writes to reach the store")

        s3.kill()
        for name in ("b1", "b2", "b3"):
            submit(world, name, QUICK, hours=0.1)
        ok(world, "UADMIN", 'config set scheduler.cycle_seconds=7 reason="while the store is down"')
        ok(world, "UADMIN", 'config set scheduler.cycle_seconds=9 reason="and again, 再改一次"')
        # Scheduling goes on: the new jobs start and finish on their agents.
        turns_until(
            cycle, archiver, clock, lambda: states(world, "b1", "b2", "b3") == {"succeeded"}
        )
        wait_for(lambda: shipper.down_since is not None, what="the shipper to see the outage")
        for _ in range(4):  # past the alert threshold
            turn(cycle, archiver, clock)
        assert len(spool) >= 5  # three specs, two config versions, decision lines, snapshots

        s3.start()  # the same port: the same buckets, as a restarted service finds its disks
        shipper.wake()
        wait_for(lambda: len(spool) == 0 and shipper.down_since is None, timeout=30, what="drain")
        turn(cycle, archiver, clock)  # the last lines of the log, and the end of the outage
        shipper.flush()
        assert len(spool) == 0
    finally:
        shipper.stop()
        spool.close()

    with Session(world.engine) as session:
        configs = session.exec(select(ConfigVersion).order_by(col(ConfigVersion.version))).all()
        decisions = session.exec(select(Decision.id).order_by(col(Decision.id))).all()
        jobs = session.exec(select(Job).order_by(col(Job.id))).all()
        told = [n.kind for n in session.exec(select(Notice)).all() if n.kind.startswith("store_")]

    # Every config version, once and in order (newest first in the store's list).
    versions = store.versions(keys.CONFIG)
    assert (
        [v.meta["paika-version"] for v in reversed(versions)]
        == [str(c.version) for c in configs]
        == ["1", "2", "3"]
    )
    assert versions[0].meta["paika-reason"] == "and again, 再改一次"
    assert store.get(keys.CONFIG, versions[1].version_id).decode() == configs[1].content
    # Every decision line once and in order, every job's spec once, every snapshot once.
    assert decision_ids_in(store) == list(decisions) and decisions
    assert store.keys("specs/") == [keys.spec(j.id or 0) for j in jobs]
    assert all(len(store.versions(key)) == 1 for key in store.keys("specs/"))
    snapshots = store.keys(keys.SNAPSHOTS)
    assert len(snapshots) >= 3 and all(len(store.versions(k)) == 1 for k in snapshots)
    assert {j.state for j in jobs} == {JobState.SUCCEEDED}
    # The channel heard of the outage once, and of its end once.
    assert sorted(told) == ["store_back", "store_down"]
