"""Planned maintenance and booked cards in the replay (calendar.py), on hand-made traces
through the real policy: what the plan keeps busy in a window's notice, what the baseline
drain leaves idle, what a window's start stops, and whether a booking finds its cards."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.policy.plan import MatchDecision, Plan, Start
from scheduler.policy.snapshot import Snapshot, TeamWindow
from scheduler.simulate.calendar import (
    DAY_S,
    HOUR_S,
    WEEK_S,
    Booking,
    Calendar,
    HostWindow,
    WeeklyPlan,
    busiest_team,
    weekly_calendar,
)
from scheduler.simulate.engine import Engine, JobSpec, PolicyViolation, RunResult
from scheduler.simulate.policies import policy_setup
from scheduler.simulate.traces import ClusterSpec, NodeGroup
from tests.simulate.test_sim_engine import V100, job

WINDOW = HostWindow(host=0, starts=10_000.0, ends=14_000.0, known_from=0.0)


def replay(
    jobs: list[JobSpec],
    calendar: Calendar,
    *,
    nodes: int = 1,
    gpus: int = 2,
    schedule=None,  # type: ignore[no-untyped-def]
) -> RunResult:
    spec = ClusterSpec.uniform(nodes, gpus, "V100-16GB")
    engine = Engine(jobs, spec, (V100,), policy_setup("paika"), calendar=calendar)
    if schedule is not None:
        engine = replace(engine, schedule=schedule)
    return engine.run()


def test_the_plan_runs_short_work_in_the_notice_and_the_long_job_after_the_window() -> None:
    # A 20,000 s job would run into the window: it waits for its end; three 3,000 s jobs
    # run before it on the host's two cards.
    jobs = [job(1, 0, 20_000, 1), *(job(n, 1, 3_000, 1) for n in (2, 3, 4))]
    result = replay(jobs, Calendar("plan", (WINDOW,)))
    records = {r.id: r for r in result.records}
    assert records[1].first_held == WINDOW.ends
    assert all(records[n].end is not None and records[n].end <= WINDOW.starts for n in (2, 3, 4))
    (window,) = result.windows
    assert window.notice_gpu_s == 2 * 10_000
    assert window.busy_gpu_s == 3 * 3_000
    assert window.stopped == 0 and window.thrown_gpu_s == 0
    assert all(r.end is not None and r.maintenance_stops == 0 for r in result.records)


def test_the_baseline_drain_takes_nothing_from_the_notice_to_the_windows_end() -> None:
    jobs = [job(1, 0, 20_000, 1), *(job(n, 1, 3_000, 1) for n in (2, 3, 4))]
    result = replay(jobs, Calendar("drain", (WINDOW,)))
    assert all(r.first_held is not None and r.first_held >= WINDOW.ends for r in result.records)
    (window,) = result.windows
    assert window.busy_gpu_s == 0 and window.unused_gpu_s == 2 * 10_000
    summary = result.calendar()
    assert summary is not None and summary["unused_gpu_hours"] == pytest.approx(20_000 / HOUR_S)


def test_the_windows_start_stops_what_runs_there_and_each_job_still_finishes() -> None:
    # Known only at 9,000 s: three jobs started at 0 still run at the start. The one that
    # does not checkpoint loses its run; the one that does goes back to its checkpoint
    # (1,800 s of work each); the idle one keeps its progress.
    late = HostWindow(host=0, starts=10_000.0, ends=14_000.0, known_from=9_000.0)
    plain = job(1, 0, 30_000, 1)
    checkpoints = replace(job(2, 0, 30_000, 1), preemptible=True, checkpoint_s=1_800.0)
    idle = job(3, 0, 30_000, 1, priority="idle")
    result = replay([plain, checkpoints, idle], Calendar("plan", (late,)), gpus=3)
    records = {r.id: r for r in result.records}
    assert all(r.maintenance_stops == 1 and r.end is not None for r in records.values())
    assert records[1].lost_gpu_s == 10_000  # its whole run
    assert records[1].end == WINDOW.ends + 30_000
    kept = 10_000 // 1_800 * 1_800
    assert records[2].lost_gpu_s == 10_000 - kept + checkpoints.restart_s
    assert records[3].lost_gpu_s == 0 and records[3].end == WINDOW.ends + 20_000
    (window,) = result.windows
    # Begun before the window was known: not the plan's doing, counted apart.
    assert window.stopped == 3 and window.thrown_gpu_s == 0
    assert window.unforeseen_gpu_s == 10_000 + (10_000 - kept)


def test_a_run_begun_in_the_notice_that_overruns_counts_against_the_plan() -> None:
    # Its estimate says 3,000 s; it runs 12,000 s and is stopped at the window's start.
    liar = job(1, 0, 12_000, 1, est_s=3_000)
    result = replay([liar], Calendar("plan", (WINDOW,)), gpus=1)
    (window,) = result.windows
    assert window.stopped == 1 and window.thrown_gpu_s == 10_000
    assert window.unused_gpu_s == 10_000  # busy the whole notice, all of it thrown away
    assert result.records[0].end == WINDOW.ends + 12_000


def test_a_start_on_a_host_in_its_window_is_a_policy_violation() -> None:
    def reckless(snapshot: Snapshot) -> Plan:
        match = MatchDecision("V100-16GB", (), "test")
        starts = tuple(
            Start(p.id, (0,), ("n0000",), "V100-16GB", match, snapshot.now + 1)
            for p in snapshot.pending
        )
        return Plan(starts, (), {})

    # Host n0001 stays open, so the pass is not skipped; the plan puts the job on n0000.
    with pytest.raises(PolicyViolation, match="on a host that is maintenance"):
        replay(
            [job(1, 11_000, 100, 1)],
            Calendar("plan", (WINDOW,)),
            nodes=2,
            gpus=1,
            schedule=reckless,
        )


def test_other_teams_leave_the_booked_cards_free_for_its_start() -> None:
    # Team a could fill both hosts with 10,000 s jobs; two cards are booked for team b from
    # 5,000 s, and b's job submitted then starts at once.
    booking = Booking(TeamWindow(1, "V100-16GB", 2, "b", 5_000.0, 9_000.0), known_from=0.0)
    others = [replace(job(n, 0, 10_000, 1), team="a") for n in range(1, 5)]
    mine = replace(job(9, 5_000, 1_000, 2), team="b")
    result = replay([*others, mine], Calendar("plan", (), (booking,)), nodes=2)
    records = {r.id: r for r in result.records}
    assert records[9].first_held == 5_000
    assert sum(1 for n in range(1, 5) if records[n].first_held == 0) == 2
    (figures,) = result.bookings
    assert figures.honoured and figures.available == 2


def test_without_the_booking_the_same_trace_leaves_no_card_for_it() -> None:
    others = [replace(job(n, 0, 10_000, 1), team="a") for n in range(1, 5)]
    mine = replace(job(9, 5_000, 1_000, 2), team="b")
    result = replay([*others, mine], Calendar("plan"), nodes=2)
    assert {r.id: r for r in result.records}[9].first_held == 10_000
    assert result.calendar() is not None and result.bookings == []


def test_the_weekly_calendar_gives_each_host_one_window_a_week_staggered_by_night() -> None:
    cluster = ClusterSpec((NodeGroup(9, 8, "V100-16GB"),))
    plan = WeeklyPlan("plan", hours=4, lead_hours=24, booking_gpus=100, booking_hours=12)
    calendar = weekly_calendar(plan, cluster, 0.0, 2 * WEEK_S, "nlp")
    assert len(calendar.windows) == 9 * 2
    for window in calendar.windows:
        assert window.ends - window.starts == 4 * HOUR_S
        assert window.starts - window.known_from == DAY_S
        assert window.starts % WEEK_S == (window.host % 7) * DAY_S + 22 * HOUR_S
    assert [b.window.gpus for b in calendar.bookings] == [72, 72]  # at most the type's cards
    assert {b.window.team for b in calendar.bookings} == {"nlp"}


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (dict(mode="later"), "unknown maintenance mode"),
        (dict(mode="plan", hours=0), "--maintenance-hours"),
        (dict(mode="plan", lead_hours=166), "fit in a week"),
        (dict(mode="plan", booking_gpus=-1), "--booking-gpus"),
    ],
)
def test_a_plan_out_of_range_is_refused_with_the_flag_to_fix(
    plan: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        WeeklyPlan(**plan)  # type: ignore[arg-type]


def test_bookings_go_to_the_team_with_the_most_gpu_hours() -> None:
    assert busiest_team([("a", 3.0), ("b", 2.0), ("b", 2.0)]) == "b"
    assert busiest_team([]) == "team"


def test_ignore_measures_the_windows_and_changes_nothing() -> None:
    # The counterfactual: the same replay as with no calendar, with the notices measured.
    jobs = [job(1, 0, 20_000, 1), *(job(n, 1, 3_000, 1) for n in (2, 3, 4))]
    booking = Booking(TeamWindow(1, "V100-16GB", 2, "b", 5_000.0, 9_000.0), known_from=0.0)
    ignored = replay(jobs, Calendar("ignore", (WINDOW,), (booking,)))
    plain = Engine(
        jobs, ClusterSpec.uniform(1, 2, "V100-16GB"), (V100,), policy_setup("paika")
    ).run()
    assert [(r.first_held, r.end) for r in ignored.records] == [
        (r.first_held, r.end) for r in plain.records
    ]
    (window,) = ignored.windows
    # Job 1 from 0 and two short jobs one after the other on the other card until 9,001 s.
    assert window.busy_gpu_s == 10_000 + 3 * 3_000 and window.stopped == 0
    (figures,) = ignored.bookings
    assert figures.available == 0 and not figures.honoured
