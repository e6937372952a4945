"""Periodic work under APScheduler 3.x: the scheduling cycle and housekeeping.

Every job is registered with `max_instances=1, coalesce=True`: a slow cycle is never run
twice at once, and runs missed while paika was down or busy collapse into one (within
`misfire_grace_time`). Only the instance holding the leader lock does the work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from apscheduler.executors.pool import ThreadPoolExecutor as JobPool
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy import Engine

from scheduler.alerts.idle import act_on_idle, check_idle
from scheduler.alerts.overrun import check_overrun, enforce_limits
from scheduler.alerts.quota import raise_quota_alerts
from scheduler.clock import Clock
from scheduler.config import PolicyConfig
from scheduler.cycle import Cycle, CycleResult
from scheduler.digest.schedule import raise_digest
from scheduler.hosts.inventory import prune_samples
from scheduler.notices.kinds import EVENT_KINDS
from scheduler.notices.outbox import Announcer, Courier
from scheduler.observe.watch import CycleWatch
from storage.db import session_scope
from storage.leader import LeaderLock
from storage.queries.notices import prune_old
from storage.queries.slack import prune_deliveries

if TYPE_CHECKING:
    from scheduler.archive.archiver import Archiver

log = logging.getLogger(__name__)

ALERTS_EVERY_S = 60
# Job and host events, delivered or given up (GIVE_UP_AFTER) long ago.
KEEP_EVENTS = timedelta(days=30)


class Periodic:
    """Owns the APScheduler instance, the leader lock and the outbox's courier.

    Only the leader runs the cycle and raises alerts; every instance's courier delivers
    the outbox (each notice is taken for a lease, so one instance sends it).
    """

    def __init__(
        self,
        engine: Engine,
        policy: PolicyConfig,
        clock: Clock,
        cycle: Cycle,
        announcer: Announcer,
        *,
        watch: CycleWatch | None = None,
        after_cycle: Callable[[CycleResult], None] | None = None,
        archiver: Archiver | None = None,
    ) -> None:
        self.engine, self.clock, self.cycle = engine, clock, cycle
        self._policy = policy
        self.announcer = announcer  # the face's: Slack's, or the console's (bot/)
        # What the health check and the metrics read; `after_cycle` counts each cycle.
        self.watch = watch or CycleWatch()
        self.after_cycle = after_cycle
        self.courier = Courier(engine, self.announcer, clock)
        # The team's memory in the object store (scheduler/archive/): None keeps none.
        self.archiver = archiver
        # The lease outlives a few missed cycles, so a slow cycle does not hand over leadership.
        self.lock = LeaderLock(
            engine, ttl=timedelta(seconds=max(30.0, policy.scheduler.cycle_seconds * 4))
        )
        # APScheduler's own default pool (10 threads), named for paika up's thread list.
        pool = JobPool(10, pool_kwargs={"thread_name_prefix": "paika-scheduling"})
        self.scheduler = BackgroundScheduler(timezone="UTC", executors={"default": pool})
        self.leading = False

    @property
    def policy(self) -> PolicyConfig:
        """The cycle's policy, which follows the config version in force (alerts, the digest
        and pruning read the same one); the one given when the cycle keeps none."""
        current = getattr(self.cycle, "policy", None)
        return current if isinstance(current, PolicyConfig) else self._policy

    def start(self) -> None:
        """Start the archive's shipper, the courier and the scheduling, in that order (`paika
        up` starts each as a part of its own: scheduler/running.py)."""
        if self.archiver is not None:
            self.archiver.shipper.start()
        self.courier.start()
        self.start_scheduling()

    def stop(self) -> None:
        """Stop scheduling and delivering, and let the lock go; then the archive and the
        cycle's connections (the reverse of start)."""
        self.stop_scheduling()
        self.courier.stop()
        if self.archiver is not None:
            self.archiver.close()
        self.cycle.close()

    def start_scheduling(self) -> None:
        """Register the jobs and start the background scheduler.

        The cycle's interval is read here only: a config version that changes
        `scheduler.cycle_seconds` takes effect at the next start (everything else the
        cycle reads follows the version in force within one cycle)."""
        every = self.policy.scheduler.cycle_seconds
        common = {"replace_existing": True, "max_instances": 1, "coalesce": True}
        self.scheduler.add_job(
            self.tick,
            "interval",
            seconds=every,
            id="cycle",
            misfire_grace_time=int(every * 3) + 1,
            **common,
        )
        self.scheduler.add_job(
            self.prune, "interval", hours=1, id="prune-samples", misfire_grace_time=3600, **common
        )
        # Alerts and the digest are checked every minute; what is due is claimed once in SQL,
        # so a run missed while paika was down is caught up by the next one (the digest only
        # within `digest.late_minutes`), and nothing is sent twice.
        self.scheduler.add_job(
            self.alerts,
            "interval",
            seconds=ALERTS_EVERY_S,
            id="alerts",
            misfire_grace_time=ALERTS_EVERY_S * 5,
            **common,
        )
        self.scheduler.start()

    def stop_scheduling(self) -> None:
        """Stop scheduling once the jobs running now are done, and let the leader lock go."""
        self.scheduler.shutdown(wait=True)
        self.lock.release()

    def tick(self) -> None:
        """One cycle, if this instance leads; then its notices go out at once."""
        leading = self._lead()
        self.watch.ticked(leading)
        if not leading:
            return
        result = self.cycle.run_once()
        self.watch.cycle_done(result)
        if self.after_cycle is not None:
            self.after_cycle(result)
        if result.events or result.notices:
            self.courier.wake()
        if self.archiver is not None:
            self._archive(result)

    def _archive(self, result: CycleResult) -> None:
        """Hand what the cycle changed to the object store's spool (never waits for the store;
        an error here is logged and the next cycle tries again)."""
        assert self.archiver is not None
        changed = bool(result.started or result.requeued or result.preempted or result.events)
        try:
            self.archiver.after_cycle(
                result.at,
                self.policy,
                waits=result.plan.waits if result.plan is not None else None,
                changed=changed,
                config_version=self.config_version,
            )
        except Exception:
            log.exception("archiving after the cycle failed; the next cycle tries again")

    def alerts(self) -> None:
        """Raise what is due (idle GPUs, reclaim, quota thresholds, the digest), then deliver."""
        if not self._lead():
            return
        now = self.clock.now()
        steps: tuple[tuple[str, Callable[[], object]], ...] = (
            ("idle GPUs", lambda: check_idle(self.engine, self.policy, now)),
            ("reclaim", lambda: act_on_idle(self.engine, self.policy, now)),
            ("overrun", lambda: check_overrun(self.engine, self.policy, now)),
            ("estimate limit", lambda: enforce_limits(self.engine, self.policy, now)),
            ("quota alerts", lambda: raise_quota_alerts(self.engine, self.policy, now)),
            ("digest", lambda: self._digest(now)),
            ("audit export", lambda: self.archiver and self.archiver.daily(now, self.policy)),
            ("delivery", self.courier.deliver_now),
        )
        for name, step in steps:
            try:
                step()
            except Exception:  # one failing check must not hold up the others
                log.exception("periodic %s failed", name)

    def _digest(self, now: datetime) -> None:
        """Raise the day's digest when due; the archive keeps its data and picture."""
        if not self.policy.digest.enabled:
            return
        announcement = raise_digest(self.engine, self.policy, now)
        if announcement is not None and self.archiver is not None:
            self.archiver.digest(announcement)

    @property
    def config_version(self) -> int | None:
        """The config version in force, when the cycle follows the stored versions."""
        live = getattr(self.cycle, "live", None)
        return getattr(live, "version", None)

    def prune(self) -> None:
        """Forget GPU samples past the retention window, old Slack delivery ids and job and
        host events delivered long ago (the jobs' own history keeps what happened)."""
        if not self._lead():
            return
        now = self.clock.now()
        with session_scope(self.engine) as session:
            gone = prune_samples(session, self.policy, now)
            # Slack retries a delivery for minutes; a day of event ids is plenty to skip them.
            deliveries = prune_deliveries(session=session, before=now - timedelta(days=1))
            events = prune_old(session=session, kinds=sorted(EVENT_KINDS), before=now - KEEP_EVENTS)
        # Said when something went: an hour that pruned nothing is no news.
        log.log(
            logging.INFO if gone or deliveries or events else logging.DEBUG,
            "pruned %d GPU samples, %d Slack delivery ids and %d old job and host events",
            gone,
            deliveries,
            events,
        )

    def _lead(self) -> bool:
        leading = self.lock.acquire(self.clock.now())
        if leading != self.leading:
            log.info("this instance %s the scheduler", "now runs" if leading else "no longer runs")
            self.leading = leading
        return leading
