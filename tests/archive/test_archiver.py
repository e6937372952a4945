"""The archiver hands the team's memory to the object store: each config version, template
version, job spec and decision line once, in order, and a snapshot only when the queue or the
cluster changed. Real databases (SQLite, PostgreSQL, MariaDB) and a real local store; the
store's other backend and its outages are in tests/objects and tests/hosts."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlmodel import Session, select

from bot.console import render
from scheduler.app import Paika
from scheduler.archive import state
from scheduler.archive.archiver import GAP_SETTLES, ArchivePace, Archiver, settled
from scheduler.archive.history import config_history
from scheduler.clock import ManualClock
from scheduler.notices.outbox import Announcement
from scheduler.settings import Settings
from storage.db import make_engine, session_scope, upgrade
from storage.models import ConfigVersion, Decision, Notice
from storage.objects import keys
from storage.objects.base import ObjectStore
from storage.objects.local import LocalStore
from storage.objects.shipper import Shipper
from storage.objects.spool import Spool

TEMPLATE = 'template save bert gpus=1 hours=2 priority=normal data=ready cmd="python t.py"'


def run(paika: Paika, user: str, text: str) -> None:
    reply = paika.run(text, user)
    assert reply.ok, reply.text


def open_archiver(paika: Paika, folder: Path, store: ObjectStore) -> Archiver:
    spool = Spool(folder / "spool", 64 * 2**20)
    return Archiver(paika.engine, spool, Shipper(store, spool, paika.clock.now))


@pytest.fixture
def team(paika: Paika) -> Paika:
    run(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    return paika


@pytest.fixture
def archiver(team: Paika, tmp_path: Path, store: ObjectStore) -> Iterator[Archiver]:
    archiver = open_archiver(team, tmp_path, store)
    yield archiver
    archiver.spool.close()


def later(paika: Paika, seconds: float) -> datetime:
    clock = paika.clock
    assert isinstance(clock, ManualClock)
    clock.advance(timedelta(seconds=seconds))
    return clock.now()


def archive(archiver: Archiver, paika: Paika, *, changed: bool = True) -> int:
    """One pass after a cycle, everything sent; how many objects it handed over."""
    done = archiver.after_cycle(
        paika.clock.now(), paika.policy, waits=None, changed=changed, config_version=1
    )
    archiver.shipper.flush()
    assert len(archiver.spool) == 0 and archiver.shipper.down_since is None
    return done.objects


def every_key(store: ObjectStore) -> list[str]:
    return [
        key
        for folder in ("config", "templates", "specs", "snapshots", "decisions")
        for key in store.keys(folder + "/")
    ]


def test_every_stream_reaches_the_store_once_in_order(team: Paika, archiver: Archiver) -> None:
    run(team, "UALICE", TEMPLATE)
    later(team, 1)
    run(team, "UALICE", TEMPLATE.replace("gpus=1", "gpus=2"))
    run(team, "UALICE", "submit template=bert name=one")
    run(team, "UALICE", 'submit name=two gpus=1 hours=1 priority=idle data=ready cmd="sleep 1"')
    now = team.clock.now()
    with session_scope(team.engine) as session:
        for job_id, code in ((1, "data"), (2, "higher"), (1, "cheaper")):
            session.add(Decision(at=now, job_id=job_id, kind="wait", detail={"code": code}))
    later(team, 120)

    assert archive(archiver, team) >= 6
    store = archiver.shipper.store

    config = store.versions(keys.CONFIG)
    assert [v.meta["paika-version"] for v in config] == ["1"]
    assert config[0].meta["paika-source"] == "file"
    with Session(team.engine) as session:
        stored = session.exec(select(ConfigVersion)).one()
    assert store.get(keys.CONFIG).decode() == stored.content

    template = store.versions(keys.template("vision", "bert"))
    assert [v.meta["paika-version"] for v in template] == ["2", "1"]  # newest first
    assert json.loads(store.get(keys.template("vision", "bert")))["fields"]["gpus"] == 2

    one = json.loads(store.get(keys.spec(1)))
    assert (one["name"], one["template"], one["template_version"]) == ("one", "bert", 2)
    assert one["spec"]["gpus"] == 2 and one["owner"] == "UALICE" and one["team"] == "vision"
    assert json.loads(store.get(keys.spec(2)))["spec"]["priority"] == "idle"

    [chunk] = store.keys(keys.decisions_day(now.astimezone(UTC).date()))
    lines = [json.loads(line) for line in store.get(chunk).decode().splitlines()]
    assert [(line["job_id"], line["code"]) for line in lines] == [
        (1, "data"),
        (2, "higher"),
        (1, "cheaper"),
    ]
    [snapshot] = store.keys(keys.SNAPSHOTS)
    document = json.loads(gzip.decompress(store.get(snapshot)))
    assert document["schema"] == 1 and document["config_version"] == 1

    # Nothing new: nothing handed over, and an unchanged queue is not snapshotted again,
    # however long it stays unchanged.
    before = every_key(store)
    for _ in range(3):
        later(team, 600)
        assert archive(archiver, team, changed=False) == 0
    assert every_key(store) == before
    assert len(store.versions(keys.CONFIG)) == 1 and len(template) == 2


def test_a_changed_queue_gets_a_snapshot_at_most_once_a_minute(
    team: Paika, archiver: Archiver
) -> None:
    store = archiver.shipper.store
    archive(archiver, team)
    run(team, "UALICE", 'submit name=a gpus=1 hours=1 priority=normal data=ready cmd="sleep 1"')
    later(team, 10)
    archive(archiver, team)  # too soon after the last one
    assert len(store.keys(keys.SNAPSHOTS)) == 1
    later(team, 60)
    archive(archiver, team)
    assert len(store.keys(keys.SNAPSHOTS)) == 2
    # A change no cycle saw (a command) is caught by the pass every few minutes.
    run(team, "UALICE", "cancel 1")
    later(team, 100)
    archive(archiver, team, changed=False)
    assert len(store.keys(keys.SNAPSHOTS)) == 2
    later(team, ArchivePace().snapshot_every_seconds)
    archive(archiver, team, changed=False)
    assert len(store.keys(keys.SNAPSHOTS)) == 3


def test_a_new_archiver_goes_on_where_the_last_one_stopped(
    team: Paika, archiver: Archiver, tmp_path: Path
) -> None:
    run(team, "UALICE", 'submit name=a gpus=1 hours=1 priority=normal data=ready cmd="sleep 1"')
    later(team, 120)
    archive(archiver, team)
    archiver.close()
    run(team, "UALICE", 'submit name=b gpus=1 hours=1 priority=normal data=ready cmd="sleep 1"')
    later(team, 120)
    again = open_archiver(team, tmp_path, archiver.shipper.store)  # the same spool folder
    try:
        archive(again, team)
        store = again.shipper.store
        assert store.keys("specs/") == [keys.spec(1), keys.spec(2)]
        assert all(len(store.versions(key)) == 1 for key in store.keys("specs/"))
        assert len(store.versions(keys.CONFIG)) == 1
        assert len(store.keys(keys.SNAPSHOTS)) == 2  # the queue changed: one more
    finally:
        again.spool.close()


def test_a_gap_in_row_ids_is_waited_for_then_passed_over() -> None:
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    rows = [(1, now), (2, now), (4, now), (5, now)]  # 3 is not committed yet
    assert settled(rows, 0, now, lambda row: row) == rows[:2]
    assert settled(rows, 2, now, lambda row: row) == []
    # Row 3 never came (rolled back): once the row after the gap is old enough, go on.
    assert settled(rows, 0, now + GAP_SETTLES, lambda row: row) == rows
    assert settled([(7, now)], 6, now, lambda row: row) == [(7, now)]


def test_yesterdays_audit_events_are_exported_once(team: Paika, archiver: Archiver) -> None:
    run(team, "UADMIN", "admin member add <@UBOB> team=vision")
    zone = team.policy.zone
    tomorrow = team.clock.now().astimezone(zone).date() + timedelta(days=1)
    later(team, 86400)
    assert archiver.daily(team.clock.now(), team.policy) >= 2
    assert archiver.daily(team.clock.now(), team.policy) == 0  # once
    archiver.shipper.flush()
    store = archiver.shipper.store
    day = tomorrow - timedelta(days=1)
    lines = [json.loads(line) for line in store.get(keys.audit(day)).decode().splitlines()]
    added = [line["target_id"] for line in lines if line["action"] == "member.add"]
    assert added == ["UALICE", "UBOB"], lines


def test_the_digest_is_archived_with_its_picture(team: Paika, archiver: Archiver) -> None:
    drawn: list[dict[str, object]] = []

    def picture(detail: object) -> bytes:
        assert isinstance(detail, dict)
        drawn.append(detail)
        return b"\x89PNG the picture"

    archiver.picture = picture
    at = team.clock.now()
    archiver.digest(
        Announcement("digest:2026-12-01", "digest", at, detail={"subject": "2026-12-01", "x": 1})
    )
    archiver.shipper.flush()
    store = archiver.shipper.store
    day = datetime(2026, 12, 1).date()
    assert json.loads(store.get(keys.digest(day, "json")))["x"] == 1
    assert store.get(keys.digest(day, "png")) == b"\x89PNG the picture" and drawn


def test_an_outage_past_the_threshold_is_told_once_and_its_end_once(
    team: Paika, tmp_path: Path
) -> None:
    """The store is a folder that cannot be written (a file stands where it should be)."""
    blocked = tmp_path / "objects"
    blocked.write_text("not a folder")
    spool = Spool(tmp_path / "spool", 2**20)
    store = LocalStore(blocked)
    shipper = Shipper(store, spool, team.clock.now)
    archiver = Archiver(team.engine, spool, shipper, pace=ArchivePace(down_alert_seconds=600))
    try:
        archive_pass = lambda: archiver.after_cycle(  # noqa: E731
            team.clock.now(), team.policy, waits=None, changed=True
        )
        archive_pass()
        shipper.flush()
        assert shipper.down_since is not None and len(spool) > 0
        for _ in range(4):
            later(team, 300)
            archive_pass()
            shipper.flush()
        blocked.unlink()
        later(team, 60)
        shipper.flush()
        assert shipper.down_since is None and len(spool) == 0
        for _ in range(2):
            later(team, 60)
            archive_pass()
    finally:
        spool.close()
    with Session(team.engine) as session:
        told = session.exec(select(Notice).order_by(Notice.created_at)).all()  # type: ignore[arg-type]
    kinds = [row.kind for row in told if row.kind.startswith("store_")]
    assert kinds == ["store_down", "store_back"]
    down = told[[row.kind for row in told].index("store_down")]
    assert down.detail is not None and down.detail["to_channel"] is True
    assert down.detail["detail"]["where"] == store.where and down.detail["detail"]["waiting"] > 0


def test_a_take_over_keeps_the_config_history_and_stores_nothing_twice(
    team: Paika, archiver: Archiver, tmp_path: Path
) -> None:
    """A new install restored from the store has the same config versions, the same one in
    force (the same policy file does not override it), and its archiver adds nothing the
    store already holds."""
    run(team, "UADMIN", 'config set scheduler.cycle_seconds=5 reason="faster cycle, 更快"')
    run(team, "UALICE", 'submit name=a gpus=1 hours=1 priority=normal data=ready cmd="sleep 1"')
    later(team, 120)
    archive(archiver, team)
    store = archiver.shipper.store
    assert [v.meta["paika-version"] for v in store.versions(keys.CONFIG)] == ["2", "1"]
    with Session(team.engine) as session:
        doc = state.build_document(session, team.policy, None, team.clock.now(), 2)

    fresh = make_engine(f"sqlite:///{tmp_path / 'new.db'}")
    upgrade(fresh)
    history = config_history(store)
    assert [(c.version, c.source) for c in history] == [(1, "file"), (2, "set")]
    assert history[1].reason == "faster cycle, 更快" and history[1].author == "UADMIN"
    state.restore(fresh, doc, team.clock.now(), history)
    settings = Settings(database_url=str(fresh.url), admins=("UADMIN",), config=None)
    new = Paika.start(settings, clock=team.clock, words=render)
    try:
        assert new.live.version == 2 and new.policy.scheduler.cycle_seconds == 5
        assert "faster cycle" in new.run("config history", "UADMIN").text
        again = open_archiver(new, tmp_path / "new", store)  # the same store, its own spool
        try:
            later(new, 120)
            archive(again, new)
        finally:
            again.spool.close()
        assert len(store.versions(keys.CONFIG)) == 2
        assert len(store.versions(keys.spec(1))) == 1
    finally:
        new.engine.dispose()
        fresh.dispose()
