"""Preemption rules, one named case each: who may be stopped, for whom, how often, with what
grace, and why (builders, no mocks)."""

from __future__ import annotations

from dataclasses import replace

from builders import NOW, host, job, running, snapshot

from scheduler.policy.plan import PreemptCode
from scheduler.policy.scheduler import schedule
from scheduler.policy.snapshot import HOUR, Knobs, Running


def checkpointing(r: Running, *, grace_s: float | None = 120.0, preemptions: int = 0) -> Running:
    """The running job, declared preemptible (it checkpoints and resumes)."""
    return replace(r, preemptible=True, grace_s=grace_s, preemptions=preemptions)


def stops(plan) -> list[tuple[int, int, PreemptCode]]:  # type: ignore[no-untyped-def]
    return [(p.job_id, p.for_job, p.code) for p in plan.preemptions]


def test_a_preemptible_job_is_stopped_for_a_core_job_with_its_own_grace() -> None:
    h = host("h1", "A100-80GB", 2)
    victim = checkpointing(running(9, h, 2, ends_in_h=10), grace_s=90.0)
    plan = schedule(snapshot([h], [job(1, gpus=2, priority="core")], [victim]))
    assert stops(plan) == [(9, 1, PreemptCode.FOR_CORE)]
    assert plan.preemptions[0].deadline == NOW + 90.0
    assert "core job #1" in plan.preemptions[0].reason
    # Without a grace of its own, the policy's grace applies.
    plain = checkpointing(running(9, h, 2, ends_in_h=10), grace_s=None)
    knobs = Knobs(idle_grace_s=300.0)
    again = schedule(snapshot([h], [job(1, gpus=2, priority="core")], [plain], knobs=knobs))
    assert again.preemptions[0].deadline == NOW + 300.0


def test_a_job_that_did_not_declare_it_is_never_stopped() -> None:
    h = host("h1", "A100-80GB", 2)
    normal = running(9, h, 2, ends_in_h=100)
    assert schedule(snapshot([h], [job(1, gpus=2, priority="core")], [normal])).preemptions == ()
    # Nor for much shorter work.
    assert schedule(snapshot([h], [job(1, gpus=2, hours=0.2)], [normal])).preemptions == ()


def test_a_core_job_is_never_stopped_even_if_it_checkpoints() -> None:
    h = host("h1", "A100-80GB", 2)
    core = checkpointing(running(9, h, 2, ends_in_h=100, priority="core"))
    for waiting in (job(1, gpus=2, priority="core"), job(1, gpus=2, hours=0.1)):
        assert schedule(snapshot([h], [waiting], [core])).preemptions == ()


def test_no_job_is_stopped_more_than_the_cap_nor_soon_after_its_start() -> None:
    h = host("h1", "A100-80GB", 2)
    core_job = job(1, gpus=2, priority="core")
    knobs = Knobs(preempt_max_per_job=2, preempt_min_run_s=1800.0)
    twice = checkpointing(running(9, h, 2, ends_in_h=10), preemptions=2)
    assert schedule(snapshot([h], [core_job], [twice], knobs=knobs)).preemptions == ()
    once = checkpointing(running(9, h, 2, ends_in_h=10), preemptions=1)
    assert stops(schedule(snapshot([h], [core_job], [once], knobs=knobs))) == [
        (9, 1, PreemptCode.FOR_CORE)
    ]
    fresh = replace(once, started_at=NOW - 1700.0)  # 28 min since its last start
    assert schedule(snapshot([h], [core_job], [fresh], knobs=knobs)).preemptions == ()
    assert stops(
        schedule(snapshot([h], [core_job], [replace(fresh, started_at=NOW - 1800.0)], knobs=knobs))
    ) == [(9, 1, PreemptCode.FOR_CORE)]


def test_much_shorter_work_stops_a_long_preemptible_job_srtf_like() -> None:
    h = host("h1", "A100-80GB", 1)
    long_run = checkpointing(running(9, h, 1, ends_in_h=100))
    plan = schedule(snapshot([h], [job(1, hours=2)], [long_run]))
    assert stops(plan) == [(9, 1, PreemptCode.FOR_SHORTER)]
    assert "shorter job #1" in plan.preemptions[0].reason
    # Not much shorter: 100 h left is under 8 × 20 h.
    assert schedule(snapshot([h], [job(1, hours=20)], [long_run])).preemptions == ()
    # Switched off: only core work preempts.
    off = Knobs(shorter_factor=None)
    assert schedule(snapshot([h], [job(1, hours=2)], [long_run], knobs=off)).preemptions == ()
    off = Knobs(preemptible_preemption=False)
    assert schedule(snapshot([h], [job(1, hours=2)], [long_run], knobs=off)).preemptions == ()


def test_short_work_does_not_stop_anyone_when_gpus_free_up_within_its_own_run_time() -> None:
    a = host("a", "A100-80GB", 1)
    b = host("b", "A100-80GB", 1)
    long_run = checkpointing(running(9, a, 1, ends_in_h=100))
    ending = running(8, b, 1, ends_in_h=1.5)  # frees a GPU before a 2 h job would have run
    assert schedule(snapshot([a, b], [job(1, hours=2)], [long_run, ending])).preemptions == ()
    later = running(8, b, 1, ends_in_h=3)  # waiting 3 h for a 2 h job: stop the long one
    plan = schedule(snapshot([a, b], [job(1, hours=2)], [long_run, later]))
    assert stops(plan) == [(9, 1, PreemptCode.FOR_SHORTER)]


def test_shorter_work_stops_only_its_own_or_a_lower_class() -> None:
    h = host("h1", "A100-80GB", 1)
    normal = checkpointing(running(9, h, 1, ends_in_h=100))
    assert schedule(snapshot([h], [job(1, hours=1, priority="idle")], [normal])).preemptions == ()
    idle = checkpointing(running(9, h, 1, ends_in_h=100, priority="idle"))
    assert stops(schedule(snapshot([h], [job(1, hours=1)], [idle]))) == [
        (9, 1, PreemptCode.FOR_SHORTER)
    ]


def test_idle_work_goes_before_preemptible_normal_work_and_no_more_than_needed() -> None:
    h = host("h1", "A100-80GB", 4)
    normal = checkpointing(running(8, h, 2, ends_in_h=10))
    idle = running(9, h, 2, ends_in_h=10, priority="idle", offset=2)
    plan = schedule(snapshot([h], [job(1, gpus=2, priority="core")], [normal, idle]))
    assert stops(plan) == [(9, 1, PreemptCode.IDLE_FOR_CORE)]
    # A job already being stopped is counted, not asked twice, and frees room for the next.
    asked = replace(idle, preempting=True)
    plan = schedule(
        snapshot(
            [h], [job(1, gpus=2, priority="core"), job(2, gpus=2, priority="core")], [normal, asked]
        )
    )
    assert stops(plan) == [(8, 2, PreemptCode.FOR_CORE)]


def test_a_job_waiting_for_its_data_stops_nobody() -> None:
    h = host("h1", "A100-80GB", 1)
    long_run = checkpointing(running(9, h, 1, ends_in_h=100))
    for waiting in (job(1, ready=False, priority="core"), job(1, ready=False, hours=0.5)):
        assert schedule(snapshot([h], [waiting], [long_run])).preemptions == ()


def test_the_stop_frees_room_for_one_waiting_job_only() -> None:
    h = host("h1", "A100-80GB", 1)
    long_run = checkpointing(running(9, h, 1, ends_in_h=100))
    plan = schedule(snapshot([h], [job(1, hours=1), job(2, hours=1)], [long_run]))
    assert len(plan.preemptions) == 1


def test_estimates_past_their_end_count_as_time_left() -> None:
    # A job past its estimate is expected to run on for half the time it has run: 10 h in,
    # 5 h more; that is under 8 × a 1 h job, so it is not stopped for it.
    h = host("h1", "A100-80GB", 1)
    overran = replace(checkpointing(running(9, h, 1, ends_in_h=0)), started_at=NOW - 10 * HOUR)
    assert schedule(snapshot([h], [job(1, hours=1)], [overran])).preemptions == ()
    assert stops(schedule(snapshot([h], [job(1, hours=0.5)], [overran]))) == [
        (9, 1, PreemptCode.FOR_SHORTER)
    ]


def test_a_job_that_may_stop_more_finds_room_where_the_job_before_it_found_none() -> None:
    """Jobs passed over because one like them found no room to stop for: only those that may
    stop the same jobs or fewer (as long a floor on what the victims have left, as many GPUs)."""
    aged = Knobs(aging_drains=None, starve_after_drains=None)  # 24 h doubling, no backstop
    h = host("h1", "A100-80GB", 2)
    long_left = checkpointing(running(8, h, 1, ends_in_h=10))
    shorter_left = checkpointing(running(9, h, 1, ends_in_h=3, offset=1))
    # Job 1 (2 GPUs for 0.5 h, aged ahead of job 2) may stop only what has 4 h left or more;
    # job 2 (2 GPUs for 0.25 h) also what has 2 h left: both.
    first, second = job(1, gpus=2, hours=1, waited_h=30), job(2, gpus=2, hours=0.5)
    plan = schedule(snapshot([h], [first, second], [long_left, shorter_left], knobs=aged))
    assert stops(plan) == [(8, 2, PreemptCode.FOR_SHORTER), (9, 2, PreemptCode.FOR_SHORTER)]
    # As long a floor but fewer GPUs: job 2 needs only the one GPU job 8 holds.
    held = running(9, h, 1, ends_in_h=10, offset=1)  # not preemptible
    first, second = job(1, gpus=2, hours=2, waited_h=30), job(2, gpus=1, hours=1)
    plan = schedule(snapshot([h], [first, second], [long_left, held], knobs=aged))
    assert stops(plan) == [(8, 2, PreemptCode.FOR_SHORTER)]
