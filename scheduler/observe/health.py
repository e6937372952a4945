"""Is `paika up` healthy? Its periodic work must keep running.

The leader must have finished a cycle within STALE_CYCLES cycle times, plus the poll
timeout (a cycle waits that long for a silent host) and a margin; a
standby instance (another one holds the leader lock) must have checked for leadership that
recently. A process that just started has the same bound as a grace period before its
first cycle. Ages are measured on the monotonic clock, so a clock change cannot fake them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from scheduler.observe.watch import CycleWatch

STALE_CYCLES = 3
MARGIN_S = 2.0


def stale_after(cycle_seconds: float, poll_timeout_seconds: float) -> float:
    """Seconds without a cycle after which the process is unhealthy."""
    return STALE_CYCLES * cycle_seconds + poll_timeout_seconds + MARGIN_S


@dataclass(frozen=True)
class Health:
    """The answer of GET /healthz: ok (200) or not (503), and why."""

    ok: bool
    reason: str
    leader: bool
    last_cycle_at: str | None  # ISO 8601, UTC
    last_cycle_age_s: float | None
    stale_after_s: float

    def as_json(self) -> dict[str, object]:
        return {
            "status": "ok" if self.ok else "unhealthy",
            "reason": self.reason,
            "leader": self.leader,
            "last_cycle_at": self.last_cycle_at,
            "last_cycle_age_s": self.last_cycle_age_s,
            "stale_after_s": self.stale_after_s,
        }


def check(watch: CycleWatch, bound: float, now: float | None = None) -> Health:
    """The health of the process `watch` watches, at monotonic time `now`, with `bound`
    seconds (stale_after) as the longest a cycle may be missed."""
    now = time.monotonic() if now is None else now
    seen = watch.last_cycle
    cycle_age = None if seen is None else round(now - seen.at_monotonic, 3)
    at = None if seen is None else datetime.fromtimestamp(seen.at_wall, UTC).isoformat()

    def health(ok: bool, reason: str) -> Health:
        return Health(ok, reason, watch.leading, at, cycle_age, bound)

    up_for = now - watch.started_monotonic
    if watch.last_tick_monotonic is None:
        if up_for <= bound:
            return health(True, f"starting: up for {up_for:.0f} s, no cycle yet")
        return health(
            False, f"no cycle has run in the {up_for:.0f} s since start (bound {bound:g} s)"
        )
    if not watch.leading:
        tick_age = now - watch.last_tick_monotonic
        if tick_age <= bound:
            return health(True, "standby: another instance holds the leader lock")
        return health(
            False,
            f"standby, and the leader lock was last checked {tick_age:.0f} s ago (bound {bound:g} s)",
        )
    if cycle_age is None:
        if up_for <= bound:
            return health(True, "leading: the first cycle is running")
        return health(
            False,
            f"leading, but no cycle finished in the {up_for:.0f} s since start (bound {bound:g} s)",
        )
    if cycle_age <= bound:
        return health(True, f"leading: the last cycle finished {cycle_age:.1f} s ago")
    return health(
        False, f"leading, but the last cycle finished {cycle_age:.0f} s ago (bound {bound:g} s)"
    )
