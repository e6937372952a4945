"""Shared cards in the replay (`--sharing memory`): tiny traces whose outcome is known by hand,
through the real policy."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from scheduler.policy.colocation import Fingerprint, expected_slowdown
from scheduler.policy.matching import CardNeeds, CardType
from scheduler.policy.plan import MatchDecision, Plan, PreemptCode, Start
from scheduler.policy.snapshot import Snapshot
from scheduler.simulate.engine import Engine, JobSpec, PolicyViolation, RunResult, real_schedule
from scheduler.simulate.metrics import summarize
from scheduler.simulate.policies import policy_setup
from scheduler.simulate.shares import Profile, draw_shares
from scheduler.simulate.traces import ClusterSpec, TraceJob

V100 = CardType("V100-16GB", 16, 1.0, 1.0)
# Light on everything: beside anything it costs nothing (score 0).
QUIET = Fingerprint(gpu_util=0.0, gmem_util=0.0, gmem_mib=4096)
# SM busy, bandwidth moderate: two of them expect 10 % each (Lucid's 1 + 1).
MIDDLING = Fingerprint(gpu_util=60.0, gmem_util=20.0, gmem_mib=4096)
# Presses memory bandwidth hard: two of them never share.
HEAVY = Fingerprint(gpu_util=95.0, gmem_util=60.0, gmem_mib=4096)
runner = CliRunner()


def job(
    id: int,
    submit: float,
    duration: float,
    *,
    gpus: int = 1,
    memory: float | None = 6.0,
    fingerprint: Fingerprint | None = QUIET,
    priority: str = "normal",
) -> JobSpec:
    """A job with an exact estimate; with `memory` it may share a card and declares that."""
    return JobSpec(
        id=id,
        submit=submit,
        duration=duration,
        gpus=gpus,
        needs=CardNeeds(min_memory_gib=memory),
        priority=priority,
        team="t",
        owner="u",
        ready_at=submit,
        est_gpu_hours=duration * gpus / 3600,
        share_gib=memory,
        fingerprint=fingerprint if memory is not None else None,
        fraction=memory is not None,
    )


def replay(
    jobs: list[JobSpec],
    *,
    gpus: int = 1,
    sharing: str = "mps",
    schedule: Callable[[Snapshot], Plan] | None = None,
) -> RunResult:
    spec = ClusterSpec.uniform(1, gpus, "V100-16GB")
    return Engine(
        jobs, spec, (V100,), policy_setup("paika"), schedule=schedule, sharing=sharing
    ).run()


def test_two_share_jobs_fit_one_card_and_run_together_holding_less() -> None:
    jobs = [job(1, 0, 100), job(2, 0, 100)]
    shared = replay(jobs, gpus=2)
    one, two = shared.records
    assert (one.first_run, two.first_run, one.end, two.end) == (0.0, 0.0, 100.0, 100.0)
    assert one.neighboured and two.neighboured and one.slowdown == 0.0
    assert shared.held_card_gpu_s == 100.0  # one card, held once
    summary = summarize([shared])
    assert math.isclose(summary["gpu_hours_held"], 100 / 3600, abs_tol=1e-3)
    assert summary["slowdowns"] == {
        "mean": 0.0, "p95": 0.0, "shared_jobs": 2, "with_neighbour": 2,
    }  # fmt: skip
    # The same jobs without sharing take a card each: twice the GPU time held.
    whole = replay(jobs, gpus=2, sharing="")
    assert whole.held_card_gpu_s == 200.0 and not any(r.shared for r in whole.records)
    assert summarize([whole])["gpu_hours_held"] > summary["gpu_hours_held"]


def test_neighbours_slow_each_other_by_the_policys_model_while_they_overlap() -> None:
    slowdown = expected_slowdown(MIDDLING, MIDDLING)
    assert slowdown == pytest.approx(0.1)
    # 1 needs 55 s of work, 2 needs 110 s; together each advances at 1/1.1.
    result = replay([job(1, 0, 55, fingerprint=MIDDLING), job(2, 0, 110, fingerprint=MIDDLING)])
    one, two = result.records
    assert one.end == pytest.approx(55 * 1.1)  # 60.5
    # 2 did 55 s of work by 60.5, then runs alone at full speed for the other 55 s.
    assert two.end == pytest.approx(60.5 + 55)
    assert one.slowdown == pytest.approx(0.1) and two.slowdown == pytest.approx(5.5 / 110)
    assert result.held_card_gpu_s == pytest.approx(115.5)


def test_a_pair_the_rule_refuses_does_not_share() -> None:
    # Both press memory bandwidth hard: on one card the second waits for the first.
    result = replay([job(1, 0, 100, fingerprint=HEAVY), job(2, 0, 100, fingerprint=HEAVY)])
    one, two = result.records
    assert not one.neighboured and not two.neighboured
    assert {one.first_run, two.first_run} == {0.0, 100.0}
    # With two cards they take one each, and each card is held for its own job.
    apart = replay([job(1, 0, 100, fingerprint=HEAVY), job(2, 0, 100, fingerprint=HEAVY)], gpus=2)
    assert [r.first_run for r in apart.records] == [0.0, 0.0]
    assert apart.held_card_gpu_s == 200.0 and not any(r.neighboured for r in apart.records)
    # Memory: 10 + 10 GiB (and the reserve) do not fit a 16 GiB card.
    big = replay([job(1, 0, 100, memory=10.0), job(2, 0, 100, memory=10.0)])
    assert {r.first_run for r in big.records} == {0.0, 100.0}


def test_a_core_job_takes_a_shared_card_back() -> None:
    jobs = [job(1, 0, 1000), job(2, 0, 1000), job(3, 100, 50, memory=None, priority="core")]
    stops: list[PreemptCode] = []

    def watch(snapshot: Snapshot) -> Plan:
        plan = real_schedule(snapshot)
        stops.extend(order.code for order in plan.preemptions)
        return plan

    result = replay(jobs, schedule=watch)
    one, two, core = result.records
    assert stops == [PreemptCode.SHARED_FOR_CORE] * 2
    assert one.preemptions == two.preemptions == 1
    assert core.first_held == 700.0 and core.end == 750.0  # after the 600 s grace
    # They kept the 700 s they did and share the card again after the core job.
    assert one.end == two.end == 750.0 + 300.0
    assert core.kind == "core" and one.kind == "shared"


def test_no_card_is_ever_over_booked() -> None:
    rng = random.Random(7)
    prints = (QUIET, MIDDLING, HEAVY, None)
    jobs = [
        job(
            i,
            rng.uniform(0, 2000),
            rng.uniform(10, 600),
            memory=rng.choice((1.0, 3.0, 5.0, 7.0, None)),
            fingerprint=rng.choice(prints),
            priority=rng.choice(("normal", "normal", "idle", "core")),
            gpus=1,
        )
        for i in range(1, 121)
    ]
    seen: list[int] = []

    def audit(snapshot: Snapshot) -> Plan:
        running = {r.id: r for r in snapshot.running}
        for host in snapshot.hosts:
            for gpu in host.gpus:
                if gpu.tenants:
                    declared = sum(running[j].share_gib or 0.0 for j in gpu.tenants)
                    assert declared <= gpu.memory_gib
                    assert len(gpu.tenants) <= snapshot.knobs.share_max_jobs
                    seen.append(len(gpu.tenants))
        return real_schedule(snapshot)

    result = replay(sorted(jobs, key=lambda j: j.submit), gpus=4, schedule=audit)
    assert all(r.end is not None for r in result.records)
    assert max(seen) == 2  # cards were shared, never past their memory

    # A plan that books a card past whole is refused, as one that takes a held card.
    def overbook(snapshot: Snapshot) -> Plan:
        starts = tuple(
            Start(p.id, (0,), ("n0000",), "V100-16GB", MatchDecision("V100-16GB", (), ""), 0.0,
                  share_milli=600)
            for p in snapshot.pending
        )  # fmt: skip
        return Plan(starts, (), {})

    with pytest.raises(PolicyViolation, match="over-booked"):
        replay([job(1, 0, 100), job(2, 0, 100)], schedule=overbook)


def test_a_job_that_does_not_share_is_never_put_on_a_shared_card() -> None:
    def onto_shared(snapshot: Snapshot) -> Plan:
        starts = tuple(
            Start(p.id, (0,), ("n0000",), "V100-16GB", MatchDecision("V100-16GB", (), ""), 0.0,
                  share_milli=100)
            for p in snapshot.pending
        )  # fmt: skip
        return Plan(starts, (), {})

    with pytest.raises(PolicyViolation, match="does not share"):
        replay([job(1, 0, 100, memory=None)], schedule=onto_shared)


def test_share_draws_openb_memory_and_nearest_fingerprints() -> None:
    catalog = (V100, CardType("G2", 80, 1.8, 2.2))
    profiles = (
        Profile("small", 30.0, 10.0, 2048.0),
        Profile("mid", 70.0, 40.0, 8192.0),
        Profile("big", 90.0, 50.0, 16000.0),
    )
    jobs = [
        TraceJob(1, 0, 10, 1, "q", gpu_milli=500),  # any type: the 16 GiB card is the smallest
        TraceJob(2, 0, 10, 1, "q", gpu_types=("G2",), gpu_milli=250),
        TraceJob(3, 0, 10, 1, "q"),  # whole card
        TraceJob(4, 0, 10, 2, "q"),
    ]
    drawn = draw_shares(
        jobs, catalog, {"V100-16GB", "G2"}, profiles, seed=1, reserve_gib=2.0, sharing=True
    )
    assert drawn[0].share_gib == 8.0 and drawn[1].share_gib == 20.0
    assert drawn[0].fingerprint is not None and drawn[0].fingerprint.gmem_mib == 8192.0
    assert not drawn[2].fraction and drawn[2].share_gib is None and drawn[3].share_gib is None
    again = draw_shares(
        jobs, catalog, {"V100-16GB", "G2"}, profiles, seed=1, reserve_gib=2.0, sharing=True
    )
    assert again == drawn
    # Without sharing only the class is kept; a trace without gpu_milli draws from profiles.
    none = draw_shares(
        jobs, catalog, {"V100-16GB", "G2"}, profiles, seed=1, reserve_gib=2, sharing=False
    )
    assert [d.fraction for d in none] == [True, True, False, False]
    assert all(d.share_gib is None for d in none)
    philly = [replace(j, gpu_milli=None) for j in jobs]
    drawn = draw_shares(philly, catalog, {"V100-16GB"}, profiles, seed=3, reserve_gib=2.0,
                        sharing=True)  # fmt: skip
    memories = {p.gmem_mib / 1024 for p in profiles if p.gmem_mib / 1024 + 2.0 <= 16}
    assert all(d.share_gib in memories or d.share_gib is None for d in drawn[:2])
    assert drawn[3].share_gib is None


def test_ideal_draws_the_same_shares_all_light_without_profiles() -> None:
    catalog = (V100,)
    profiles = (Profile("heavy", 95.0, 60.0, 4096.0), Profile("mid", 60.0, 20.0, 6144.0))
    jobs = [
        TraceJob(1, 0, 10, 1, "q", gpu_milli=500),
        TraceJob(2, 0, 10, 1, "q", gpu_milli=250),
        TraceJob(3, 0, 10, 1, "q"),  # whole card
    ]
    kw = {"seed": 1, "reserve_gib": 0.0, "sharing": True}
    memory = draw_shares(jobs, catalog, {"V100-16GB"}, profiles, **kw)
    ideal = draw_shares(jobs, catalog, {"V100-16GB"}, profiles, light=True, **kw)
    # The same jobs share, by the same memory; only their fingerprints are light.
    assert [d.share_gib for d in ideal] == [d.share_gib for d in memory] == [8.0, 4.0, None]
    assert memory[0].fingerprint is not None and memory[0].fingerprint.gmem_util > 0
    heavy = Fingerprint(95.0, 60.0, 4096.0)
    for drawn in ideal[:2]:
        assert drawn.fingerprint is not None
        assert (drawn.fingerprint.gpu_util, drawn.fingerprint.gmem_util) == (0.0, 0.0)
        assert drawn.fingerprint.gmem_mib == drawn.share_gib * 1024
        assert expected_slowdown(drawn.fingerprint, heavy) == 0.0
    # A trace with gpu_milli needs no profiles for it; one without draws memory from them.
    assert draw_shares(jobs, catalog, {"V100-16GB"}, (), light=True, **kw)[:2] == ideal[:2]
    philly = [replace(j, gpu_milli=None) for j in jobs]
    drawn = draw_shares(philly, catalog, {"V100-16GB"}, profiles, light=True, **kw)
    assert all(d.share_gib in (4.0, 6.0) for d in drawn)
    assert all(d.fingerprint and d.fingerprint.gmem_util == 0.0 for d in drawn)


# -- the command ---------------------------------------------------------------------------------

TINY = "submit_time,duration,gpus,priority\n0,100,2,\n10,100,1,\n20,10,2,\n30,5,1,idle\n"
PROFILES = "model,dataset,batchsize,amp,speed,gpu_util,gmem_util,gmem,label\nm,d,8,0,1,0,0,4096,0\n"


def simulate(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["simulate", *args])
    return result.exit_code, result.stdout, result.stderr


def test_sharing_none_leaves_the_replay_as_it_was(tmp_path: Path) -> None:
    plain = tmp_path / "tiny.csv"
    plain.write_text(TINY)
    fractional = tmp_path / "fractional.csv"
    fractional.write_text(
        "submit_time,duration,gpus,priority,gpu_milli\n0,100,2,,\n10,100,1,,300\n20,10,2,,\n"
        "30,5,1,idle,400\n"
    )
    args = ("--format", "csv", "--nodes", "1", "--gpus-per-node", "2", "--json", "--quiet")
    code, out, err = simulate("--trace", str(plain), *args)
    assert code == 0, err
    base = json.loads(out)
    code, out, _ = simulate("--trace", str(plain), *args, "--sharing", "none")
    explicit = json.loads(out)
    code, out, _ = simulate("--trace", str(fractional), *args)
    with_milli = json.loads(out)
    for summary in (base, explicit, with_milli):
        for key in ("wall_s", "scheduling", "trace", "waits", "class_jobs", "sharing"):
            summary.pop(key)
    assert base == explicit == with_milli
    # Whole cards: the GPU time held is every job's own.
    assert base["gpu_hours_held"] == base["gpu_hours"]
    assert base["slowdowns"]["shared_jobs"] == 0


def test_sharing_memory_from_the_command(tmp_path: Path) -> None:
    trace = tmp_path / "tiny.csv"
    trace.write_text("submit_time,duration,gpus,gpu_milli\n0,100,1,300\n0,100,1,300\n0,50,2,\n")
    profiles = tmp_path / "profiles.csv"
    profiles.write_text(PROFILES)
    args = ["--trace", str(trace), "--format", "csv", "--nodes", "1", "--gpus-per-node", "2"]
    args += ["--core-share", "0", "--not-ready-share", "0", "--json", "--quiet"]
    code, out, err = simulate(*args, "--sharing", "memory", "--profiles", str(profiles))
    assert code == 0, err
    summary = json.loads(out)
    assert summary["sharing"]["share_jobs"] == 2 and summary["sharing"]["profiles_found"]
    assert summary["slowdowns"]["with_neighbour"] == 2
    # The two shares hold one card for 100 s together, the 2-GPU job both cards for 50 s.
    assert summary["gpu_hours_held"] == round((100 + 100) / 3600, 3)
    assert set(summary["waits"]) == {"shared", "one_card", "multi_card", "core"}
    # Without profiles it says what is missing and how to give them.
    code, out, err = simulate(*args, "--sharing", "memory")
    assert code == 0 and "--profiles FILE" in err
    code, _, err = simulate(*args, "--sharing", "mig")
    assert code == 2 and "unknown --sharing 'mig'" in err
    code, _, err = simulate(*args, "--profiles", str(profiles))
    assert code == 2 and "--sharing memory" in err
    code, _, err = simulate(*args, "--sharing", "memory", "--profiles", str(tmp_path / "no.csv"))
    assert code == 2 and "profiles file not found" in err


def test_sharing_ideal_admits_the_pair_the_rule_refuses(tmp_path: Path) -> None:
    """Two jobs that both press memory bandwidth never share by the rule; the ideal replay
    (the bound) puts them on one card, and nobody slows."""
    trace = tmp_path / "tiny.csv"
    trace.write_text("submit_time,duration,gpus,gpu_milli\n0,100,1,300\n0,100,1,300\n")
    heavy = tmp_path / "heavy.csv"
    heavy.write_text(PROFILES.replace("m,d,8,0,1,0,0,4096,0", "m,d,8,0,1,95,60,4096,2"))
    args = ["--trace", str(trace), "--format", "csv", "--nodes", "1", "--gpus-per-node", "1"]
    args += ["--core-share", "0", "--not-ready-share", "0", "--json", "--quiet"]
    code, out, err = simulate(*args, "--sharing", "memory", "--profiles", str(heavy))
    assert code == 0, err
    rule = json.loads(out)
    assert rule["slowdowns"]["with_neighbour"] == 0
    assert rule["waits"]["shared"] == 50.0  # one waits for the other's 100 s
    code, out, err = simulate(*args, "--sharing", "ideal", "--profiles", str(heavy))
    assert code == 0, err
    ideal = json.loads(out)
    assert ideal["slowdowns"]["with_neighbour"] == 2 and ideal["slowdowns"]["mean"] == 0.0
    assert ideal["waits"]["shared"] == 0.0
    assert ideal["gpu_hours_held"] == round(100 / 3600, 3)
    # With gpu_milli it needs no profiles, and does not ask for them.
    code, out, err = simulate(*args, "--sharing", "ideal")
    assert code == 0 and "--profiles" not in err
    assert json.loads(out)["slowdowns"]["with_neighbour"] == 2
