"""The policy and a host's planned maintenance (Host.closes_at, issue 32): a job is started on
a host only when it ends, by its estimate and the margin, before the window opens; a job that
would overrun it goes to another host or waits; shared cards keep the same rule."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.policy.capacity import MAINTENANCE_MARGIN
from scheduler.policy.matching import CardNeeds
from scheduler.policy.scheduler import schedule
from scheduler.policy.snapshot import HOUR
from tests.policy.builders import NOW, host, job, running, snapshot


def _closing(h, in_hours: float):  # type: ignore[no-untyped-def]
    return replace(h, closes_at=NOW + in_hours * HOUR)


def test_a_job_that_would_overrun_the_window_is_not_started_there() -> None:
    a = _closing(host("gpu-a", "A100-80GB", 2), in_hours=2)
    plan = schedule(snapshot([a], [job(1, hours=4)]), explain=True)
    assert plan.starts == ()


def test_a_job_that_ends_before_the_window_with_its_margin_starts_there() -> None:
    a = _closing(host("gpu-a", "A100-80GB", 2), in_hours=2)
    fits = 2 / MAINTENANCE_MARGIN - 0.01  # GPU-hours on one GPU: its wall time
    plan = schedule(snapshot([a], [job(1, hours=fits)]), explain=True)
    assert [s.job_id for s in plan.starts] == [1]
    too_close = schedule(snapshot([a], [job(2, hours=1.9)]), explain=True)
    assert too_close.starts == ()  # 1.9 h × 1.25 passes the window's start


def test_a_long_job_goes_to_a_host_without_maintenance() -> None:
    a = _closing(host("gpu-a", "A100-80GB", 2), in_hours=1)
    b = host("gpu-b", "A100-80GB", 2)
    plan = schedule(snapshot([a, b], [job(1, hours=10)]), explain=True)
    assert [s.hosts for s in plan.starts] == [("gpu-b",)]


def test_a_host_in_its_window_takes_nothing() -> None:
    a = replace(host("gpu-a", "A100-80GB", 2), schedulable=False, out="maintenance")
    plan = schedule(snapshot([a], [job(1, hours=0.1)]), explain=True)
    assert plan.starts == ()
    assert plan.waits[1].hosts == (("gpu-a", "maintenance"),)


def test_a_shared_card_on_a_closing_host_takes_no_job_that_would_overrun() -> None:
    a = replace(_closing(host("gpu-a", "A100-80GB", 1), in_hours=1), sharing="mps")
    short = replace(job(1, hours=0.5, mem=20), share=True, needs=CardNeeds(None, 20))
    long = replace(job(2, hours=5, mem=20), share=True, needs=CardNeeds(None, 20))
    plan = schedule(snapshot([a], [short, long]), explain=True)
    assert [s.job_id for s in plan.starts] == [1]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0.05, 20), min_size=1, max_size=10),
    st.floats(0.1, 24),
    st.integers(1, 4),
)
def test_no_start_on_a_closing_host_outlasts_its_window(
    hours: list[float], closes_in: float, gpus: int
) -> None:
    a = _closing(host("gpu-a", "A100-80GB", gpus), in_hours=closes_in)
    b = host("gpu-b", "T4-16GB", 1)
    pending = [job(n, hours=h) for n, h in enumerate(hours, start=1)]
    plan = schedule(snapshot([a, b], pending), explain=True)
    by_id = {p.id: p for p in pending}
    for start in plan.starts:
        if "gpu-a" in start.hosts:
            end = NOW + by_id[start.job_id].run_seconds * MAINTENANCE_MARGIN
            assert end <= NOW + closes_in * HOUR


def test_work_that_ends_before_the_window_goes_to_the_closing_host_first() -> None:
    # Both hosts could take it; the open one keeps its cards for work that would not fit.
    b = host("gpu-b", "A100-80GB", 2)
    a = _closing(host("gpu-a", "A100-80GB", 2), in_hours=6)
    plan = schedule(snapshot([b, a], [job(1, hours=1)]), explain=True)
    assert [s.hosts for s in plan.starts] == [("gpu-a",)]


def test_a_long_jobs_reservation_is_not_on_the_host_it_could_not_run_on() -> None:
    # The closing host frees a card first, but the core job could not run there before its
    # window: its reservation goes to the open host, and short work fills the closing one.
    a = _closing(host("gpu-a", "A100-80GB", 2), in_hours=3)
    b = host("gpu-b", "A100-80GB", 2)
    holds_a = running(90, a, 1, ends_in_h=0.5)
    holds_b = running(91, b, 2, ends_in_h=5)
    core = job(1, gpus=2, hours=20, priority="core")
    short = job(2, hours=2)
    plan = schedule(snapshot([a, b], [core, short], [holds_a, holds_b]), explain=True)
    assert [(s.job_id, s.hosts) for s in plan.starts] == [(2, ("gpu-a",))]
