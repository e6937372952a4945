"""Finding queue-and-cluster snapshots in the object store (keys.snapshot: one object per
snapshot, under a prefix per UTC day), for `paika state show | diff | restore`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from storage.objects import keys
from storage.objects.base import ObjectStore

# How many days back from the asked moment a search walks before it says there is none
# (an install archives at least every few minutes while it runs).
SEARCH_DAYS = 400
# The newest of all is looked for from a little after today: an install whose clock runs
# ahead (the demo's accelerated time, a skewed host) stamps snapshots in our future.
AHEAD_DAYS = 2


def latest_at(store: ObjectStore, at: datetime | None = None) -> str | None:
    """The key of the newest snapshot taken at or before `at` (None: the newest of all),
    walking day prefixes backwards from `at`'s day; None when there is none."""
    # No day after a little past today holds one: a moment far ahead starts from there.
    newest_day = datetime.now(UTC).date() + timedelta(days=AHEAD_DAYS)
    at = datetime.max.replace(tzinfo=UTC) if at is None else at.astimezone(UTC)
    day = min(at.date(), newest_day)
    for _ in range(SEARCH_DAYS):
        found = [
            key
            for key in store.keys(keys.snapshot_day(day))
            if _is_snapshot(key) and keys.snapshot_time(key) <= at
        ]
        if found:
            return max(found, key=keys.snapshot_time)
        day -= timedelta(days=1)
    return None


def _is_snapshot(key: str) -> bool:
    """Only keys paika wrote (a stray object under the prefix is passed over)."""
    if not key.endswith(".json.gz"):
        return False
    try:
        keys.snapshot_time(key)
    except ValueError:
        return False
    return True


def read(store: ObjectStore, key: str) -> bytes:
    """The snapshot's bytes (written once, so its newest version is its only one)."""
    return store.get(key)
