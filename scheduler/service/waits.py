"""Every waiting job's reason and ETA, and the queue listing, computed once per change of
state, not per request.

Working out the reasons runs the whole policy with explanations (about 100 ms at 2,000 jobs),
and listing the queue loads every job (about 60 ms); every `/gpu queue`, `status`, `submit`
and Home tab needs one or both. The board keeps the last result of each with the stamp of
the state it was computed from (storage.queries.stamps) and hands it to any request whose
state that stamp covers, for as long as the policy's own clock would not change it (one
scheduling cycle). One computation of each runs at a time: in a burst of fifty commands,
those that arrive while it runs wait for it and mostly find their own state covered by it,
instead of each doing the work again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlmodel import Session

from scheduler.policy.plan import Wait
from storage.queries.stamps import PlanningStamp, planning_stamp

T = TypeVar("T")
WAITS = "waits"


@dataclass(frozen=True)
class _Computed:
    stamp: PlanningStamp
    at: datetime
    policy_id: int
    value: Any


class WaitsBoard:
    """The latest reasons and ETAs (and queue listing), shared by every command of a process."""

    def __init__(self) -> None:
        self._latest: dict[str, _Computed] = {}
        self._computing: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.runs = 0  # how many times the policy ran (benchmarks and tests read it)
        self.listings = 0  # how many times the queue was listed from the database

    def waits(
        self,
        session: Session,
        now: datetime,
        policy: object,
        max_age: timedelta,
        compute: Callable[[], dict[int, Wait]],
    ) -> dict[int, Wait]:
        """The waits for the state `session` sees at `now`: reused when covered, else computed
        (in `session`, by `compute`)."""
        return dict(self.shared(WAITS, session, now, policy, max_age, compute))

    def shared(
        self,
        key: str,
        session: Session,
        now: datetime,
        policy: object,
        max_age: timedelta,
        compute: Callable[[], T],
    ) -> T:
        """The result `key` for the state `session` sees: reused when covered, else computed.
        The caller must not change what it gets: others share it."""
        stamp = planning_stamp(session=session)
        found = self._reusable(key, stamp, now, policy, max_age)
        if found is not None:
            return found.value  # type: ignore[no-any-return]
        with self._lock(key):
            found = self._reusable(key, stamp, now, policy, max_age)  # computed while we waited
            if found is not None:
                return found.value  # type: ignore[no-any-return]
            # Read again: the run below sees at least this state, so it also serves everyone
            # whose change was committed while this request waited for its turn.
            stamp = planning_stamp(session=session)
            value = compute()
            self._count(key)
            self._latest[key] = _Computed(stamp, now, id(policy), value)
            return value

    def peek(
        self, key: str, session: Session, now: datetime, policy: object, max_age: timedelta
    ) -> Any:
        """The kept result `key` if it covers the state `session` sees, else None (nothing
        is computed)."""
        found = self._reusable(key, planning_stamp(session=session), now, policy, max_age)
        return None if found is None else found.value

    def forget(self) -> None:
        """Drop the kept results (the policy file changed, or a test wants a fresh run)."""
        self._latest.clear()

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._computing.setdefault(key, threading.Lock())

    def _count(self, key: str) -> None:
        if key == WAITS:
            self.runs += 1
        else:
            self.listings += 1

    def _reusable(
        self, key: str, stamp: PlanningStamp, now: datetime, policy: object, max_age: timedelta
    ) -> _Computed | None:
        latest = self._latest.get(key)
        if latest is None or latest.policy_id != id(policy):
            return None
        if not latest.stamp.covers(stamp) or not timedelta(0) <= now - latest.at < max_age:
            return None
        return latest
