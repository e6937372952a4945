"""The policy and jobs that wait for other jobs (Pending.waits_for, issue 32): such a job never
starts, never has anything stopped for it, takes no reservation, says which job it waits for,
and blocks nobody behind it."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.policy.plan import WaitCode
from scheduler.policy.scheduler import could_act, schedule
from scheduler.policy.snapshot import UPSTREAM_BROKEN, UPSTREAM_WAITING
from tests.policy.builders import host, job, occupy, running, snapshot


def test_a_job_waiting_for_another_does_not_start_and_says_which() -> None:
    hosts = (host("gpu-a", "A100-80GB", 2),)
    train = replace(job(2), waits_for=((1, UPSTREAM_WAITING),))
    other = job(3)
    plan = schedule(snapshot(hosts, [train, other]), explain=True)
    assert [s.job_id for s in plan.starts] == [3]
    wait = plan.waits[2]
    assert (wait.code, wait.upstream, wait.eta) == (WaitCode.WAITING_FOR_JOB, 1, None)


def test_a_held_job_says_which_upstream_failed_first() -> None:
    hosts = (host("gpu-a", "A100-80GB", 1),)
    held = replace(job(5), waits_for=((3, UPSTREAM_WAITING), (4, UPSTREAM_BROKEN)))
    plan = schedule(snapshot(hosts, [held]), explain=True)
    assert plan.starts == ()
    assert (plan.waits[5].code, plan.waits[5].upstream) == (WaitCode.UPSTREAM_FAILED, 4)


def test_a_waiting_core_job_stops_nobody_and_reserves_nothing() -> None:
    a = host("gpu-a", "A100-80GB", 2)
    idle = running(9, a, 2, ends_in_h=10, priority="idle")
    core = replace(job(2, gpus=2, priority="core"), waits_for=((1, UPSTREAM_WAITING),))
    snap = snapshot(occupy([a], idle), [core], [idle])
    plan = schedule(snap, explain=True)
    assert plan.preemptions == () and plan.reservations == ()
    assert not could_act(snap)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 4), st.booleans(), st.sampled_from(["core", "normal", "idle"])),
        min_size=1,
        max_size=12,
    ),
    st.integers(1, 8),
)
def test_no_job_that_waits_for_another_ever_starts(
    jobs: list[tuple[int, bool, str]], free: int
) -> None:
    hosts = (host("gpu-a", "A100-80GB", free),)
    pending = []
    for number, (gpus, waits, priority) in enumerate(jobs, start=10):
        upstream = ((number - 1, UPSTREAM_WAITING),) if waits else ()
        pending.append(replace(job(number, gpus=gpus, priority=priority), waits_for=upstream))
    plan = schedule(snapshot(hosts, pending), explain=True)
    waiting = {p.id for p in pending if p.waits_for}
    assert not waiting & {s.job_id for s in plan.starts}
    assert all(plan.waits[j].code is WaitCode.WAITING_FOR_JOB for j in waiting)
    # Those that wait for no job are placed as if the others were not there.
    alone = schedule(snapshot(hosts, [p for p in pending if not p.waits_for]), explain=False)
    assert {s.job_id for s in plan.starts} == {s.job_id for s in alone.starts}
