"""A core job that may preempt idle or preemptible work is given an ETA that counts on it,
not the end of the work it would stop (issue 29: "about 10 h" for a job that started a
minute later)."""

from __future__ import annotations

from dataclasses import replace

from scheduler.policy.scheduler import schedule
from scheduler.policy.snapshot import HOUR
from tests.policy.builders import NOW, host, job, running, snapshot


def test_a_core_job_s_eta_counts_on_stopping_idle_work() -> None:
    h = host("h1", "A100-80GB", 2)
    idle = running(9, h, 2, ends_in_h=10, priority="idle")
    plan = schedule(snapshot([h], [job(1, gpus=2, priority="core")], [idle]), explain=True)
    assert [p.job_id for p in plan.preemptions] == [9]
    eta = plan.waits[1].eta
    assert eta is not None and eta <= NOW + HOUR, (eta - NOW) / HOUR if eta else None


def test_a_core_job_s_eta_counts_on_stopping_preemptible_work_past_its_minimum_run() -> None:
    h = host("h1", "A100-80GB", 2)
    # Preemptible, started a minute ago: it may be stopped once it has run 30 min.
    work = replace(running(9, h, 2, ends_in_h=10), preemptible=True, started_at=NOW - 60)
    plan = schedule(snapshot([h], [job(1, gpus=2, priority="core")], [work]), explain=True)
    eta = plan.waits[1].eta
    assert eta is not None and eta <= NOW + HOUR, (eta - NOW) / HOUR if eta else None
    # A normal job behind it is not promised that: it waits for the work to end.
    plan = schedule(snapshot([h], [job(2, gpus=2)], [work]), explain=True)
    assert plan.waits[2].eta is not None and plan.waits[2].eta >= NOW + 9 * HOUR
