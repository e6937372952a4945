"""Every waiting job's reason and ETA, computed once per change of state, not per request.

Working them out runs the whole policy with explanations (about 150 ms at 2,000 jobs), and
every `/gpu queue`, `status`, `submit` and Home tab needs them. The board keeps the last
result with the stamp of the state it was computed from (storage.queries.stamps) and hands
it to any request whose state that stamp covers, for as long as the policy's own clock
would not change it (one scheduling cycle). One computation runs at a time: in a burst of
fifty commands, those that arrive while it runs wait for it and mostly find their own
state covered by it, instead of each running the policy again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session

from scheduler.policy.plan import Wait
from storage.queries.stamps import PlanningStamp, planning_stamp

Compute = Callable[[], dict[int, Wait]]


@dataclass(frozen=True)
class _Computed:
    stamp: PlanningStamp
    at: datetime
    policy_id: int
    waits: dict[int, Wait]


class WaitsBoard:
    """The latest reasons and ETAs, shared by every command of one process."""

    def __init__(self) -> None:
        self._latest: _Computed | None = None
        self._computing = threading.Lock()  # one policy run at a time
        self.runs = 0  # how many times the policy ran (benchmarks and tests read it)

    def waits(
        self, session: Session, now: datetime, policy: object, max_age: timedelta, compute: Compute
    ) -> dict[int, Wait]:
        """The waits for the state `session` sees at `now`: reused when covered, else computed
        (in `session`, by `compute`)."""
        stamp = planning_stamp(session=session)
        found = self._reusable(stamp, now, policy, max_age)
        if found is not None:
            return found
        with self._computing:
            found = self._reusable(stamp, now, policy, max_age)  # computed while we waited
            if found is not None:
                return found
            # Read again: the run below sees at least this state, so it also serves everyone
            # whose change was committed while this request waited for its turn.
            stamp = planning_stamp(session=session)
            waits = compute()
            self.runs += 1
            self._latest = _Computed(stamp, now, id(policy), waits)
            return dict(waits)

    def forget(self) -> None:
        """Drop the kept result (the policy file changed, or a test wants a fresh run)."""
        self._latest = None

    def _reusable(
        self, stamp: PlanningStamp, now: datetime, policy: object, max_age: timedelta
    ) -> dict[int, Wait] | None:
        latest = self._latest
        if latest is None or latest.policy_id != id(policy):
            return None
        if not latest.stamp.covers(stamp) or not timedelta(0) <= now - latest.at < max_age:
            return None
        return dict(latest.waits)
