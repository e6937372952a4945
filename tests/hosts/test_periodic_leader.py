"""Two `paika up` against one database: only the instance holding the lock runs cycles."""

from __future__ import annotations

from sqlalchemy import Engine

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.cycle import Cycle, CycleResult
from scheduler.notices.outbox import RecordingAnnouncer
from scheduler.periodic import Periodic
from storage.db import make_engine


class CountingCycle(Cycle):
    """A cycle that counts its runs instead of polling anything (a hand-written fake)."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock_ = clock
        self.runs = 0

    def run_once(self) -> CycleResult:
        self.runs += 1
        return CycleResult(self.clock_.now())


def test_only_one_instance_schedules_and_the_other_takes_over(
    paika: Paika, engine: Engine, clock: ManualClock
) -> None:
    other_engine = make_engine(engine.url.render_as_string(hide_password=False))
    first_cycle, second_cycle = CountingCycle(clock), CountingCycle(clock)
    first = Periodic(paika.engine, paika.policy, clock, first_cycle, RecordingAnnouncer())
    second = Periodic(other_engine, paika.policy, clock, second_cycle, RecordingAnnouncer())
    try:
        for _ in range(5):
            first.tick()
            second.tick()
        assert (first_cycle.runs, second_cycle.runs) == (5, 0)
        first.lock.release()  # the first instance stops
        for _ in range(3):
            second.tick()
        assert second_cycle.runs == 3
    finally:
        first.lock.release()
        second.lock.release()
        other_engine.dispose()


def test_the_alert_run_raises_what_is_due_once_and_only_on_the_leader(
    paika: Paika, engine: Engine, clock: ManualClock
) -> None:
    from datetime import timedelta

    assert paika.run("admin member add <@UOWNER> team=vision role=approver", "UADMIN").ok
    expires = (clock.now().astimezone(paika.policy.zone) + timedelta(days=10)).date()
    assert paika.run(
        f"admin quota add team=vision hours=100 expires={expires} owner=<@UOWNER>", "UADMIN"
    ).ok
    # The digest is due at this very minute in the policy's time zone.
    local = clock.now().astimezone(paika.policy.zone)
    policy = paika.policy.model_copy(
        update={"digest": paika.policy.digest.model_copy(update={"time": f"{local:%H:%M}"})}
    )
    other_engine = make_engine(engine.url.render_as_string(hide_password=False))
    leading, following = RecordingAnnouncer(), RecordingAnnouncer()
    first = Periodic(paika.engine, policy, clock, CountingCycle(clock), leading)
    second = Periodic(other_engine, policy, clock, CountingCycle(clock), following)
    try:
        for _ in range(3):
            first.alerts()
            second.alerts()
            clock.advance(timedelta(minutes=1))
        assert sorted(leading.kinds()) == ["digest", "quota_expiry"]
        assert following.announcements == []
        [quota] = [a for a in leading.announcements if a.kind == "quota_expiry"]
        assert quota.to_users == ("UOWNER",) and "14" in quota.key
    finally:
        first.lock.release()
        second.lock.release()
        other_engine.dispose()
