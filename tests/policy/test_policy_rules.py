"""The scheduling rules, one named case each (builders, no mocks)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from builders import CATALOG, NOW, host, job, running, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.policy.plan import WaitCode
from scheduler.policy.quota import QuotaState
from scheduler.policy.scheduler import schedule
from scheduler.policy.snapshot import HOUR, Backfill, Host, Knobs, Pending, WithinClass

# The default backstop, in what FIFO would make a newcomer wait.
BACKSTOP = Knobs().starve_after_drains or 0.0


def started(plan) -> list[int]:  # type: ignore[no-untyped-def]
    return [s.job_id for s in plan.starts]


def test_core_before_normal_before_idle() -> None:
    hosts = [host("h1", "A100-80GB", 1)]
    plan = schedule(
        snapshot(hosts, [job(1, priority="idle"), job(2), job(3, priority="core")]), explain=True
    )
    assert started(plan) == [3]
    assert [plan.waits[i].position for i in (2, 1)] == [2, 3]
    assert plan.waits[2].code is WaitCode.NO_TYPE_FREE and plan.waits[2].eta == NOW + HOUR
    assert plan.waits[1].code is WaitCode.BEHIND_HIGHER_PRIORITY


def test_a_job_whose_data_is_not_ready_never_holds_a_gpu_nor_blocks() -> None:
    hosts = [host("h1", "A100-80GB", 1)]
    plan = schedule(snapshot(hosts, [job(1, priority="core", ready=False), job(2)]), explain=True)
    assert started(plan) == [2]
    assert plan.waits[1].code is WaitCode.WAITING_FOR_DATA and plan.waits[1].eta is None
    assert plan.waits[1].position == 1  # it keeps its place


def test_the_cheapest_adequate_card_is_chosen_over_the_big_one() -> None:
    hosts = [host("big", "A100-80GB", 8), host("small", "T4-16GB", 4)]
    plan = schedule(snapshot(hosts, [job(1, gpus=2), job(2, mem=40)]))
    by_job = {s.job_id: s for s in plan.starts}
    assert by_job[1].gpu_type == "T4-16GB" and by_job[1].hosts == ("small",)
    assert by_job[2].gpu_type == "A100-80GB"  # T4 has too little memory
    verdicts = {a.gpu_type: a.verdict for a in by_job[2].match.alternatives}
    assert verdicts["T4-16GB"] == "16 GiB < 40 GiB needed"
    assert verdicts["A100-40GB"] == "no host has enough of them"


def test_a_costlier_card_only_after_the_wait_or_when_no_cheaper_frees_soon() -> None:
    small, big = host("small", "T4-16GB", 1), host("big", "A100-80GB", 1)
    soon = running(9, small, 1, ends_in_h=0.25)
    plan = schedule(snapshot([small, big], [job(1, hours=4)], [soon]), explain=True)
    assert started(plan) == []  # a T4 frees in 15 min: wait for it
    assert plan.waits[1].code is WaitCode.WAITING_FOR_CHEAPER_TYPE
    waited = schedule(snapshot([small, big], [job(1, hours=4, waited_h=2)], [soon]))
    assert [s.gpu_type for s in waited.starts] == ["A100-80GB"]
    late = running(9, small, 1, ends_in_h=5)
    assert [s.gpu_type for s in schedule(snapshot([small, big], [job(1)], [late])).starts] == [
        "A100-80GB"
    ]


def test_a_costlier_card_is_left_to_the_jobs_that_can_use_nothing_else() -> None:
    """A job that may take any card and has waited its hour for a T4 does not take the one
    free A100 an A100-only job of its class waits for: it waits for the T4 (15 min), the
    A100-only job starts. With a second A100 free, or only an idle job wanting it, it
    takes the A100 as before."""
    small = host("small", "T4-16GB", 1)
    soon = running(9, small, 1, ends_in_h=0.25)
    any_card = job(1, hours=4, waited_h=2)

    def plan(big: Host, *pending: Pending):  # type: ignore[no-untyped-def]
        return schedule(snapshot([small, big], [any_card, *pending], [soon]), explain=True)

    one = host("big", "A100-80GB", 1)
    needs_it = job(2, hours=4, waited_h=1, types=("A100-80GB",))
    left = plan(one, needs_it)
    assert [(s.job_id, s.gpu_type) for s in left.starts] == [(2, "A100-80GB")]
    assert left.waits[1].code is WaitCode.WAITING_FOR_CHEAPER_TYPE
    assert left.waits[1].costlier == "A100-80GB" and left.waits[1].free_at == NOW + HOUR / 4
    two = host("big2", "A100-80GB", 2)
    assert sorted(started(plan(two, needs_it))) == [1, 2]  # enough for both
    idle = replace(needs_it, priority="idle")
    assert started(plan(one, idle)) == [1]  # a lower class does not hold it back
    assert started(plan(one)) == [1]


def test_the_wait_for_a_cheaper_card_is_a_share_of_the_jobs_own_run() -> None:
    small, big = host("small", "T4-16GB", 1), host("big", "A100-80GB", 1)

    def types(hours: float, frees_in_h: float, knobs: Knobs | None = None) -> list[str]:
        busy = running(9, small, 1, ends_in_h=frees_in_h)
        plan = schedule(snapshot([small, big], [job(999, hours=hours)], [busy], knobs=knobs))
        return [s.gpu_type for s in plan.starts]

    assert types(4, 0.25) == []  # a 4-hour run waits 15 min for the T4 (up to 1 h)
    assert types(0.5, 0.25) == ["A100-80GB"]  # a 30-min run waits at most 7.5 min
    assert types(40, 2) == ["A100-80GB"]  # never over costlier_after_s (1 h), however long
    assert types(0.5, 0.25, Knobs(costlier_after_runs=None)) == []  # the absolute hour alone


def test_a_job_waiting_for_a_cheaper_card_does_not_block_one_that_waited_enough() -> None:
    """A 30-min job waits 5 min for the T4; a 4-hour job behind it that has waited over its
    hour takes the A100 (the pass's shortcut for jobs as blocked as one already tried must not
    count a job that only chose to wait)."""
    small, big = host("small", "T4-16GB", 1), host("big", "A100-80GB", 2)
    busy = running(9, small, 1, ends_in_h=5 / 60)
    queue = [job(999, hours=0.5), job(998, hours=4, waited_h=1.1)]
    for explain in (False, True):
        plan = schedule(snapshot([small, big], queue, [busy]), explain=explain)
        assert [(s.job_id, s.gpu_type) for s in plan.starts] == [(998, "A100-80GB")]


def test_a_job_waiting_for_a_cheaper_card_keeps_no_costlier_one_idle() -> None:
    """It is kept a place on the T4 it waits for; the A100 it declined runs other work."""
    small, big = host("small", "T4-16GB", 1), host("big", "A100-80GB", 1)
    busy = running(9, small, 1, ends_in_h=0.25)
    waiting, other = job(998, hours=4), job(999, hours=8, mem=40)  # only an A100 fits 999
    plan = schedule(snapshot([small, big], [waiting, other], [busy]), explain=True)
    assert [(s.job_id, s.gpu_type) for s in plan.starts] == [(999, "A100-80GB")]
    assert plan.waits[998].code is WaitCode.WAITING_FOR_CHEAPER_TYPE
    assert [(r.job_id, r.gpu_type) for r in plan.reservations] == [(998, "T4-16GB")]


def test_all_gpus_of_a_job_on_one_host_best_fit() -> None:
    hosts = [host("roomy", "A100-80GB", 8), host("snug", "A100-80GB", 4)]
    plan = schedule(snapshot(hosts, [job(1, gpus=4, hours=4)]))
    assert plan.starts[0].hosts == ("snug",)  # leaves the 8-GPU host whole for a big job
    # A job that fits on one host never spreads over two, even if two have enough together.
    a, b = host("a", "A100-80GB", 4), host("b", "A100-80GB", 2)
    assert (
        started(schedule(snapshot([a, b], [job(1, gpus=3)], [running(9, a, 2, ends_in_h=1)]))) == []
    )
    # A job bigger than any host takes whole hosts.
    wide = schedule(
        snapshot([host("c", "A100-80GB", 4), host("d", "A100-80GB", 4)], [job(1, gpus=8)])
    )
    assert sorted(wide.starts[0].hosts) == ["c", "d"]


def test_gpus_used_by_foreign_processes_are_not_booked() -> None:
    h = host("h1", "A100-80GB", 2)
    h = replace(h, gpus=(replace(h.gpus[0], foreign_memory_gib=30.0), h.gpus[1]))
    plan = schedule(snapshot([h], [job(1), job(2)]))
    assert [s.gpu_ids for s in plan.starts] == [(h.gpus[1].id,)]


def test_easy_backfill_never_delays_the_reservation() -> None:
    h = host("h1", "A100-80GB", 4)
    busy = running(9, h, 2, ends_in_h=2)  # 2 free now, 4 free in 2 h
    pending = [
        job(1, gpus=4, hours=8, priority="core"),
        job(2, gpus=1, hours=1),
        job(3, gpus=2, hours=10),
    ]
    plan = schedule(snapshot([h], pending, [busy]), explain=True)
    assert started(plan) == [2]  # ends in 1 h, before the big job can start; job 3 would delay it
    assert plan.waits[1].eta == NOW + 2 * HOUR
    assert plan.waits[3].code is WaitCode.BEHIND_HIGHER_PRIORITY


def test_every_waiting_core_job_keeps_its_place_not_only_the_first() -> None:
    # Core job 1 waits for host a (free in 1 h), core job 2 for host b (free in 2 h). A long
    # normal job could take b's two free cards without delaying job 1, but it would hold
    # job 2 back by eight hours: it waits. Short work that ends before still runs there.
    a, b = host("a", "A100-80GB", 4), host("b", "A100-80GB", 4)
    on_a = running(8, a, 4, ends_in_h=1)
    on_b = running(9, b, 2, ends_in_h=2)
    core = [job(1, gpus=4, hours=40, priority="core"), job(2, gpus=4, hours=40, priority="core")]
    long = job(3, gpus=2, hours=20)  # 10 h on two cards
    plan = schedule(snapshot([a, b], [*core, long], [on_a, on_b]), explain=True)
    assert started(plan) == []
    assert sorted(r.job_id for r in plan.reservations) == [1, 2]
    assert (plan.waits[1].eta, plan.waits[2].eta) == (NOW + HOUR, NOW + 2 * HOUR)
    assert plan.waits[3].code is WaitCode.BEHIND_HIGHER_PRIORITY
    short = job(4, gpus=2, hours=2)  # 1 h on two cards: done before job 2 can start
    plan = schedule(snapshot([a, b], [*core, short], [on_a, on_b]), explain=True)
    assert started(plan) == [4]
    # EASY as the simulator's baselines run it keeps the first blocked job's place only.
    easy = Knobs(core_reservations=False)
    plan = schedule(snapshot([a, b], [*core, long], [on_a, on_b], knobs=easy), explain=True)
    assert started(plan) == [3]
    assert [r.job_id for r in plan.reservations] == [1]


def test_a_job_the_free_cards_are_too_spread_for_keeps_its_place() -> None:
    # Four cards are free, two on each host: enough for a job of four, but not on one host.
    # Job 1 keeps EASY's place on host a (whole in 1 h). Job 2 is blocked only by where the
    # free cards are, so it keeps a place on host b (whole in 2 h) as well: a long idle job
    # that would hold b for ten hours waits, where before it took b's free cards and job 2
    # waited for it. Without free cards enough, a job keeps no place of its own.
    a, b = host("a", "A100-80GB", 4), host("b", "A100-80GB", 4)
    on_a, on_b = running(8, a, 2, ends_in_h=1), running(9, b, 2, ends_in_h=2)
    whole = [job(1, gpus=4, hours=16), job(2, gpus=4, hours=16)]
    long = job(3, hours=10, priority="idle")
    plan = schedule(snapshot([a, b], [*whole, long], [on_a, on_b]), explain=True)
    assert started(plan) == []
    assert sorted((r.job_id, r.start) for r in plan.reservations) == [
        (1, NOW + HOUR),
        (2, NOW + 2 * HOUR),
    ]
    assert (plan.waits[1].eta, plan.waits[2].eta) == (NOW + HOUR, NOW + 2 * HOUR)
    short = job(4, hours=1.5, priority="idle")  # ends before job 2 can start on b
    plan = schedule(snapshot([a, b], [*whole, short], [on_a, on_b]))
    assert started(plan) == [4]
    # The baselines keep EASY's one place: the long job takes b's cards.
    easy = Knobs(core_reservations=False, spread_reservations=False)
    plan = schedule(snapshot([a, b], [*whole, long], [on_a, on_b], knobs=easy))
    assert started(plan) == [3]
    # Three cards free for a job of four: it waits for cards, not for where they are.
    fuller = running(9, b, 3, ends_in_h=2)
    plan = schedule(snapshot([a, b], [*whole, long], [on_a, fuller]))
    assert [r.job_id for r in plan.reservations] == [1]
    assert started(plan) == [3]


def test_without_backfill_nobody_passes_a_blocked_job() -> None:
    h = host("h1", "A100-80GB", 4)
    busy = running(9, h, 2, ends_in_h=2)
    knobs = Knobs(
        respect_classes=False, within_class=WithinClass.SUBMIT_ORDER, backfill=Backfill.NONE
    )
    plan = schedule(snapshot([h], [job(1, gpus=4), job(2)], [busy], knobs=knobs))
    assert started(plan) == []


def test_headroom_is_held_for_core_work() -> None:
    knobs = Knobs(headroom={"A100-80GB": 1})
    hosts = [host("h1", "A100-80GB", 2)]
    plan = schedule(
        snapshot(hosts, [job(1), job(2), job(3, priority="core")], knobs=knobs), explain=True
    )
    assert sorted(started(plan)) == [1, 3]
    plan = schedule(snapshot(hosts, [job(1), job(2)], knobs=knobs), explain=True)
    assert started(plan) == [1]
    assert plan.waits[2].code is WaitCode.HELD_FOR_HEADROOM
    # a non-core job that needs more than the type has outside its headroom is told so
    never = schedule(snapshot(hosts, [job(1, gpus=2)], knobs=knobs), explain=True)
    assert never.waits[1].code is WaitCode.NEVER_FITS and never.waits[1].keeps_headroom
    assert never.waits[1].gpus == 2
    # core work already using the headroom frees the rest for everyone
    core_running = running(9, hosts[0], 1, ends_in_h=3, priority="core")
    assert started(schedule(snapshot(hosts, [job(1)], [core_running], knobs=knobs))) == [1]


def test_quota_exhausted_and_quota_expiring_before_the_end() -> None:
    hosts = [host("h1", "A100-80GB", 4)]
    quotas = {"vision": (QuotaState(1, "A100-80GB", 10.0, 8.0, _date()),)}
    plan = schedule(
        snapshot(
            hosts,
            [job(1, hours=4), job(2, hours=1)],
            quotas=quotas,
            quota_ends={1: NOW + 100 * HOUR},
        ),
        explain=True,
    )
    assert started(plan) == [2]
    assert plan.waits[1].code is WaitCode.QUOTA_EXHAUSTED
    assert plan.waits[1].left_hours == pytest.approx(1.0)
    assert plan.starts[0].quota_id == 1
    expiring = schedule(
        snapshot(hosts, [job(1, hours=2)], quotas=quotas, quota_ends={1: NOW + HOUR}), explain=True
    )
    assert started(expiring) == [] and expiring.waits[1].code is WaitCode.QUOTA_EXPIRES
    other_team = schedule(snapshot(hosts, [job(1, hours=40, team="nlp")], quotas=quotas))
    assert started(other_team) == [1]  # a team without quotas is not limited


def test_an_idle_job_blocking_core_work_is_asked_to_stop() -> None:
    h = host("h1", "A100-80GB", 2)
    idle = running(9, h, 2, ends_in_h=10, priority="idle")
    plan = schedule(snapshot([h], [job(1, gpus=2, priority="core")], [idle]))
    assert [(p.job_id, p.for_job) for p in plan.preemptions] == [(9, 1)]
    assert plan.preemptions[0].deadline == NOW + 600
    normal = running(9, h, 2, ends_in_h=10, priority="normal")
    assert schedule(snapshot([h], [job(1, gpus=2, priority="core")], [normal])).preemptions == ()
    asked = replace(idle, preempting=True)
    assert schedule(snapshot([h], [job(1, gpus=2, priority="core")], [asked])).preemptions == ()


def test_a_job_no_host_can_fit_says_so() -> None:
    plan = schedule(
        snapshot([host("h1", "T4-16GB", 2)], [job(1, gpus=1, mem=40), job(2, gpus=1)]), explain=True
    )
    assert started(plan) == [2]
    assert plan.waits[1].code is WaitCode.NEVER_FITS and plan.waits[1].eta is None


def test_every_pending_job_has_a_reason_and_the_pass_is_deterministic() -> None:
    hosts = [host("a", "A100-80GB", 8), host("b", "T4-16GB", 4)]
    pending = [
        job(
            i,
            gpus=1 + i % 4,
            hours=1 + i % 7,
            priority=("core", "normal", "idle")[i % 3],
            ready=i % 5 != 0,
        )
        for i in range(1, 60)
    ]
    snap = snapshot(hosts, pending)
    plan = schedule(snap, explain=True)
    assert set(plan.waits) | set(started(plan)) == {p.id for p in pending}
    assert all(w.as_of == snap.now for w in plan.waits.values())
    assert schedule(snap, explain=True) == plan


# Aging and the backstop in hours, as the policy file can set them.
ABSOLUTE = Knobs(aging_drains=None, starve_after_drains=None, starve_after_hours=432)


def test_shortest_first_with_bounded_aging_and_no_starvation() -> None:
    hosts = [host("h1", "A100-80GB", 1)]

    def first(big_hours: float, waited_h: float, knobs: Knobs = ABSOLUTE) -> list[int]:
        pending = [job(1, hours=big_hours, waited_h=waited_h), job(2, hours=1)]
        return started(schedule(snapshot(hosts, pending, knobs=knobs)))

    assert first(50, 0) == [2]  # shortest first
    # Aging doubles every 24 h: 50 GPU-hours (2 ** 5.6 times the other) still loses after
    # five days, and goes first after six, while the small job stays fresh.
    assert first(50, 5 * 24) == [2]
    assert first(50, 6 * 24) == [1]
    # A cap on aging ends that: the big job never catches up by aging alone...
    capped = replace(ABSOLUTE, max_aging_factor=8, starve_after_hours=None)
    assert first(50, 30 * 24, capped) == [2]
    # ...and the starvation guard is the backstop: past starve_after_hours a job goes first
    # whatever its size.
    assert first(10**7, 431) == [2]
    assert first(10**7, 433) == [1]
    assert first(50, 30 * 24, replace(capped, starve_after_hours=72)) == [1]


def test_scale_free_aging_and_backstop_follow_the_queues_drain_time() -> None:
    """By default the times are in drain times D: here 51 GPU-hours ready on one GPU, D = 51 h;
    aging doubles every D/4 = 12.75 h, so the 50 GPU-hour job (2 ** 5.64 times the other)
    goes first after about 72 h; a backstop of 1.5 D is 76.5 h."""
    hosts = [host("h1", "A100-80GB", 1)]

    def first(big_hours: float, small_hours: float, waited_h: float, knobs: Knobs) -> list[int]:
        pending = [job(1, hours=big_hours, waited_h=waited_h), job(2, hours=small_hours)]
        return started(schedule(snapshot(hosts, pending, knobs=knobs)))

    knobs = Knobs(fair_share_weight=0.0, starve_after_drains=1.5)
    assert first(50, 1, 70, knobs) == [2]
    assert first(50, 1, 73, knobs) == [1]
    no_aging = replace(knobs, max_aging_factor=1.0)
    assert first(50, 1, 76, no_aging) == [2]
    assert first(50, 1, 77, no_aging) == [1]  # past the backstop
    # The same queue with every estimate and wait k times longer orders the same way.
    for k in (0.1, 100.0):  # (the builder adds ~1,000 s to every wait)
        assert first(50 * k, 1 * k, 70 * k, knobs) == [2]
        assert first(50 * k, 1 * k, 73 * k, knobs) == [1]


def test_jobs_that_accept_only_a_scarce_type_are_timed_by_that_types_own_queue() -> None:
    """One T4 and eight A100s; the T4 queue holds 51 GPU-hours that can run nowhere else. The
    cluster drains in 51 / 9 = 5.7 h, but the T4 queue in 51 h: measured by the cluster,
    the day-old 50-hour T4 job would be past the backstop (8.5 h) and a one-hour T4 job
    would wait two days behind it. Measured by its own queue (backstop 76.5 h, aging doubling
    every 12.75 h) the short job goes first, as it would on a cluster of T4s alone."""
    hosts = [host("t4", "T4-16GB", 1), host("a100", "A100-40GB", 8)]
    knobs = Knobs(fair_share_weight=0.0)
    t4 = ("T4-16GB",)

    def first(types: tuple[str, ...] | None, waited_h: float) -> list[int]:
        pending = [
            job(1, hours=50, waited_h=waited_h, types=types),
            job(2, hours=1, types=types),
            job(3, hours=1, types=("A100-40GB",)),
        ]
        plan = schedule(snapshot(hosts, pending, knobs=knobs))
        return sorted(s.job_id for s in plan.starts if s.gpu_type == "T4-16GB")

    assert first(t4, 20) == [2]
    assert first(t4, 77) == [1]  # past the T4 queue's own backstop
    # Two T4 jobs alone on a cluster of one T4 are ordered the same way.
    alone = [job(1, hours=50, waited_h=20, types=t4), job(2, hours=1, types=t4)]
    assert started(schedule(snapshot([host("t4", "T4-16GB", 1)], alone, knobs=knobs))) == [2]


def test_the_backstop_counts_when_the_busy_gpus_free_up() -> None:
    """The one GPU is busy for 40 more hours and 4.5 GPU-hours wait. Counting only the queue,
    a newcomer would wait 4.5 h, and the 4-hour job that has waited 8 h would be past the
    backstop (6.75 h) and go before the half-hour one. But FIFO would make a newcomer wait
    44.5 h (the GPU frees in 40 h, then works the queue off): the backstop is 66.75 h, and the
    half-hour job goes first. Aging stays in the queue's own drain time (doubling every
    4.5 h / 4): how fast short work passes long work is a matter of the queue's sizes."""
    from scheduler.policy.scheduler import queue_order

    gpu = host("h1", "A100-80GB", 1)
    # The backstop alone, at 1.5 times what FIFO would make a newcomer wait.
    knobs = Knobs(fair_share_weight=0.0, max_aging_factor=1.0, starve_after_drains=1.5)

    def pending() -> list[Pending]:
        return [job(1, hours=4, waited_h=8), job(2, hours=0.5)]

    busy = snapshot([gpu], pending(), [running(9, gpu, 1, ends_in_h=40)], knobs=knobs)
    queue, scales = queue_order(busy)
    assert [j.id for j in queue] == [2, 1]
    assert scales.of(1).starve_after_s == pytest.approx(1.5 * 44.5 * HOUR)
    assert scales.of(1).aging_s == pytest.approx(0.25 * 4.5 * HOUR)
    idle = snapshot([gpu], pending(), knobs=knobs)
    assert [j.id for j in queue_order(idle)[0]] == [1, 2]  # 4.5 h: job 1 is past 6.75 h


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(0, 1e7, allow_nan=False), min_size=1, max_size=40),
    st.floats(0, 1e9, allow_nan=False),
)
def test_free_gpus_drain_when_the_work_is_done(delays: list[float], work: float) -> None:
    """Each GPU works from when it frees: by the drain time they have done exactly the work,
    and no GPU is counted before it frees (all free now: the work ÷ the GPUs)."""
    from scheduler.policy.ranking import FreeGpus

    at = FreeGpus(delays).drain(work)
    done = sum(max(0.0, at - d) for d in delays)
    assert done == pytest.approx(work, rel=1e-9, abs=1e-3)
    assert at >= min(delays)
    assert FreeGpus([0.0] * len(delays)).drain(work) == pytest.approx(work / len(delays))


def test_a_jobs_own_types_never_shorten_its_time_scale() -> None:
    """Only a scarce type's longer queue counts: a job whose types drain sooner than the
    cluster keeps the cluster's scale, and so does every job where the cluster has one type."""
    from scheduler.policy.ranking import time_scales

    knobs = Knobs()
    t4, a100 = CATALOG[0], CATALOG[1]
    pending = [
        job(1, hours=90, types=("A100-40GB",)),  # 90 GPU-h on 8 A100s: 11.25 h
        job(2, hours=9),  # any type
        job(3, hours=0.5, types=("T4-16GB",)),  # 0.5 GPU-h on 1 T4: 0.5 h
        job(4, hours=40, types=("T4-16GB",), ready=False),  # not ready: not counted
    ]
    scales = time_scales(knobs, pending, 9, [(t4, [0.0]), (a100, [0.0] * 8)])
    cluster = scales.of(1)  # the normal class: (90 + 9 + 0.5) / 9 GPUs = 11.06 h
    assert cluster.starve_after_s == pytest.approx(BACKSTOP * 99.5 / 9 * HOUR)
    assert scales.by_job[1].starve_after_s == pytest.approx(BACKSTOP * 90 / 8 * HOUR)
    assert scales.by_job[1].aging_s == pytest.approx(0.25 * 90 / 8 * HOUR)
    assert scales.of_job(2, 1) == cluster
    assert 3 not in scales.by_job and 4 not in scales.by_job  # 0.5 h < 11.06 h
    one_type = time_scales(knobs, pending, 9, [(a100, [0.0] * 9)])
    assert not one_type.by_job


def test_a_job_that_shares_a_card_is_work_of_its_part_of_the_card() -> None:
    """Where hosts share cards, ten evaluations that each take a quarter of a card are the
    queue of two and a half whole-card jobs, not of ten: the backstop (and the reservations
    it brings the jobs behind them) is not put off four times as long. Where no host shares,
    they take whole cards and count whole."""
    from scheduler.policy.scheduler import queue_order

    knobs = Knobs()

    def pending() -> list[Pending]:
        evals = [replace(job(i, hours=2, mem=18), share=True) for i in range(1, 11)]
        return [
            *evals,
            job(11, hours=2, mem=18),
            replace(job(12, hours=2, mem=18, priority="core"), share=True),
        ]

    whole = replace(host("h1", "A100-80GB", 2), sharing="")
    shared = replace(whole, sharing="mps")
    # normal class: the core job (whole, 2 h) and, for the rest, (18 + 2 reserve) / 80 GiB
    part = (18 + knobs.share_reserve_gib) / 80
    deep = {False: (2 + 11 * 2) / 2, True: (2 + 2 + 10 * 2 * part) / 2}
    for host_, sharing in ((whole, False), (shared, True)):
        _, scales = queue_order(snapshot([host_], pending(), knobs=knobs))
        assert scales.of(1).starve_after_s == pytest.approx(BACKSTOP * deep[sharing] * HOUR)
        assert scales.of(0).starve_after_s == pytest.approx(BACKSTOP * 2 / 2 * HOUR)  # core: whole


def _date():  # type: ignore[no-untyped-def]
    from datetime import date

    return date(2030, 1, 1)


_ = CATALOG


def test_admission_warns_or_defers_non_core_work_past_the_backlog_limit() -> None:
    from scheduler.policy.admission import Verdict, admit

    assert (
        admit("normal", [50.0] * 4, 8, max_backlog_hours=48, action="warn").verdict is Verdict.ADMIT
    )
    deep = [400.0] * 4  # 1,600 GPU-hours on 8 GPUs = 200 h of the cluster's capacity
    warned = admit("normal", deep, 8, max_backlog_hours=48, action="warn")
    assert warned.verdict is Verdict.WARN and warned.backlog_hours == 200
    assert warned.max_backlog_hours == 48
    assert admit("idle", deep, 8, max_backlog_hours=48, action="defer").verdict is Verdict.DEFER
    assert admit("core", deep, 8, max_backlog_hours=48, action="defer").verdict is Verdict.ADMIT


def test_submit_order_is_the_rank_key_order_whatever_the_waits() -> None:
    from scheduler.policy.ranking import ordered, rank_key

    pending = [
        job(
            i,
            hours=1 + (i * 7) % 11,
            priority=("core", "normal", "idle")[i % 3],
            waited_h=(i * 37) % 600,  # some past the starvation guard, some not
        )
        for i in range(1, 120)
    ]
    for respect in (True, False):
        knobs = Knobs(within_class=WithinClass.SUBMIT_ORDER, respect_classes=respect)
        expected = sorted(pending, key=lambda j: rank_key(j, NOW, knobs, {}))
        assert ordered(pending, NOW, knobs, {}) == expected
