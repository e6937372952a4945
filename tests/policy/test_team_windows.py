"""The policy and cards booked for a team (Snapshot.team_windows, issue 32): before the
window no other team's job that would still run when it opens takes the cards it books;
inside it other teams leave that many free; the team's own jobs are never held back."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.policy.plan import WaitCode
from scheduler.policy.scheduler import schedule
from scheduler.policy.snapshot import HOUR, TeamWindow
from tests.policy.builders import NOW, host, job, occupy, running, snapshot


def _booked(gpus: int, starts_in_h: float, lasts_h: float = 4, team: str = "nlp") -> TeamWindow:
    return TeamWindow(
        1, "A100-80GB", gpus, team, NOW + starts_in_h * HOUR, NOW + (starts_in_h + lasts_h) * HOUR
    )


def _snap(hosts, pending, runs=(), windows=()):  # type: ignore[no-untyped-def]
    return replace(snapshot(hosts, pending, runs), team_windows=tuple(windows))


def test_before_the_window_long_work_of_others_leaves_the_booked_cards() -> None:
    hosts = (host("gpu-a", "A100-80GB", 4),)
    pending = [job(1, gpus=2, hours=20), job(2, gpus=2, hours=20), job(3, gpus=2, hours=20)]
    plan = schedule(_snap(hosts, pending, windows=[_booked(2, starts_in_h=5)]), explain=True)
    assert [s.job_id for s in plan.starts] == [1]  # 2 of 4 cards stay for nlp
    assert (plan.waits[2].code, plan.waits[2].team) == (WaitCode.BOOKED_FOR_TEAM, "nlp")


def test_short_work_that_ends_before_the_window_takes_the_cards() -> None:
    hosts = (host("gpu-a", "A100-80GB", 4),)
    pending = [job(n, gpus=2, hours=2) for n in (1, 2)]  # 1 h each on 2 cards
    plan = schedule(_snap(hosts, pending, windows=[_booked(4, starts_in_h=5)]), explain=True)
    assert sorted(s.job_id for s in plan.starts) == [1, 2]


def test_the_team_takes_its_booked_cards_and_others_wait_inside_the_window() -> None:
    hosts = (host("gpu-a", "A100-80GB", 4),)
    theirs = replace(job(1, gpus=2, hours=2), team="nlp")
    others = job(2, gpus=2, hours=0.2)
    window = _booked(4, starts_in_h=-1)
    plan = schedule(_snap(hosts, [others, theirs], windows=[window]), explain=True)
    assert [s.job_id for s in plan.starts] == [1]
    assert plan.waits[2].code is WaitCode.BOOKED_FOR_TEAM


def test_inside_the_window_others_use_what_the_booking_does_not_hold() -> None:
    a = host("gpu-a", "A100-80GB", 6)
    held = replace(running(9, a, 2, ends_in_h=3), team="nlp")
    hosts = occupy([a], held)
    plan = schedule(
        _snap(hosts, [job(2, gpus=2, hours=1), job(3, gpus=2, hours=1)], [held], [_booked(4, -1)]),
        explain=True,
    )
    # nlp holds 2 of its 4: 2 more stay free for it, 2 are others'.
    assert [s.job_id for s in plan.starts] == [2]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 4), st.floats(0.1, 40), st.booleans()), min_size=1, max_size=8
    ),
    st.integers(1, 8),
    st.floats(0.5, 24),
)
def test_others_never_leave_fewer_free_at_the_start_than_booked(
    jobs: list[tuple[int, float, bool]], booked: int, starts_in: float
) -> None:
    hosts = (host("gpu-a", "A100-80GB", 8),)
    pending = [
        replace(job(n, gpus=g, hours=h * g), team="nlp" if mine else "vision")
        for n, (g, h, mine) in enumerate(jobs, start=1)
    ]
    window = _booked(booked, starts_in_h=starts_in)
    plan = schedule(_snap(hosts, pending, windows=[window]), explain=True)
    by_id = {p.id: p for p in pending}
    held_at_start = sum(
        len(s.gpu_ids)
        for s in plan.starts
        if by_id[s.job_id].team != "nlp"
        and NOW + by_id[s.job_id].run_seconds * 1.25 > window.starts
    )
    assert 8 - held_at_start >= min(booked, 8) or held_at_start == 0


def test_a_job_the_booking_holds_back_keeps_no_place_on_the_booked_cards() -> None:
    # The other team's job comes first (it has waited long), but the cards are booked: a
    # place kept for it would be those very cards, and the team's own job would wait behind it.
    hosts = (host("gpu-a", "A100-80GB", 2),)
    first = job(2, gpus=2, hours=2, waited_h=30)
    theirs = replace(job(1, gpus=2, hours=4), team="nlp")
    plan = schedule(_snap(hosts, [first, theirs], windows=[_booked(2, -1)]), explain=True)
    assert [s.job_id for s in plan.starts] == [1]
    assert plan.waits[2].code is WaitCode.BOOKED_FOR_TEAM
