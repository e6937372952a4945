"""Quota alerts: each threshold exactly once, as the clock moves, across restarts, with two
instances racing, after a week of downtime, through a failing announcer, and afresh after a
renewal or a top-up; each alert names the jobs that the quota would cut off."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

import pytest
from sqlalchemy import Engine
from sqlmodel import Session, select

from bot.notice_words import sentence
from scheduler import lifecycle
from scheduler.alerts.quota import EXPIRY_KIND, USED_KIND, acknowledge, raise_quota_alerts
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.notices.outbox import Announcement, RecordingAnnouncer, deliver_pending
from storage.db import make_engine
from storage.models import Allocation, AuditEvent, Gpu, Host, Job, JobState, LedgerEntry, Notice

OWNER = "UQOWNER1"


def ok(paika: Paika, user: str, text: str) -> str:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply.text


@pytest.fixture
def vision(paika: Paika) -> Paika:
    ok(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    ok(paika, "UADMIN", f"admin member add <@{OWNER}> team=vision role=approver")
    ok(paika, "UADMIN", "admin member add <@UNLP> team=nlp")
    return paika


def grant(paika: Paika, expires: date, hours: float = 100, gpu_type: str = "A100-80GB") -> None:
    ok(
        paika,
        "UADMIN",
        f"admin quota add team=vision type={gpu_type} hours={hours:g} expires={expires} owner=<@{OWNER}>",
    )


def raise_and_deliver(paika: Paika, announcer: RecordingAnnouncer) -> list[Announcement]:
    now = paika.clock.now()
    raised = raise_quota_alerts(paika.engine, paika.policy, now)
    deliver_pending(paika.engine, announcer, now)
    return raised


def alerts(engine: Engine) -> list[Notice]:
    with Session(engine) as session:
        return list(session.exec(select(Notice).order_by(Notice.key)).all())


def local(year: int, month: int, day: int, hour: int = 12, minute: int = 0) -> datetime:
    """A moment in the policy's zone (Asia/Shanghai, UTC+8), as UTC."""
    return datetime(year, month, day, hour, minute, tzinfo=UTC) - timedelta(hours=8)


def test_each_expiry_threshold_goes_out_once_as_the_days_pass(
    vision: Paika, clock: ManualClock
) -> None:
    grant(vision, date(2026, 11, 20))
    announcer = RecordingAnnouncer()
    sent: dict[date, list[str]] = {}
    for _ in range(22):
        for _ in range(3):  # several runs a day (every few hours) change nothing
            raise_and_deliver(vision, announcer)
            clock.advance(timedelta(hours=3))
        clock.advance(timedelta(hours=15))
    for announcement in announcer.announcements:
        sent.setdefault(announcement.at.astimezone(vision.policy.zone).date(), []).append(
            announcement.key
        )
    assert sent == {
        date(2026, 11, 6): ["quota-expiry:1:2026-11-20:14d"],
        date(2026, 11, 13): ["quota-expiry:1:2026-11-20:7d"],
        date(2026, 11, 17): ["quota-expiry:1:2026-11-20:3d"],
        date(2026, 11, 19): ["quota-expiry:1:2026-11-20:1d"],
    }
    first = announcer.announcements[0]
    assert first.kind == EXPIRY_KIND and first.to_users == (OWNER,) and first.to_channel
    assert first.detail["team"] == "vision" and first.detail["left_hours"] == 100
    assert "expires on 2026-11-20 (in 14 days)" in sentence("en", first)


def test_days_are_counted_in_the_policy_time_zone(vision: Paika, clock: ManualClock) -> None:
    grant(vision, date(2026, 11, 20))
    announcer = RecordingAnnouncer()
    clock.advance(local(2026, 11, 5, 23, 59) - clock.now())  # 15 days left in Shanghai…
    assert raise_and_deliver(vision, announcer) == []
    clock.advance(timedelta(minutes=2))  # …and 14 from midnight there, though UTC says the 5th
    assert [a.key for a in raise_and_deliver(vision, announcer)] == [
        "quota-expiry:1:2026-11-20:14d"
    ]


def test_a_restart_neither_repeats_nor_skips(vision: Paika, clock: ManualClock) -> None:
    grant(vision, date(2026, 11, 9))
    announcer = RecordingAnnouncer()
    assert [a.key for a in raise_and_deliver(vision, announcer)] == ["quota-expiry:1:2026-11-09:7d"]
    # A new process: fresh engine and objects, the same database.
    restarted = make_engine(vision.engine.url.render_as_string(hide_password=False))
    try:
        again = RecordingAnnouncer()
        now = clock.now()
        assert raise_quota_alerts(restarted, vision.policy, now) == []
        assert deliver_pending(restarted, again, now) == 0
        clock.advance(timedelta(days=4))  # 3 days left
        assert [a.key for a in raise_quota_alerts(restarted, vision.policy, clock.now())] == [
            "quota-expiry:1:2026-11-09:3d"
        ]
        assert deliver_pending(restarted, again, clock.now()) == 1
    finally:
        restarted.dispose()
    assert [a.key for a in announcer.announcements + again.announcements] == [
        "quota-expiry:1:2026-11-09:7d",
        "quota-expiry:1:2026-11-09:3d",
    ]


def test_two_instances_racing_claim_each_threshold_once(
    vision: Paika, clock: ManualClock, backend_url: str
) -> None:
    if backend_url.startswith("sqlite"):
        pytest.skip("SQLite allows one writer at a time; two paika instances need a server")
    for days in (2, 5, 9, 13, 20):
        grant(vision, clock.now().date() + timedelta(days=days))
    engines = [make_engine(backend_url) for _ in range(2)]
    try:
        claimed: list[Announcement] = []
        for _ in range(12):  # a day at a time, both instances at the same moment
            claimed += _race(engines, vision, clock.now())
            clock.advance(timedelta(days=1))
    finally:
        for engine in engines:
            engine.dispose()
    keys = [a.key for a in claimed]
    assert len(keys) == len(set(keys))
    # Quotas with 2, 5, 9, 13 and 20 days left, over 12 days: every threshold crossed is
    # claimed once (4 + 4 + 4 + 3 + 1); those crossed together are announced once
    # (2 + 3 + 4 + 3 + 1), whichever instance got there first.
    rows = alerts(vision.engine)
    assert len(rows) == 16
    announced = {row.key for row in rows if "covered_by" not in (row.detail or {})["detail"]}
    assert len(keys) == 13 and announced == set(keys)


def _race(engines: list[Engine], paika: Paika, now: datetime) -> list[Announcement]:
    barrier = threading.Barrier(len(engines))
    results: list[list[Announcement]] = [[] for _ in engines]
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = raise_quota_alerts(engines[i], paika.policy, now)
        except BaseException as exc:  # reported by the test thread below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(engines))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    return [a for result in results for a in result]


def test_a_week_of_downtime_sends_one_alert_not_four(vision: Paika, clock: ManualClock) -> None:
    grant(vision, date(2026, 11, 17))  # 15 days left at the start
    announcer = RecordingAnnouncer()
    assert raise_and_deliver(vision, announcer) == []
    clock.advance(timedelta(days=14))  # paika was down; now 1 day is left
    raise_and_deliver(vision, announcer)
    assert [a.key for a in announcer.announcements] == ["quota-expiry:1:2026-11-17:1d"]
    rows = alerts(vision.engine)
    assert [row.key for row in rows] == [
        "quota-expiry:1:2026-11-17:14d",
        "quota-expiry:1:2026-11-17:1d",
        "quota-expiry:1:2026-11-17:3d",
        "quota-expiry:1:2026-11-17:7d",
    ]
    assert all(row.sent_at is not None for row in rows)  # claimed, none left to send later
    for _ in range(3):
        clock.advance(timedelta(hours=6))
        raise_and_deliver(vision, announcer)
    assert len(announcer.announcements) == 1


def test_a_failing_announcer_is_retried_and_the_alert_sent_once(
    vision: Paika, clock: ManualClock
) -> None:
    grant(vision, date(2026, 11, 12))
    announcer = RecordingAnnouncer()
    announcer.failing = True  # Slack is unreachable
    raise_and_deliver(vision, announcer)
    clock.advance(timedelta(minutes=10))
    raise_and_deliver(vision, announcer)
    [row] = alerts(vision.engine)
    assert row.sent_at is None and row.attempts == 2
    announcer.failing = False
    clock.advance(timedelta(minutes=10))
    raise_and_deliver(vision, announcer)
    clock.advance(timedelta(minutes=10))
    raise_and_deliver(vision, announcer)
    assert [a.key for a in announcer.announcements] == ["quota-expiry:1:2026-11-12:14d"]
    [row] = alerts(vision.engine)
    assert row.sent_at is not None


def _charge(paika: Paika, hours: float) -> None:
    """GPU time charged to quota #1, as closing a job's allocations would."""
    now = paika.clock.now()
    with Session(paika.engine) as session:
        job = session.exec(select(Job)).first()
        assert job is not None
        session.add(
            LedgerEntry(
                job_id=job.id or 0,
                team_id=job.team_id,
                quota_id=1,
                gpu_type="A100-80GB",
                gpu_hours=hours,
                cost=0,
                started_at=now - timedelta(hours=1),
                ended_at=now,
                recorded_at=now,
            )
        )
        session.commit()


def test_use_thresholds_and_a_top_up_or_renewal_start_fresh_occasions(
    vision: Paika, clock: ManualClock
) -> None:
    grant(vision, date(2027, 3, 1), hours=100)
    ok(vision, "UALICE", 'submit name=done gpus=1 hours=1 priority=normal data=ready cmd="x"')
    announcer = RecordingAnnouncer()
    _charge(vision, 79.0)
    assert raise_and_deliver(vision, announcer) == []
    _charge(vision, 1.0)  # exactly 80 %
    assert [a.key for a in raise_and_deliver(vision, announcer)] == ["quota-used:1:100:80"]
    assert announcer.announcements[0].kind == USED_KIND
    _charge(vision, 15.0)  # 95 %: 90 crossed
    assert [a.key for a in raise_and_deliver(vision, announcer)] == ["quota-used:1:100:90"]
    ok(vision, "UADMIN", 'admin quota adjust 1 hours=200 reason="top-up"')  # 47.5 %
    assert raise_and_deliver(vision, announcer) == []
    _charge(vision, 70.0)  # 165 of 200: 82.5 %
    assert [a.key for a in raise_and_deliver(vision, announcer)] == ["quota-used:1:200:80"]
    # A renewal to a date 10 days away: the new date's 14-day occasion, once.
    ok(vision, "UADMIN", f"admin quota renew 1 expires={clock.now().date() + timedelta(days=10)}")
    assert [a.key for a in raise_and_deliver(vision, announcer)] == [
        f"quota-expiry:1:{clock.now().date() + timedelta(days=10)}:14d"
    ]
    assert raise_and_deliver(vision, announcer) == []


def _running(paika: Paika, name: str, gpus: list[Gpu], hours_ago: float) -> None:
    now = paika.clock.now()
    with Session(paika.engine) as session:
        job = session.exec(select(Job).where(Job.name == name)).one()
        for card in gpus:
            session.add(
                Allocation(
                    job_id=job.id or 0,
                    gpu_id=card.id or 0,
                    active_gpu_id=card.id,
                    started_at=now - timedelta(hours=hours_ago),
                )
            )
        lifecycle.move(session, job, JobState.RUNNING, at=now, actor="scheduler")
        job.started_at = now - timedelta(hours=hours_ago)
        session.add(job)
        session.commit()


@pytest.fixture
def cards(vision: Paika) -> Iterator[list[Gpu]]:
    """One host with four A100-80GB cards, all taken below."""
    with Session(vision.engine) as session:
        host = Host(
            name="gpu-01", url="http://127.0.0.1:1", state="up", added_at=vision.clock.now()
        )
        session.add(host)
        session.flush()
        made = [
            Gpu(host_id=host.id or 0, index=i, gpu_type="A100-80GB", memory_gib=80)
            for i in range(4)
        ]
        session.add_all(made)
        session.commit()
        for card in made:
            session.refresh(card)
        yield made


def test_the_alert_names_the_jobs_the_quota_would_cut_off(
    vision: Paika, clock: ManualClock, cards: list[Gpu]
) -> None:
    grant(vision, clock.now().date() + timedelta(days=3), hours=100)
    submit = "submit name={} gpus={} hours={} priority=normal data=ready cmd=x {}"
    for text, user in [
        (submit.format("long", 2, 400, "type=A100-80GB"), "UALICE"),  # 200 h of wall time
        (submit.format("short", 1, 1, "type=A100-80GB"), "UALICE"),
        (submit.format("huge", 1, 150, "type=A100-80GB"), "UALICE"),  # more than is left
        (submit.format("small", 1, 2, "type=A100-80GB"), "UALICE"),
        (submit.format("elsewhere", 1, 500, "type=T4-16GB"), "UALICE"),  # another type
        (submit.format("theirs", 1, 500, "type=A100-80GB team=nlp"), "UNLP"),  # another team
    ]:
        ok(vision, user, text)
    _running(vision, "long", cards[:2], hours_ago=1)
    _running(vision, "short", cards[2:3], hours_ago=0.5)
    [alert] = raise_quota_alerts(vision.engine, vision.policy, clock.now())
    named = {job["name"]: job["why"] for job in alert.detail["jobs"]}
    assert named == {"long": "ends_after_expiry", "huge": "needs_more_than_left"}
    said = sentence("en", alert)
    assert "#1 long" in said and "#3 huge" in said and "small" not in said


def test_only_the_owner_or_an_admin_acknowledges_and_the_first_answer_wins(
    vision: Paika, clock: ManualClock
) -> None:
    grant(vision, date(2026, 11, 12))
    [alert] = raise_quota_alerts(vision.engine, vision.policy, clock.now())
    admins = vision.admins
    refused = acknowledge(vision.engine, admins, alert.key, "UALICE", clock.now())
    assert refused.known and not refused.allowed and not refused.changed
    clock.advance(timedelta(minutes=5))
    first = acknowledge(vision.engine, admins, alert.key, OWNER, clock.now())
    assert first.allowed and first.changed and first.answered_by == OWNER
    clock.advance(timedelta(minutes=5))
    second = acknowledge(vision.engine, admins, alert.key, "UADMIN", clock.now())
    assert second.allowed and not second.changed
    assert second.answered_by == OWNER and second.answered_at == first.answered_at
    assert not acknowledge(vision.engine, admins, "quota-expiry:9:x:1d", OWNER, clock.now()).known
    with Session(vision.engine) as session:
        audited = session.exec(
            select(AuditEvent).where(AuditEvent.action == "quota.alert_acknowledged")
        ).all()
    assert [(a.actor, a.target_id) for a in audited] == [(OWNER, "1")]


def test_a_running_job_s_hours_so_far_count_toward_the_used_alert(
    vision: Paika, clock: ManualClock, cards: list[Gpu]
) -> None:
    """Nothing has been charged yet, but a run on two cards for 41 hours has used 82 of the
    quota's 100 GPU-hours: the owner hears of it now, as /gpu quota would show it, not when
    the run ends past the quota."""
    grant(vision, date(2027, 3, 1), hours=100)
    ok(vision, "UALICE", 'submit name=train gpus=2 hours=200 priority=normal data=ready cmd="x"')
    _running(vision, "train", cards[:2], hours_ago=39)
    assert raise_quota_alerts(vision.engine, vision.policy, clock.now()) == []  # 78 h: not yet
    clock.advance(timedelta(hours=2))
    [alert] = raise_quota_alerts(vision.engine, vision.policy, clock.now())
    assert alert.key == "quota-used:1:100:80"
    assert alert.detail["used_hours"] == pytest.approx(82.0)
    assert alert.detail["left_hours"] == pytest.approx(18.0)
    assert "82.0 of 100 GPU-hours used, 18.0 left" in ok(
        vision, "UALICE", "quota"
    )  # the same figure as /gpu quota


def test_a_running_job_s_hours_so_far_count_when_the_next_job_asks_the_quota(
    vision: Paika, clock: ManualClock, cards: list[Gpu]
) -> None:
    """82 of 100 GPU-hours used by a run still going: a 20 GPU-hour job waits for quota, and
    its reason says the 18 hours left that /gpu quota says, not the 100 nothing has charged."""
    grant(vision, date(2027, 3, 1), hours=100)
    ok(vision, "UALICE", 'submit name=train gpus=2 hours=200 priority=normal data=ready cmd="x"')
    _running(vision, "train", cards[:2], hours_ago=41)
    ok(vision, "UALICE", 'submit name=next gpus=1 hours=20 priority=normal data=ready cmd="x"')
    status = ok(vision, "UALICE", "status next")
    assert "18.0 GPU-hours left" in status or "18.0 h left" in status, status
    assert "18.0 left" in ok(vision, "UALICE", "quota")


def test_answers_through_paikas_door_audit_a_refusal_and_wake_the_courier(
    vision: Paika, clock: ManualClock
) -> None:
    """The buttons go through Paika as commands do: a click on someone else's alert leaves a
    refusal in the audit trail, an answer that changed something wakes the courier, and a
    click that names no alert is not known."""
    grant(vision, date(2026, 11, 12))
    [alert] = raise_quota_alerts(vision.engine, vision.policy, clock.now())
    woken: list[bool] = []
    vision.on_change = lambda: woken.append(True)
    assert not vision.acknowledge_quota_alert(None, OWNER).known
    refused = vision.acknowledge_quota_alert(alert.key, "UALICE")
    assert refused.known and not refused.allowed and woken == []
    assert vision.acknowledge_quota_alert(alert.key, OWNER).changed and woken == [True]
    assert not vision.acknowledge_quota_alert(alert.key, "UADMIN").changed and woken == [True]
    with Session(vision.engine) as session:
        refusals = session.exec(
            select(AuditEvent).where(AuditEvent.action == "refused.alert.quota")
        ).all()
    assert [(a.actor, a.target_id) for a in refusals] == [("UALICE", alert.key)]
