"""When the digest is due, and that it is claimed once and delivered until it gets through:
twice in a row, from two engines on one database, and after a failed post."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from sqlmodel import Session, select

from bot.notice_words import sentence
from scheduler.app import Paika
from scheduler.config import Digest as DigestSettings
from scheduler.config import PolicyConfig
from scheduler.digest import Digest
from scheduler.digest import schedule as digest_schedule
from scheduler.digest.schedule import digest_due, digest_key, raise_digest
from scheduler.notices.outbox import RecordingAnnouncer, deliver_pending
from storage.db import make_engine
from storage.models import Notice

# Asia/Shanghai is UTC+8 all year: 09:30 there is 01:30 UTC.
MONDAY = date(2026, 11, 2)


def policy(time: str = "09:30", late: float = 180, zone: str = "Asia/Shanghai") -> PolicyConfig:
    return PolicyConfig.model_validate(
        {
            "timezone": zone,
            "gpu_types": {"T4-16GB": {"memory_gib": 16, "price_per_gpu_hour": 0.35}},
            "digest": {"time": time, "late_minutes": late},
        }
    )


def utc(day: date, hh: int, mm: int, ss: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hh, mm, ss, tzinfo=UTC)


@pytest.mark.parametrize(
    ("now", "due"),
    [
        pytest.param(utc(MONDAY, 1, 29, 59), None, id="a second before"),
        pytest.param(utc(MONDAY, 1, 30), MONDAY, id="at the minute"),
        pytest.param(utc(MONDAY, 1, 30, 59), MONDAY, id="within the minute"),
        pytest.param(utc(MONDAY, 4, 30, 59), MONDAY, id="180 minutes after the minute"),
        pytest.param(utc(MONDAY, 4, 31), None, id="later than late_minutes: skipped"),
        pytest.param(utc(MONDAY, 15, 0), None, id="the afternoon"),
    ],
)
def test_due_from_the_configured_minute_until_late_minutes_later(
    now: datetime, due: date | None
) -> None:
    assert digest_due(policy(), now, None) == due


def test_never_a_day_already_sent() -> None:
    at = utc(MONDAY, 2, 0)
    assert digest_due(policy(), at, MONDAY - timedelta(days=1)) == MONDAY
    assert digest_due(policy(), at, MONDAY) is None


def test_the_day_is_the_policy_zones_day_not_utcs() -> None:
    # 00:10 in Shanghai on Tuesday is still Monday 16:10 in UTC.
    assert digest_due(policy("00:10"), utc(MONDAY, 16, 10), None) == MONDAY + timedelta(days=1)
    assert digest_due(policy("00:10", zone="UTC"), utc(MONDAY, 16, 10), None) is None


def test_a_late_digest_may_cross_midnight_for_its_own_day() -> None:
    late_evening = policy("23:50", late=60)
    # 23:50 Monday in Shanghai is 15:50 UTC; 00:30 Tuesday there is 16:30 UTC.
    assert digest_due(late_evening, utc(MONDAY, 15, 50), None) == MONDAY
    assert digest_due(late_evening, utc(MONDAY, 16, 30), None) == MONDAY
    assert digest_due(late_evening, utc(MONDAY, 16, 51), None) is None


def test_no_late_minutes_means_only_the_configured_minute() -> None:
    strict = policy(late=0)
    assert digest_due(strict, utc(MONDAY, 1, 30, 30), None) == MONDAY
    assert digest_due(strict, utc(MONDAY, 1, 31), None) is None


def test_a_disabled_digest_is_never_due() -> None:
    off = policy().model_copy(update={"digest": DigestSettings(enabled=False)})
    assert digest_due(off, utc(MONDAY, 1, 30), None) is None


# -- raising and delivering it once ----------------------------------------------------


# Monday's digest minute under the bundled policy (09:30 Asia/Shanghai).
MORNING = utc(MONDAY, 1, 30)


def alerts(paika: Paika) -> list[Notice]:
    with Session(paika.engine) as session:
        return list(session.exec(select(Notice).where(Notice.kind == "digest")).all())


def test_raised_once_with_the_digest_as_its_detail(paika: Paika) -> None:
    first = raise_digest(paika.engine, paika.policy, MORNING)
    assert first is not None
    assert (first.key, first.kind, first.to_channel) == ("digest:2026-11-02", "digest", True)
    assert first.detail["subject"] == "2026-11-02"
    assert Digest.from_json(first.detail).day == MONDAY
    assert "Daily GPU board for 2026-11-02" in sentence("en", first)
    assert raise_digest(paika.engine, paika.policy, MORNING + timedelta(minutes=5)) is None
    assert [a.key for a in alerts(paika)] == ["digest:2026-11-02"]


def test_nothing_is_raised_when_nothing_is_due(paika: Paika) -> None:
    assert raise_digest(paika.engine, paika.policy, utc(MONDAY, 7, 0)) is None
    assert alerts(paika) == []


def test_two_engines_on_one_database_claim_it_once(paika: Paika) -> None:
    other = make_engine(paika.engine.url.render_as_string(hide_password=False))
    try:
        raised = [raise_digest(engine, paika.policy, MORNING) for engine in (paika.engine, other)]
    finally:
        other.dispose()
    assert [r is not None for r in raised] == [True, False]
    assert len(alerts(paika)) == 1


def test_the_claim_holds_even_when_both_instances_saw_it_unclaimed(
    paika: Paika, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert raise_digest(paika.engine, paika.policy, MORNING) is not None
    # The other instance looked before the first one committed: only the claim is left.
    monkeypatch.setattr(digest_schedule.notice_queries, "get_notice", lambda **_: None)
    assert raise_digest(paika.engine, paika.policy, MORNING) is None
    assert len(alerts(paika)) == 1


def test_a_failed_post_is_retried_and_sent_once(paika: Paika) -> None:
    announcer = RecordingAnnouncer()
    announcer.failing = True
    now = MORNING
    assert raise_digest(paika.engine, paika.policy, now) is not None
    assert deliver_pending(paika.engine, announcer, now, kind="digest") == 0
    # A restart in between: nothing is raised again, the claimed digest is still pending.
    assert raise_digest(paika.engine, paika.policy, now + timedelta(minutes=1)) is None
    announcer.failing = False
    assert deliver_pending(paika.engine, announcer, now + timedelta(minutes=2), kind="digest") == 1
    assert deliver_pending(paika.engine, announcer, now + timedelta(minutes=3), kind="digest") == 0
    (sent,) = announcer.announcements
    assert sent.key == digest_key(MONDAY)
    assert Digest.from_json(sent.detail).day == MONDAY
    (row,) = alerts(paika)
    assert row.attempts == 1 and row.sent_at == now + timedelta(minutes=2)


def test_the_next_day_gets_its_own_digest(paika: Paika) -> None:
    assert raise_digest(paika.engine, paika.policy, MORNING) is not None
    tuesday = raise_digest(paika.engine, paika.policy, MORNING + timedelta(days=1))
    assert tuesday is not None and tuesday.key == "digest:2026-11-03"
