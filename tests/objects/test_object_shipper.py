"""The shipper: the spool reaches the store in order and once, through an outage of the store."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from paika_test_s3 import S3Server, s3_store, wait_for

from scheduler.clock import ManualClock
from storage.objects import keys
from storage.objects.base import ObjectStore
from storage.objects.local import LocalStore
from storage.objects.shipper import Shipper
from storage.objects.spool import Kind, Spool

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DAY = T0.date()

States = list[tuple[datetime | None, str | None]]


@pytest.fixture
def own_server(aws_env: None) -> Iterator[S3Server]:
    """A server of this test's own, to kill without disturbing the others."""
    server = S3Server()
    server.start()
    yield server
    if server.running:
        server.kill()


def _work(n: int) -> tuple[str, bytes, dict[str, str], Kind]:
    """The n-th write of a busy scheduler: config versions, log lines and snapshots in turn."""
    if n % 3 == 0:
        return keys.CONFIG, f"fairness: {n}\n".encode(), {"paika-version": str(n)}, "config"
    if n % 3 == 1:
        return keys.decisions(DAY, n, n), f'{{"line": {n}}}\n'.encode(), {}, "decisions"
    return keys.snapshot(T0 + timedelta(seconds=n)), bytes([n % 256]) * 300, {}, "snapshot"


def _assert_everything_arrived_once_in_order(store: ObjectStore, written: int) -> None:
    config_versions = [int(v.meta["paika-version"]) for v in store.versions(keys.CONFIG)]
    assert config_versions == [n for n in reversed(range(written)) if n % 3 == 0]
    assert store.get(keys.CONFIG) == f"fairness: {config_versions[0]}\n".encode()
    once = [_work(n)[0] for n in range(written) if n % 3]
    assert store.keys(keys.DECISIONS) + store.keys(keys.SNAPSHOTS) == sorted(once)
    for key in once:
        assert len(store.versions(key)) == 1, key


@pytest.mark.parametrize("versioned", [True, False], ids=["s3-versioned", "s3-stamped"])
def test_killing_the_store_mid_run_loses_nothing_and_writes_nothing_twice(
    own_server: S3Server, tmp_path: Path, versioned: bool
) -> None:
    store = s3_store(own_server.url, versioned=versioned)
    spool = Spool(tmp_path / "spool", 64 << 20)
    states: States = []
    shipper = Shipper(store, spool, lambda: datetime.now(UTC), lambda *s: states.append(s))
    shipper.start()
    total, added = 90, 0
    more = threading.Event()

    def produce() -> None:
        # The scheduler goes on adding work whatever the store does; it never waits for it.
        nonlocal added
        for n in range(total):
            if n in (30, 60):
                more.wait(30)
                more.clear()
            key, data, meta, kind = _work(n)
            spool.add(key, data, meta, kind=kind)
            added += 1
            shipper.wake()

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        wait_for(lambda: added == 30 and shipper.sent + shipper.skipped >= 20, what="sending")
        own_server.kill()
        more.set()  # entries keep coming while the store is gone
        # (down_since is set a moment before on_state is told: wait for what is asserted)
        wait_for(lambda: len(states) >= 1, what="the shipper to report the outage")
        wait_for(lambda: added == 60, what="the producer")
        assert len(spool) >= 30
        assert states[0][0] is not None and states[0][1]
        pending = len(spool)

        own_server.start()  # on the same port, with the same buckets
        more.set()
        shipper.wake()
        wait_for(lambda: added == total and len(spool) == 0, 30, "the spool to empty")
        wait_for(lambda: len(states) >= 2, what="the shipper to report the store back")
    finally:
        more.set()
        producer.join()
        shipper.stop()
    assert pending >= 30
    assert [s[0] is None for s in states] == [False, True]
    assert states[-1] == (None, None)
    _assert_everything_arrived_once_in_order(store, total)


def test_an_entry_stored_before_a_crash_is_not_stored_again(
    store: ObjectStore, tmp_path: Path
) -> None:
    spool = Spool(tmp_path / "spool", 1 << 20)
    spool.add(keys.CONFIG, b"a: 1\n", {"paika-version": "1"}, kind="config")
    Shipper(store, spool, lambda: T0).flush()
    spool.add(keys.CONFIG, b"a: 2\n", {"paika-version": "2"}, kind="config")
    spool.add(keys.spec(7), b"{}", kind="spec")
    # The store took the entry, then paika died before marking it done.
    crashed = spool.peek()
    assert crashed is not None
    store.put(crashed.key, crashed.data, crashed.meta)
    spool.close()

    restarted = Shipper(store, Spool(tmp_path / "spool", 1 << 20), lambda: T0)
    assert restarted.flush() == 2
    assert (restarted.skipped, restarted.sent) == (1, 1)
    assert [v.meta["paika-version"] for v in store.versions(keys.CONFIG)] == ["2", "1"]
    assert len(store.versions(keys.spec(7))) == 1


def test_the_same_content_with_a_new_reason_is_a_new_version(
    store: ObjectStore, tmp_path: Path
) -> None:
    spool = Spool(tmp_path / "spool", 1 << 20)
    shipper = Shipper(store, spool, lambda: T0)
    for version in ("1", "2"):
        spool.add(keys.CONFIG, b"a: 1\n", {"paika-version": version}, kind="config")
        shipper.flush()
    assert [v.meta["paika-version"] for v in store.versions(keys.CONFIG)] == ["2", "1"]


def test_the_outage_is_reported_once_when_it_starts_and_once_when_it_ends(
    own_server: S3Server, tmp_path: Path
) -> None:
    store = s3_store(own_server.url, versioned=True)
    spool = Spool(tmp_path / "spool", 1 << 20)
    clock = ManualClock(T0)
    states: States = []
    shipper = Shipper(store, spool, clock.now, lambda *s: states.append(s))
    own_server.kill()
    spool.add(keys.CONFIG, b"a", kind="config")
    assert shipper.flush() == 0
    clock.advance(timedelta(minutes=3))
    assert shipper.flush() == 0
    assert shipper.down_since == T0 and shipper.last_error
    assert len(states) == 1 and states[0][0] == T0
    own_server.start()
    assert shipper.flush() == 1
    assert (shipper.down_since, shipper.last_error) == (None, None)
    assert states[1:] == [(None, None)]


def test_a_store_that_comes_back_with_nothing_to_send_is_seen_back(
    own_server: S3Server, tmp_path: Path
) -> None:
    store = s3_store(own_server.url, versioned=True)
    spool = Spool(tmp_path / "spool", 1 << 20)
    shipper = Shipper(store, spool, lambda: T0)
    own_server.kill()
    spool.add(keys.CONFIG, b"a", kind="config")
    shipper.flush()
    assert shipper.down_since == T0
    spool.done(spool.peek())  # type: ignore[arg-type]
    shipper.flush()
    assert shipper.down_since == T0
    own_server.start()
    shipper.flush()
    assert shipper.down_since is None


def test_an_entry_no_store_can_hold_does_not_block_the_rest(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "objects")
    spool = Spool(tmp_path / "spool", 1 << 20)
    spool.add("config/x.versions/policy.yml", b"a", kind="config")  # the folder's own marker
    spool.add(keys.CONFIG, b"b", kind="config")
    shipper = Shipper(store, spool, lambda: T0)
    assert shipper.flush() == 2
    assert (shipper.refused, shipper.sent, len(spool)) == (1, 1, 0)
    assert store.get(keys.CONFIG) == b"b"


def test_what_the_thread_did_not_send_is_sent_by_a_flush_after_stop(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "objects")
    spool = Spool(tmp_path / "spool", 1 << 20)
    shipper = Shipper(store, spool, lambda: T0)
    shipper.start()
    shipper.stop()
    for n in range(3):
        spool.add(keys.spec(n), b"{}", kind="spec")
    assert shipper.flush() == 3
    assert store.keys("specs/") == [keys.spec(n) for n in range(3)]
