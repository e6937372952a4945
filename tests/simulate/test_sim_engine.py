"""The replay on tiny hand-made traces whose outcome is known by hand, through the real policy."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from scheduler.policy.matching import CardNeeds, CardType
from scheduler.policy.plan import MatchDecision, Plan, Start
from scheduler.policy.snapshot import Snapshot, TypeChoice
from scheduler.simulate.engine import Engine, JobSpec, PolicyViolation, RunResult
from scheduler.simulate.metrics import summarize
from scheduler.simulate.policies import policy_setup
from scheduler.simulate.traces import ClusterSpec, NodeGroup

V100 = CardType("V100-16GB", 16, 1.0, 1.0)
T4 = CardType("T4", 16, 0.35, 0.35)
BIG = CardType("V100M32", 32, 1.0, 1.2)


def job(
    id: int,
    submit: float,
    duration: float,
    gpus: int,
    *,
    priority: str = "normal",
    ready_at: float | None = None,
    est_s: float | None = None,
    types: tuple[str, ...] | None = None,
) -> JobSpec:
    """A job whose estimate is exact unless `est_s` (wall seconds) says otherwise."""
    return JobSpec(
        id=id,
        submit=submit,
        duration=duration,
        gpus=gpus,
        needs=CardNeeds(allowed_types=types),
        priority=priority,
        team="t",
        owner="u",
        ready_at=submit if ready_at is None else ready_at,
        est_gpu_hours=(duration if est_s is None else est_s) * gpus / 3600,
    )


def replay(
    jobs: list[JobSpec],
    policy: str,
    *,
    gpus: int = 2,
    cluster: ClusterSpec | None = None,
    catalog: tuple[CardType, ...] = (V100,),
    type_choice: TypeChoice | None = None,
) -> RunResult:
    spec = cluster or ClusterSpec.uniform(1, gpus, "V100-16GB")
    setup = policy_setup(policy, type_choice=type_choice)
    return Engine(jobs, spec, catalog, setup).run()


def delays(result: RunResult) -> dict[int, float | None]:
    return {r.id: r.queue_delay for r in result.records}


THREE = [job(1, 0, 100, 2), job(2, 10, 100, 1), job(3, 20, 10, 2)]


def test_fifo_and_sjf_mean_delay_by_hand() -> None:
    # FIFO: 1 runs 0–100; 2 starts at 100 and 3 (2 GPUs) must wait for it: 200. Delays 0, 90, 180.
    fifo = replay(THREE, "fifo")
    assert delays(fifo) == {1: 0.0, 2: 90.0, 3: 180.0}
    assert summarize([fifo])["queue_delay_s"]["mean"] == 90.0
    # SJF (oracle): at 100 the short 3 goes first (100–110), then 2 (110–210). Delays 0, 100, 80.
    sjf = replay(THREE, "sjf")
    assert delays(sjf) == {1: 0.0, 2: 100.0, 3: 80.0}
    assert summarize([sjf])["queue_delay_s"]["mean"] == 60.0
    assert summarize([sjf])["makespan_s"] == 210.0
    # GPU-hours waited weighs each wait by the GPUs asked for: SJF's 2-GPU job waits 80 s,
    # the 1-GPU one 100 s; FIFO's 180 s and 90 s. The mean per job and this can disagree.
    assert summarize([sjf])["gpu_hours_waited"] == round((2 * 80 + 100) / 3600, 3)
    assert summarize([fifo])["gpu_hours_waited"] == round((2 * 180 + 90) / 3600, 3)


def test_the_policy_sees_estimates_but_jobs_run_their_true_duration() -> None:
    # Job 1 promises 10 s but runs 1000 s; the GPUs stay busy for the true duration.
    result = replay([job(1, 0, 1000, 2, est_s=10), job(2, 5, 10, 2)], "fifo")
    ends = {r.id: r.end for r in result.records}
    assert ends == {1: 1000.0, 2: 1010.0}
    assert result.busy_gpu_s == 2 * 1010


def test_fifo_hold_holds_gpus_idle_for_exactly_the_data_delay() -> None:
    jobs = [job(1, 0, 100, 2, ready_at=600), job(2, 10, 50, 1)]
    hold = replay(jobs, "fifo-hold")
    one, two = hold.records
    assert (one.first_held, one.first_run, one.end) == (0.0, 600.0, 700.0)
    assert one.held_idle_gpu_s == 2 * 600 and hold.held_idle_gpu_s == 1200
    assert delays(hold) == {1: 0.0, 2: 690.0}  # from submit to holding GPUs
    summary = summarize([hold])
    assert math.isclose(summary["held_idle_gpu_hours"], 1200 / 3600, abs_tol=1e-3)
    assert summary["wait_to_run_s"]["max"] == 690.0
    assert summary["makespan_s"] == 750.0  # job 2 runs 700–750
    assert summary["utilization"] == round((200 + 50) / (2 * 750), 4)
    # Hold-free FIFO: 2 runs while 1 waits for its data; nothing is held idle.
    free = replay(jobs, "fifo")
    assert delays(free) == {1: 0.0, 2: 0.0}
    assert free.held_idle_gpu_s == 0 and free.records[0].first_held == 600.0


def test_a_job_too_big_for_the_cluster_is_reported_not_hung() -> None:
    result = replay([job(1, 0, 100, 4), job(2, 1, 10, 1)], "paika")
    assert result.never_fits == 1 and [r.id for r in result.records] == [2]
    summary = summarize([result])
    assert summary["never_fits"] == 1 and summary["queue_delay_s"]["count"] == 1
    typed = replay([job(1, 0, 10, 1, types=("A100",))], "fifo")
    assert typed.never_fits == 1


def test_a_core_job_preempts_an_idle_one_which_resumes_with_its_progress() -> None:
    jobs = [job(1, 0, 1000, 2, priority="idle"), job(2, 100, 50, 2, priority="core")]
    result = replay(jobs, "paika")
    idle, core = result.records
    assert result.preemptions == 1 and idle.preemptions == 1
    assert core.first_held == 700.0 and core.end == 750.0  # after the 600 s grace
    assert idle.end == 750.0 + 300.0  # 700 s done before the stop, 300 s left
    assert result.busy_gpu_s == 2 * (1000 + 50)
    assert summarize([result])["by_class"]["core"]["queue_delay_s"]["mean"] == 600.0


def test_cheapest_type_costs_less_than_type_blind_first_fit() -> None:
    # Host order: the costly V100M32 host first, then the cheap T4 host.
    cluster = ClusterSpec((NodeGroup(1, 1, "V100M32"), NodeGroup(1, 1, "T4")))
    jobs = [job(1, 0, 10_000, 1), job(2, 1, 100, 1)]
    cheap = replay(jobs, "paika", cluster=cluster, catalog=(T4, BIG))
    blind = replay(
        jobs, "paika", cluster=cluster, catalog=(T4, BIG), type_choice=TypeChoice.FIRST_FIT
    )
    assert [r.gpu_type for r in cheap.records] == ["T4", "V100M32"]
    assert [r.gpu_type for r in blind.records] == ["V100M32", "T4"]
    assert math.isclose(cheap.costlier_gpu_s, 100) and math.isclose(blind.costlier_gpu_s, 10_000)
    assert cheap.cost < blind.cost


def test_a_job_waiting_for_a_cheaper_type_wakes_when_its_wait_runs_out() -> None:
    # Job 1 promises to free the T4 at 3,000 s but runs to 20,000 s; job 2 waits for the T4,
    # and takes the costlier card once it has waited its share of its run (1/4) or
    # costlier_after_s (3,600 s), whichever is shorter — not at 20,000.
    cluster = ClusterSpec((NodeGroup(1, 1, "T4"), NodeGroup(1, 1, "V100M32")))
    for run, waits in ((14_000, 3500), (40_000, 3600)):
        jobs = [job(1, 0, 20_000, 1, est_s=3000), job(2, 1, run, 1)]
        result = replay(jobs, "paika", cluster=cluster, catalog=(T4, BIG))
        second = result.records[1]
        assert second.gpu_type == "V100M32"
        assert second.first_held == pytest.approx(1 + waits + 1)
    # A short job does not wait for a T4 that frees later than a quarter of its run.
    jobs = [job(1, 0, 20_000, 1, est_s=3000), job(2, 1, 4000, 1)]
    result = replay(jobs, "paika", cluster=cluster, catalog=(T4, BIG))
    assert result.records[1].first_held == 1


def test_an_impossible_plan_is_a_policy_violation() -> None:
    def greedy(snapshot: Snapshot) -> Plan:
        match = MatchDecision("V100-16GB", (), "test")
        starts = tuple(
            Start(p.id, (0,), ("n0000",), "V100-16GB", match, snapshot.now + 1)
            for p in snapshot.pending
        )
        return Plan(starts, (), {})

    setup = policy_setup("fifo")
    engine = Engine(
        [job(1, 0, 10, 1), job(2, 0, 10, 1)],
        ClusterSpec.uniform(1, 2, "V100-16GB"),
        (V100,),
        replace(setup),
        schedule=greedy,
    )
    with pytest.raises(PolicyViolation, match="GPU 0 is held by job 1"):
        engine.run()


def test_a_core_job_is_not_held_back_by_a_job_that_overran_its_estimate() -> None:
    # Host 0: X (promises 100 s, runs 100,000 s) and a job ending at 3,000 s.
    # Host 1: jobs ending at 4,000 s and 5,000 s. A stream of 1-GPU jobs follows.
    jobs = [
        job(1, 0, 100_000, 1, est_s=100),
        job(2, 0, 3000, 1),
        job(3, 0, 4000, 1),
        job(4, 0, 5000, 1),
        job(5, 200, 600, 2, priority="core"),
        *(job(100 + k, 300 + 250 * k, 2000, 1) for k in range(80)),
    ]
    result = replay(jobs, "paika", cluster=ClusterSpec.uniform(2, 2, "V100-16GB"))
    core = next(r for r in result.records if r.id == 5)
    # Knowing X runs long, it starts by 5,000 s on host 1 (before the overrun fix in capacity.py it waited until 85,000 s).
    assert core.queue_delay is not None and core.queue_delay <= 5000


def test_a_preemptible_job_loses_the_work_since_its_checkpoint_and_pays_its_restart() -> None:
    """One GPU: a 10 h preemptible job checkpoints every 30 min; a 1 h core job comes after
    130 min. It is stopped after its 60 s grace, back at its 120-minute checkpoint (11 min
    lost), and resumes after the core job with a 5 min restart: it ends at 191 + 5 + 480 min."""
    minute = 60.0
    long_run = replace(
        job(1, 0.0, 600 * minute, 1),
        preemptible=True,
        checkpoint_s=30 * minute,
        restart_s=5 * minute,
        grace_s=60.0,
    )
    core = job(2, 130 * minute, 60 * minute, 1, priority="core")
    result = replay([long_run, core], "paika", gpus=1)
    by_id = {r.id: r for r in result.records}
    assert result.preemptions == 1 and by_id[1].preemptions == 1
    assert by_id[2].wait == pytest.approx(60.0)  # the grace, then the core job runs
    assert by_id[2].end == pytest.approx(191 * minute)
    assert by_id[1].end == pytest.approx((191 + 5 + 480) * minute)
    assert by_id[1].lost_gpu_s == pytest.approx((11 + 5) * minute)
    assert by_id[1].rewait_s == pytest.approx(60 * minute)  # queued again while the core job ran
    assert by_id[1].held_gpu_s == pytest.approx((131 + 485) * minute)
    assert summarize([result])["lost_gpu_hours"] == pytest.approx(16 / 60, abs=1e-3)


def test_a_job_that_does_not_checkpoint_is_never_preempted_in_the_replay() -> None:
    minute = 60.0
    result = replay(
        [job(1, 0.0, 600 * minute, 1), job(2, 130 * minute, 60 * minute, 1, priority="core")],
        "paika",
        gpus=1,
    )
    by_id = {r.id: r for r in result.records}
    assert result.preemptions == 0
    assert by_id[2].first_held == pytest.approx(600 * minute)


def test_fifo_skips_passes_its_first_job_cannot_use_and_decides_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Strict order waits for its first ready job: passes while that job cannot fit are
    skipped, and the replay is the same as one that calls the policy every time."""
    import random

    from scheduler.simulate import engine as engine_module

    rng = random.Random(7)
    jobs = [
        job(
            i,
            submit=i * 30.0,
            duration=rng.choice([60.0, 600.0, 3600.0]),
            gpus=rng.choice([1, 1, 2, 4, 8]),
            ready_at=i * 30.0 + rng.choice([0.0, 0.0, 900.0]),
        )
        for i in range(1, 301)
    ]
    cluster = ClusterSpec.uniform(3, 8, "V100-16GB")
    skipping = replay(jobs, "fifo", cluster=cluster)
    monkeypatch.setattr(engine_module._Cluster, "could_fit", lambda self, gpus: True)
    every_time = replay(jobs, "fifo", cluster=cluster)
    assert skipping.records == every_time.records
    assert skipping.skipped > every_time.skipped
    assert skipping.calls < every_time.calls


@pytest.mark.parametrize("policy", ["fifo", "easy", "paika"])
def test_a_job_starts_when_its_data_becomes_ready_with_nothing_else_happening(
    policy: str,
) -> None:
    """The moment its data is ready, a waiting job counts as ready (a pass is due)."""
    result = replay([job(1, 0, 100, 1, ready_at=500), job(2, 0, 50, 1, ready_at=800)], policy)
    starts = {r.id: r.first_run for r in result.records}
    assert starts == {1: 500, 2: 800}


def test_the_baselines_keep_one_place_a_pool_and_paika_one_per_waiting_core_job() -> None:
    # EASY and Slurm's backfill are what they are: the first blocked job's place only,
    # whatever its class (core work first is paika's own rule, tests/policy).
    # Nor do they keep places for jobs the free cards are too spread for.
    assert policy_setup("paika").knobs.core_reservations
    assert policy_setup("paika").knobs.spread_reservations
    for baseline in ("fifo", "easy", "slurm", "sjf"):
        assert not policy_setup(baseline).knobs.core_reservations
        assert not policy_setup(baseline).knobs.spread_reservations


def test_a_replay_with_preemptible_jobs_decides_as_the_whole_pass_would() -> None:
    """The replay calls the policy without reasons or reservations, which lets a pass where
    nothing can start order only the jobs a stop could serve. A busy cluster of preemptible,
    core and short jobs replays to the very same runs (starts, stops, ends) as with the pass
    that orders, admits and explains every job each time."""
    import random

    from scheduler.policy.scheduler import schedule

    rng = random.Random(11)
    jobs = [
        replace(
            job(
                i,
                submit=i * 120.0,
                duration=rng.choice([300.0, 1800.0, 4 * 3600.0, 30 * 3600.0]),
                gpus=rng.choice([1, 1, 1, 2, 4, 8]),
                priority=rng.choice(["core", "normal", "normal", "normal", "idle"]),
                est_s=rng.choice([None, 900.0, 7200.0]),
            ),
            preemptible=rng.random() < 0.5,
        )
        for i in range(1, 241)
    ]
    cluster = ClusterSpec.uniform(3, 8, "V100-16GB")
    setup = policy_setup("paika")
    quick = Engine(jobs, cluster, (V100,), setup).run()
    whole = Engine(
        jobs, cluster, (V100,), setup, schedule=lambda snap: schedule(snap, explain=True)
    ).run()
    assert quick.preemptions > 0
    assert quick.records == whole.records
    assert quick.calls == whole.calls
