"""Finding queue-and-cluster snapshots in the store by moment (storage/objects/snapshots.py),
on the local folder and on S3 (moto's server), as `paika state show --at TIME` does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from storage.objects import keys, snapshots
from storage.objects.base import ObjectStore

DAY = datetime(2026, 11, 30, tzinfo=UTC)


def taken(store: ObjectStore, *moments: datetime) -> list[str]:
    written = []
    for moment in moments:
        key = keys.snapshot(moment)
        store.put(key, f"snapshot of {moment.isoformat()}".encode())
        written.append(key)
    return written


def test_the_newest_snapshot_at_or_before_a_moment(store: ObjectStore) -> None:
    assert snapshots.latest_at(store, DAY) is None
    old, evening, noon, morning = taken(
        store,
        DAY - timedelta(days=20, hours=-3),
        DAY - timedelta(hours=2),
        DAY + timedelta(hours=12),
        DAY + timedelta(hours=8, minutes=30),
    )
    # Something else under a day's prefix is passed over.
    store.put(keys.snapshot_day(DAY.date()) + "notes.txt", b"not a snapshot")
    assert snapshots.latest_at(store, DAY + timedelta(hours=9)) == morning
    assert snapshots.latest_at(store, DAY + timedelta(hours=12)) == noon  # at it counts
    assert snapshots.latest_at(store, DAY + timedelta(hours=8)) == evening  # the day before
    assert snapshots.latest_at(store, DAY - timedelta(days=3)) == old  # days without any
    assert snapshots.latest_at(store, DAY - timedelta(days=30)) is None
    # A moment in another zone is the same moment.
    shanghai = (DAY + timedelta(hours=9)).astimezone(ZoneInfo("Asia/Shanghai"))
    assert snapshots.latest_at(store, shanghai) == morning
    expected = (DAY + timedelta(hours=8, minutes=30)).isoformat()
    assert snapshots.read(store, morning) == f"snapshot of {expected}".encode()


def test_latest_finds_the_newest_even_stamped_a_little_ahead_of_this_clock(
    store: ObjectStore,
) -> None:
    now = datetime.now(UTC)
    taken(store, now - timedelta(days=2), now - timedelta(minutes=5))
    (ahead,) = taken(store, now + timedelta(hours=20))  # an accelerated demo's clock
    assert snapshots.latest_at(store, None) == ahead
    assert snapshots.latest_at(store, now + timedelta(days=5 * 365)) == ahead  # far ahead
    assert snapshots.latest_at(store, now) != ahead


def test_the_search_stops_after_its_bound(store: ObjectStore) -> None:
    taken(store, DAY - timedelta(days=snapshots.SEARCH_DAYS + 1))
    assert snapshots.latest_at(store, DAY) is None
