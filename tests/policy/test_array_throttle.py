"""The policy and an array's max_running (Pending.array_limit, issue 32): never more of its
jobs running at once than it allows, counting those already running and those it starts in
the same pass; the rest wait with that reason and block nobody."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.policy.plan import WaitCode
from scheduler.policy.scheduler import schedule
from tests.policy.builders import host, job, occupy, running, snapshot


def _member(job_id: int, array: int = 40, limit: int | None = 2):  # type: ignore[no-untyped-def]
    return replace(job(job_id), array_id=array, array_limit=limit)


def test_at_most_max_running_start_and_the_rest_say_why() -> None:
    hosts = (host("gpu-a", "A100-80GB", 8),)
    pending = [_member(n) for n in range(40, 45)] + [job(50)]
    plan = schedule(snapshot(hosts, pending), explain=True)
    assert sorted(s.job_id for s in plan.starts) == [40, 41, 50]
    assert (plan.waits[42].code, plan.waits[42].array) == (WaitCode.ARRAY_THROTTLED, 40)


def test_running_jobs_of_the_array_count() -> None:
    a = host("gpu-a", "A100-80GB", 4)
    already = replace(running(40, a, 1, ends_in_h=2), array_id=40)
    plan = schedule(snapshot(occupy([a], already), [_member(41), _member(42)], [already]))
    assert [s.job_id for s in plan.starts] == [41]


def test_no_limit_and_other_arrays_are_not_held() -> None:
    hosts = (host("gpu-a", "A100-80GB", 8),)
    pending = [_member(n, limit=None) for n in range(40, 43)] + [
        _member(n, array=60, limit=1) for n in range(60, 62)
    ]
    plan = schedule(snapshot(hosts, pending), explain=False)
    assert sorted(s.job_id for s in plan.starts) == [40, 41, 42, 60]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 6), st.integers(1, 12), st.integers(0, 4), st.integers(1, 16))
def test_an_array_never_runs_more_than_it_allows(
    limit: int, size: int, already: int, cards: int
) -> None:
    a = host("gpu-a", "A100-80GB", cards + already)
    runs = [
        replace(running(100 + i, a, 1, ends_in_h=5, offset=i), array_id=7) for i in range(already)
    ]
    hosts = [a]
    for run in runs:
        hosts = list(occupy(hosts, run))
    pending = [replace(job(200 + i), array_id=7, array_limit=limit) for i in range(size)]
    plan = schedule(snapshot(hosts, pending, runs), explain=True)
    assert already + len(plan.starts) <= max(limit, already)
