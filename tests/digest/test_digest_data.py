"""The digest's data, built from a day of work on every backend: the cards, the queue,
who waits for data and since when, yesterday's ledger, idle GPU-hours from the samples,
quota warnings, the timeline and utilization; and its JSON round trip."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, timedelta

import pytest
from sqlalchemy import event
from world import HostSpec, Run, Waiting, at, build, people, submit

from bot.digest.text import render_text
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.config import Digest as DigestSettings
from scheduler.digest import Digest, digest_now
from scheduler.digest.model import IdleJob, Segment, SegmentKind, TypeCount
from scheduler.digest.schedule import raise_digest
from scheduler.digest.timeline import MAX_ROWS
from scheduler.notices.outbox import RecordingAnnouncer, deliver_pending

# T0 is Monday 2026-11-02 09:00 UTC, 17:00 in Asia/Shanghai (the bundled policy's zone):
# "yesterday" is Sunday 2026-11-01, from -41 h to -17 h.
HOSTS = (
    HostSpec("gpu-01", "A100-80GB", 4, 80),
    HostSpec("gpu-02", "T4-16GB", 2, 16, down=((-2.0, None),)),
)
RUNS = (
    # Held two A100s all of yesterday from 01:00; idle on both 10:00-13:00 (-31 h to -28 h).
    Run("bert", "UALICE", "vision", "gpu-01", (0, 1), -40, None, util=90, idle=((-31, -28),)),
    # Idle since it started today: counted in the timeline, not in yesterday's idle hours.
    Run("stalled", "UBOB", "vision", "gpu-01", (2,), -5, None, idle=((-5, 0.0),)),
    # Ran yesterday 02:00-08:00 on a T4 and finished: in the ledger.
    Run("resnet", "UNICK", "nlp", "gpu-02", (0,), -39, -33, util=80),
)
WAITING = (
    Waiting("small", "UALICE", 1, 2),
    Waiting("copying", "UALICE", 2, 16, data="pending", submitted_h=-26),
    Waiting("late-data", "UNICK", 1, 4, data="s3://nlp/corpus", submitted_h=-1),
    Waiting("filler", "UNICK", 1, 3, priority="idle", submitted_h=-0.25),
)
QUOTAS = (
    ("vision", None, 200.0, 10),  # expires within the 14-day alert
    ("nlp", None, 7.0, 60),  # resnet's 6 GPU-hours use 86% of it: past the 80% alert
    ("speech", "T4-16GB", 100.0, 90),  # nothing to warn about
)


@pytest.fixture
def day(paika: Paika, clock: ManualClock) -> tuple[Paika, dict[str, int]]:
    people(paika)
    ids = build(paika, HOSTS, RUNS, samples_from_h=-41, quotas=QUOTAS)
    ids |= submit(paika, clock, WAITING)
    return paika, ids


def test_the_cards_and_the_queue_are_the_boards(day: tuple[Paika, dict[str, int]]) -> None:
    paika, ids = day
    digest = digest_now(paika)
    assert digest.day == date(2026, 11, 2)
    assert digest.hosts == 2
    assert digest.types == (
        TypeCount("T4-16GB", total=2, free=0, busy=0, idle_held=0, down=2),
        TypeCount("A100-80GB", total=4, free=1, busy=2, idle_held=1, down=0),
    )
    assert digest.running == 2
    assert digest.waiting_by_class == {"core": 0, "normal": 3, "idle": 1}
    assert digest.waiting_for_data == 2
    assert {line.name for line in digest.ready} == {"small", "filler"}
    assert digest.ready_total == 2
    # "Next up" names the jobs that can start next: the two waiting for data are counted
    # and listed in their own part, not promised a start; nor is filler, which nlp's quota
    # blocks (3 GPU-hours asked, 1 left).
    assert [line.name for line in digest.next_up] == ["small"]
    assert all(line.wait is not None for line in digest.next_up)


def test_jobs_waiting_for_data_name_their_owner_and_how_long_they_waited(
    day: tuple[Paika, dict[str, int]],
) -> None:
    paika, ids = day
    digest = digest_now(paika)
    waiting = [
        (line.name, line.owner, digest.at - line.submitted_at, line.data_location)
        for line in digest.waiting_data
    ]
    assert waiting == [
        ("copying", "UALICE", timedelta(hours=26), None),
        ("late-data", "UNICK", timedelta(hours=1), "s3://nlp/corpus"),
    ]
    text = render_text(digest, paika.policy.zone)
    copying, late = ids["copying"], ids["late-data"]
    assert f"#{copying} copying · vision · owner UALICE · waiting 1 d 2 h" in text
    assert (
        f"#{late} late-data · nlp · owner UNICK · waiting 1 h 0 min · data at s3://nlp/corpus"
        in text
    )


def test_yesterday_is_the_previous_calendar_day_in_the_policy_zone(
    day: tuple[Paika, dict[str, int]],
) -> None:
    paika, _ = day
    usage = digest_now(paika).yesterday
    assert usage.day == date(2026, 11, 1)
    assert (usage.start, usage.end) == (at(paika.clock.now(), -41), at(paika.clock.now(), -17))
    # bert: 2 A100s from 01:00 to midnight (still running, counted up to the day's end);
    # resnet: 6 h on a T4, from the ledger.
    assert [(r.team, r.gpu_type, r.jobs) for r in usage.rows] == [
        ("nlp", "T4-16GB", 1),
        ("vision", "A100-80GB", 1),
    ]
    assert usage.rows[0].gpu_hours == pytest.approx(6.0)
    assert usage.rows[0].cost == pytest.approx(6 * 0.35)
    assert usage.rows[1].gpu_hours == pytest.approx(46.0)
    assert usage.rows[1].cost == pytest.approx(46 * 2.2)
    assert usage.total_gpu_hours == pytest.approx(52.0)
    assert usage.job_count == 2


def test_idle_gpu_hours_count_held_gpus_below_the_threshold_only(
    day: tuple[Paika, dict[str, int]],
) -> None:
    paika, ids = day
    idle = digest_now(paika).idle
    # Three hours on each of bert's two GPUs. Free cards at 0% are not idle-held, and
    # stalled's idle time is today, not yesterday.
    assert idle.gpu_hours == pytest.approx(6.0)
    assert idle.by_type == {"A100-80GB": pytest.approx(6.0)}
    assert idle.jobs == (IdleJob(ids["bert"], "bert", "vision", "UALICE", "A100-80GB", 6.0),)
    assert idle.job_count == 1
    assert idle.threshold_pct == 5


def test_quota_warnings_are_those_near_expiry_or_past_a_used_threshold(
    day: tuple[Paika, dict[str, int]],
) -> None:
    paika, _ = day
    warnings = digest_now(paika).quota_warnings
    assert [(w.team, w.days_left, w.expiring, w.used_threshold) for w in warnings] == [
        ("vision", 10, True, None),
        ("nlp", 60, False, 80),
    ]
    nlp = warnings[1]
    assert (nlp.used_hours, nlp.left_hours) == pytest.approx((6.0, 1.0))
    assert nlp.used_pct == pytest.approx(600 / 7)
    # vision's two runs are still going: bert on two cards for 40 h, stalled on one for 5 h.
    # Their hours so far count, as /gpu quota counts them.
    vision = warnings[0]
    assert (vision.used_hours, vision.left_hours) == pytest.approx((85.0, 115.0))
    text = render_text(digest_now(paika), paika.policy.zone)
    assert "115.0 of 200 GPU-hours left (42% used)" in text
    quota = paika.run("quota team=vision", "UALICE").text
    assert "85.0 of 200 GPU-hours used, 115.0 left" in quota, quota


def test_the_timeline_shows_jobs_idle_free_and_down_stretches(
    day: tuple[Paika, dict[str, int]],
) -> None:
    paika, ids = day
    timeline = digest_now(paika).timeline
    now = paika.clock.now()
    assert (timeline.start, timeline.now, timeline.end) == (
        now - timedelta(hours=24),
        now,
        now + timedelta(hours=6),
    )
    rows = {(row.host, row.index): row for row in timeline.rows}
    assert len(rows) == 6 and timeline.more_gpus == 0
    assert rows[("gpu-01", 0)].segments == (
        Segment(at(now, -24), now, SegmentKind.JOB, ids["bert"], "bert"),
    )
    assert rows[("gpu-01", 2)].segments == (
        Segment(at(now, -24), at(now, -5), SegmentKind.FREE),
        Segment(at(now, -5), now, SegmentKind.IDLE, ids["stalled"], "stalled"),
    )
    assert rows[("gpu-01", 3)].segments == (Segment(at(now, -24), now, SegmentKind.FREE),)
    # gpu-02 stopped answering two hours ago.
    assert rows[("gpu-02", 1)].segments == (
        Segment(at(now, -24), at(now, -2), SegmentKind.FREE),
        Segment(at(now, -2), now, SegmentKind.DOWN),
    )
    assert rows[("gpu-01", 0)].expected_end is not None
    # "small" fits the free A100 now: it is planned there from now for its 2 GPU-hours.
    small = next(p for p in timeline.planned if p.job_id == ids["small"])
    assert small.start == now and small.gpu_type == "A100-80GB"
    assert [timeline.rows[i].index for i in small.rows] == [3]


def test_a_gap_in_the_samples_is_a_down_stretch(paika: Paika, clock: ManualClock) -> None:
    people(paika)
    spec = HostSpec("gpu-03", "T4-16GB", 1, 16, down=((-9.0, -6.5),))
    build(paika, [spec], [], samples_from_h=-25)
    (row,) = digest_now(paika).timeline.rows
    now = clock.now()
    assert row.segments == (
        Segment(at(now, -24), at(now, -9), SegmentKind.FREE),
        Segment(at(now, -9), at(now, -6.5), SegmentKind.DOWN),
        Segment(at(now, -6.5), now, SegmentKind.FREE),
    )


def test_utilization_is_the_hourly_mean_per_type(day: tuple[Paika, dict[str, int]]) -> None:
    paika, _ = day
    utilization = {u.gpu_type: u.hourly for u in digest_now(paika).utilization}
    assert set(utilization) == {"T4-16GB", "A100-80GB"}
    t4 = utilization["T4-16GB"]
    assert len(t4) == 24
    assert t4[-2:] == (None, None)  # gpu-02 is down for the last two hours
    assert t4[0] == pytest.approx(0.0)  # both free and idle at 0%
    a100 = utilization["A100-80GB"]
    assert all(value is not None and 0 < value < 100 for value in a100)


def test_the_digest_survives_a_json_round_trip(day: tuple[Paika, dict[str, int]]) -> None:
    paika, _ = day
    digest = digest_now(paika)
    stored = json.loads(json.dumps(digest.to_json()))
    again = Digest.from_json({**stored, "subject": "2026-11-02"})
    assert again == digest
    assert again.timeline.rows[0].segments[0].start.tzinfo is not None
    with pytest.raises(ValueError, match="version"):
        Digest.from_json({**stored, "version": 99})


def test_an_empty_install_has_a_digest_too(paika: Paika) -> None:
    digest = digest_now(paika)
    assert (digest.total_gpus, digest.running, digest.waiting) == (0, 0, 0)
    assert digest.timeline.rows == () and digest.utilization == ()
    assert digest.yesterday.rows == () and digest.idle.gpu_hours == 0
    assert "GPUs: none registered yet" in render_text(digest, paika.policy.zone)
    assert Digest.from_json(json.loads(json.dumps(digest.to_json()))) == digest


def test_samples_and_allocations_are_read_in_a_few_queries(
    day: tuple[Paika, dict[str, int]], count_queries: list[str]
) -> None:
    paika, _ = day
    count_queries.clear()
    digest_now(paika)
    samples = [q for q in count_queries if "gpu_samples" in q]
    # Timeline buckets, hourly utilization, yesterday's idle hours: one query each,
    # however many samples there are.
    assert len(samples) == 3, samples


@pytest.fixture
def count_queries(paika: Paika) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(*args: object) -> None:
        seen.append(str(args[2]))

    event.listen(paika.engine, "before_cursor_execute", record)
    yield seen
    event.remove(paika.engine, "before_cursor_execute", record)


def test_every_gpu_of_a_64_gpu_cluster_has_a_row_a_down_host_s_too(
    paika: Paika, clock: ManualClock
) -> None:
    people(paika)
    hosts = [HostSpec(f"node-{n:02d}", "T4-16GB", 8, 16) for n in range(7)]
    # The last host by name is down: it was the one cut off when rows stopped at 48.
    hosts.append(HostSpec("node-07", "T4-16GB", 8, 16, down=((-0.5, None),)))
    build(paika, hosts, [], samples_from_h=-1)
    timeline = digest_now(paika).timeline
    assert len(timeline.rows) == 64 and timeline.more_gpus == 0
    down = [row for row in timeline.rows if row.host == "node-07"]
    assert [row.index for row in down] == list(range(8))
    assert all(row.segments[-1].kind == SegmentKind.DOWN for row in down)


def test_past_the_most_rows_the_rest_are_counted(paika: Paika, clock: ManualClock) -> None:
    people(paika)
    hosts = MAX_ROWS // 8 + 1
    build(
        paika,
        [HostSpec(f"node-{n:02d}", "T4-16GB", 8, 16) for n in range(hosts)],
        [],
        samples_from_h=-0.1,
    )
    timeline = digest_now(paika).timeline
    assert len(timeline.rows) == MAX_ROWS and timeline.more_gpus == hosts * 8 - MAX_ROWS
    last = timeline.rows[-1]
    assert (last.host, last.index) == (f"node-{MAX_ROWS // 8 - 1:02d}", 7)


def test_the_digest_comes_back_equal_from_the_alerts_table(
    day: tuple[Paika, dict[str, int]],
) -> None:
    paika, _ = day
    now = paika.clock.now()  # 17:00 in Shanghai: make that the digest's minute
    policy = paika.policy.model_copy(update={"digest": DigestSettings(time="17:00")})
    assert raise_digest(paika.engine, policy, now) is not None
    announcer = RecordingAnnouncer()
    assert deliver_pending(paika.engine, announcer, now, kind="digest") == 1
    (sent,) = announcer.announcements
    assert Digest.from_json(sent.detail) == digest_now(paika)
