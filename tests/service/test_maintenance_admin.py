"""`/gpu admin maintenance add | list | cancel` as an admin uses it, with every refusal
naming the fix, and the cycle's part: owners told ahead once, the host's jobs stopped at the
start once, the policy keeping new work off it (issue 32)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlmodel import Session, select
from test_jobs_flow import busy_cluster, gpu, jobs, refused

from bot.notice_words import sentence
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.maintenance import step
from scheduler.notices.kinds import NoticeKind
from storage.models import AuditEvent, MaintenanceWindow, Notice


@pytest.fixture
def cluster(paika: Paika) -> Paika:
    """Host gpu-01 with 4 cards held by "warmup", expected to end in 2 h."""
    busy_cluster(paika)
    gpu(paika, "UADMIN", "admin member add <@UALICE> team=vision role=member")
    return paika


def _local(paika: Paika, delta: timedelta) -> str:
    moment = (paika.clock.now() + delta).astimezone(paika.policy.zone)
    return moment.strftime("%Y-%m-%dT%H:%M")


def _plan(paika: Paika, starts_in: timedelta, lasts: timedelta, user: str = "UADMIN") -> str:
    starts = _local(paika, starts_in)
    ends = _local(paika, starts_in + lasts)
    return f'admin maintenance add host=gpu-01 from={starts} until={ends} reason="driver 570"'


def _notices(paika: Paika) -> list[Notice]:
    with Session(paika.engine) as session:
        kind = NoticeKind.MAINTENANCE_AHEAD
        return list(session.exec(select(Notice).where(Notice.kind == kind)).all())


def test_an_admin_plans_lists_and_cancels_a_window(cluster: Paika) -> None:
    added = gpu(cluster, "UADMIN", _plan(cluster, timedelta(hours=1), timedelta(hours=4))).text
    assert "Maintenance window 1 planned on gpu-01" in added and "(driver 570)" in added
    assert "1 job(s) running there now are expected to run past it" in added  # warmup: 2 h
    listed = gpu(cluster, "UADMIN", "admin maintenance list").text
    assert listed.startswith("1 · gpu-01 · ") and "driver 570" in listed
    cancelled = gpu(cluster, "UADMIN", "admin maintenance cancel 1").text
    assert "Cancelled maintenance window 1 on gpu-01" in cancelled
    assert gpu(cluster, "UADMIN", "admin maintenance list").text == "No maintenance is planned."
    again = refused(cluster, "UADMIN", "admin maintenance cancel 1")
    assert "There is no maintenance window 1" in again
    with Session(cluster.engine) as session:
        actions = [e.action for e in session.exec(select(AuditEvent)).all()]
    assert "maintenance.add" in actions and "maintenance.cancel" in actions


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            'admin maintenance add host=gpu-99 from=2030-01-01T10:00 until=2030-01-01T12:00 reason="x"',
            "gpu-99",
        ),
        (
            'admin maintenance add host=gpu-01 from=2030-01-01T12:00 until=2030-01-01T10:00 reason="x"',
            "must end after it starts",
        ),
        (
            'admin maintenance add host=gpu-01 from=2020-01-01T10:00 until=2020-01-01T12:00 reason="x"',
            "which has passed",
        ),
    ],
)
def test_a_window_that_cannot_be_is_refused_with_the_fix(
    cluster: Paika, text: str, says: str
) -> None:
    assert says in refused(cluster, "UADMIN", text)
    with Session(cluster.engine) as session:
        assert session.exec(select(MaintenanceWindow)).all() == []


def test_overlapping_windows_on_one_host_are_refused_and_members_may_not_plan(
    cluster: Paika,
) -> None:
    gpu(cluster, "UADMIN", _plan(cluster, timedelta(hours=5), timedelta(hours=4)))
    clash = refused(cluster, "UADMIN", _plan(cluster, timedelta(hours=7), timedelta(hours=4)))
    assert "already has maintenance window 1" in clash and "maintenance cancel 1" in clash
    assert "admin" in refused(
        cluster, "UALICE", _plan(cluster, timedelta(days=2), timedelta(hours=1))
    )


def test_owners_are_told_a_day_and_an_hour_ahead_once_each(
    cluster: Paika, clock: ManualClock
) -> None:
    # warmup is expected to end in 2 h: a window in 1 h 30 m catches it.
    gpu(cluster, "UADMIN", _plan(cluster, timedelta(minutes=90), timedelta(hours=2)))
    told = step(cluster.engine, clock.now(), cluster.policy.zone)
    assert [n.detail["lead"] for n in told] == ["day"]
    said = sentence("en", told[0])
    assert "still run on gpu-01 when its planned maintenance starts at" in said
    assert told[0].to_users == ("UADMIN",) and told[0].detail["host"] == "gpu-01"
    assert step(cluster.engine, clock.now(), cluster.policy.zone) == []  # once
    clock.advance(timedelta(minutes=40))  # 50 min ahead: the hour's notice
    assert [n.detail["lead"] for n in step(cluster.engine, clock.now(), cluster.policy.zone)] == [
        "hour"
    ]
    assert step(cluster.engine, clock.now(), cluster.policy.zone) == []
    assert len(_notices(cluster)) == 2


def test_at_the_start_the_hosts_jobs_are_asked_to_stop_once(
    cluster: Paika, clock: ManualClock
) -> None:
    gpu(cluster, "UADMIN", _plan(cluster, timedelta(minutes=30), timedelta(hours=2)))
    clock.advance(timedelta(minutes=31))
    step(cluster.engine, clock.now(), cluster.policy.zone)
    warmup = jobs(cluster)["warmup"]
    assert warmup.stop_reason == "maintenance" and warmup.stop_requested_at is not None
    with Session(cluster.engine) as session:
        window = session.exec(select(MaintenanceWindow)).one()
    assert window.stopped_at is not None
    # A second pass, or a second scheduler, asks nothing again.
    clock.advance(timedelta(minutes=1))
    step(cluster.engine, clock.now(), cluster.policy.zone)
    assert jobs(cluster)["warmup"].stop_requested_at == warmup.stop_requested_at


def test_a_queued_job_says_it_waits_for_the_host_in_maintenance(
    cluster: Paika, clock: ManualClock
) -> None:
    gpu(cluster, "UADMIN", _plan(cluster, timedelta(minutes=1), timedelta(hours=2)))
    clock.advance(timedelta(minutes=2))
    gpu(
        cluster,
        "UALICE",
        'submit name=quick gpus=1 hours=0.5 priority=normal data=ready cmd="true"',
    )
    status = gpu(cluster, "UALICE", "status quick").text
    assert "gpu-01 (in planned maintenance)" in status


def test_the_board_shows_the_window_ahead_and_under_way(cluster: Paika, clock: ManualClock) -> None:
    gpu(cluster, "UADMIN", _plan(cluster, timedelta(hours=1), timedelta(hours=2)))
    ahead = gpu(cluster, "UALICE", "board").text
    assert "gpu-01 (maintenance " in ahead and " → " in ahead
    clock.advance(timedelta(hours=1, minutes=1))
    under_way = gpu(cluster, "UALICE", "board").text
    assert "gpu-01 (in planned maintenance until " in under_way
    clock.advance(timedelta(hours=2))
    assert "maintenance" not in gpu(cluster, "UALICE", "board").text


def test_the_digest_draws_the_window_and_lists_it_with_the_bookings_ahead(
    cluster: Paika,
) -> None:
    from zoneinfo import ZoneInfo

    from matplotlib.patches import Rectangle

    from bot.blocks.digest import digest_blocks
    from bot.digest import picture
    from bot.digest.text import render_text
    from scheduler.digest import digest_now

    gpu(cluster, "UADMIN", _plan(cluster, timedelta(hours=2), timedelta(hours=4)))
    starts = _local(cluster, timedelta(days=2))
    ends = _local(cluster, timedelta(days=2, hours=12))
    gpu(
        cluster,
        "UADMIN",
        f"admin reserve add gpus=2 type=A100-80GB from={starts} until={ends} team=vision "
        'reason="paper deadline"',
    )
    digest = digest_now(cluster)
    assert [w.host for w in digest.maintenance] == ["gpu-01"]
    assert [(b.team, b.gpus) for b in digest.bookings] == [("vision", 2)]
    # Back through the stored JSON, as the bot reads it.
    assert type(digest).from_json(digest.to_json()) == digest

    figure = picture.draw(digest, "en")
    (axes,) = [a for a in figure.axes if a.get_gid() == picture.TIMELINE]
    hatched = [
        p
        for p in axes.patches
        if isinstance(p, Rectangle) and p.get_hatch() == "xx" and p.get_width() > 0
    ]
    # Each of gpu-01's four rows, from two hours ahead to the timeline's end (six hours).
    assert sorted(round(p.get_y()) for p in hatched) == [0, 1, 2, 3]
    assert {(round(p.get_x(), 2), round(p.get_x() + p.get_width(), 2)) for p in hatched} == {
        (2.0, 6.0)
    }
    assert "planned maintenance" in [t.get_text() for t in figure.legends[0].get_texts()]
    (ahead,) = [t.get_text() for t in figure.texts if t.get_text().startswith("Ahead: ")]
    assert "gpu-01 maintenance" in ahead and "2 × A100-80GB booked for vision" in ahead
    assert ahead.index("gpu-01") < ahead.index("booked")  # soonest first

    # With a shared card too, all eight entries of the legend fit the picture's width.
    first = replace(digest.timeline.rows[0], also=(999,))
    rows = (first, *digest.timeline.rows[1:])
    crowded = replace(digest, timeline=replace(digest.timeline, rows=rows))
    figure = picture.draw(crowded, "en")
    (legend,) = figure.legends
    assert len(legend.get_texts()) == 8
    box = legend.get_window_extent(figure.canvas.get_renderer())  # type: ignore[attr-defined]
    assert box.x1 <= picture.WIDTH_PX

    zone = ZoneInfo(cluster.policy.timezone)
    text = render_text(digest, zone, "en")
    assert "Planned ahead:" in text and "driver 570" in text and "paper deadline" in text
    message = json.dumps(digest_blocks(digest, "en", zone).blocks)
    assert "Planned ahead" in message and "booked for vision" in message
    assert "计划维护" in [
        t.get_text() for t in picture.draw(digest, "zh").legends[0].get_texts()
    ] or (picture.drawn_language("zh") == "en")


def test_a_digest_with_nothing_planned_keeps_its_look(cluster: Paika) -> None:
    from bot.digest import picture
    from scheduler.digest import digest_now

    digest = digest_now(cluster)
    assert digest.maintenance == () and digest.bookings == ()
    figure = picture.draw(digest, "en")
    assert not [t for t in figure.texts if t.get_text().startswith("Ahead: ")]
    assert "planned maintenance" not in [t.get_text() for t in figure.legends[0].get_texts()]
