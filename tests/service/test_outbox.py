"""The outbox: of senders racing for the same notices each is sent once; a failed sending
rests longer each time; a notice a day old is given up; the courier outlives a database
that is away; old job and host events are pruned, alerts kept."""

from __future__ import annotations

import threading
from datetime import timedelta

from sqlalchemy import Engine
from sqlmodel import select

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.notices.events import Event, EventCode, EventKind, record
from scheduler.notices.outbox import (
    FIRST_RETRY,
    GIVE_UP_AFTER,
    LONGEST_WAIT,
    Announcement,
    Courier,
    RecordingAnnouncer,
    claim,
    deliver_pending,
    retry_wait,
)
from scheduler.periodic import KEEP_EVENTS, Periodic
from storage.db import make_engine, session_scope
from storage.models import Notice


def _tell(engine: Engine, clock: ManualClock, count: int) -> None:
    with session_scope(engine) as session:
        for i in range(count):
            code = EventCode.START_CONFIRMED
            record(session, Event(EventKind.JOB_STARTED, clock.now(), code, i, owner="UALICE"))


def test_senders_racing_for_the_same_notices_send_each_once(
    paika: Paika, clock: ManualClock
) -> None:
    _tell(paika.engine, clock, 30)
    other = make_engine(paika.engine.url.render_as_string(hide_password=False))
    announcers = [RecordingAnnouncer(), RecordingAnnouncer()]
    start = threading.Barrier(2)

    def send(engine: Engine, announcer: RecordingAnnouncer) -> None:
        start.wait()
        deliver_pending(engine, announcer, clock.now())

    try:
        senders = [
            threading.Thread(target=send, args=(engine, announcer))
            for engine, announcer in zip((paika.engine, other), announcers, strict=True)
        ]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(timeout=120)
    finally:
        other.dispose()
    sent = [a.detail["job_id"] for announcer in announcers for a in announcer.announcements]
    assert sorted(sent) == list(range(30))
    with session_scope(paika.engine) as session:
        assert all(n.sent_at is not None for n in session.exec(select(Notice)).all())


def test_a_failed_sending_rests_longer_each_time_up_to_ten_minutes() -> None:
    waits = [retry_wait(failures) for failures in range(12)]
    assert waits[:4] == [FIRST_RETRY, FIRST_RETRY * 2, FIRST_RETRY * 4, FIRST_RETRY * 8]
    assert waits[-1] == LONGEST_WAIT and waits == sorted(waits)
    assert retry_wait(10_000) == LONGEST_WAIT  # no overflow however long Slack is away


def test_a_notice_nobody_could_send_for_a_day_is_given_up(paika: Paika, clock: ManualClock) -> None:
    _tell(paika.engine, clock, 1)
    announcer = RecordingAnnouncer()
    announcer.failing = True
    assert deliver_pending(paika.engine, announcer, clock.now()) == 0
    announcer.failing = False
    late = clock.now() + GIVE_UP_AFTER + timedelta(seconds=1)
    assert deliver_pending(paika.engine, announcer, late) == 0
    assert announcer.announcements == []


def test_the_courier_outlives_a_database_that_is_away(clock: ManualClock) -> None:
    away = make_engine("postgresql+psycopg://paika:wrong@127.0.0.1:1/none?connect_timeout=1")
    try:
        courier = Courier(away, RecordingAnnouncer(), clock)
        assert courier.deliver_now() == 0  # logged; the notices wait in the outbox
    finally:
        away.dispose()


def test_old_job_and_host_events_are_pruned_and_alerts_kept(
    paika: Paika, clock: ManualClock
) -> None:
    _tell(paika.engine, clock, 2)
    with session_scope(paika.engine) as session:
        claim(
            session,
            Announcement("quota-expiry:1:2026-12-01:7d", "quota_expiry", clock.now()),
        )
    deliver_pending(paika.engine, RecordingAnnouncer(), clock.now())
    clock.advance(KEEP_EVENTS + timedelta(minutes=1))
    _tell(paika.engine, clock, 1)  # a fresh one, not yet sent, stays
    periodic = Periodic(paika.engine, paika.policy, clock, _NoCycle(clock), RecordingAnnouncer())
    try:
        periodic.prune()
    finally:
        periodic.lock.release()
    with session_scope(paika.engine) as session:
        kinds = sorted((n.kind, n.sent_at is None) for n in session.exec(select(Notice)).all())
    assert kinds == [("job_started", True), ("quota_expiry", False)]


class _NoCycle:
    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock

    def run_once(self) -> object:
        raise AssertionError("pruning runs no cycle")

    def close(self) -> None:
        pass
