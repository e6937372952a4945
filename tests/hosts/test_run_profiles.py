"""The cycle keeps each running run's profile from its agent's samples over real HTTP (one
row per run, updated each poll), and a later job of the same owner and command finds it."""

from __future__ import annotations

from datetime import timedelta

from agent_world import job, make_cycle, ok, submit
from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.fingerprints import fingerprint_for
from scheduler.hosts.profiles import combine, run_samples
from scheduler.hosts.report import CardSample, HostReport
from scheduler.notices.events import RecordingObserver
from storage.models import JobProfile, JobState

T4_MIB = 16 * 1024


def _profiles(paika: Paika) -> list[JobProfile]:
    with Session(paika.engine) as session:
        return list(session.exec(select(JobProfile)).all())


def test_a_poll_keeps_each_runs_profile_and_a_like_job_finds_it(
    world: Paika, clock: ManualClock
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "eval", "sleep 30", extra="type=T4-16GB")
    cycle.run_once()
    first = job(world, "eval")
    assert first.state == JobState.RUNNING and _profiles(world) == []
    for polls in (1, 2, 3):
        clock.advance(timedelta(seconds=10))
        cycle.run_once()
        (profile,) = _profiles(world)  # one row per run, updated in place
        assert (profile.job_id, profile.attempt, profile.samples) == (first.id, 1, polls)
    assert profile.sm_pct is not None and 90 <= profile.sm_pct <= 98  # a busy simulated job
    assert profile.memory_busy_pct is not None and 45 <= profile.memory_busy_pct <= 49
    assert profile.memory_peak_mib == int(T4_MIB * 0.7)
    assert (profile.pcie_mbps, profile.dram_bw_pct) == (0.0, None)
    assert profile.updated_at == clock.now()

    submit(world, "eval-again", "sleep 30", extra="type=T4-16GB")
    with Session(world.engine) as session:
        later = fingerprint_for(session, job(world, "eval-again"))
        own = fingerprint_for(session, job(world, "eval"))
    assert later is not None
    assert (later.gpu_util, later.gmem_util, later.gmem_mib) == (
        profile.sm_pct,
        profile.memory_busy_pct,
        float(int(T4_MIB * 0.7)),
    )
    assert own is None  # its own run going now is not an earlier one
    ok(world, "UALICE", f"cancel {first.id}")


def test_a_run_on_two_cards_is_profiled_as_one_card() -> None:
    cards = (
        CardSample("7.1", 0, memory_mib=1000, memory_peak_mib=3000, sm_pct=40, pcie_mbps=10),
        CardSample("7.1", 1, memory_mib=5000, memory_peak_mib=None, sm_pct=60, pcie_mbps=None),
    )
    other = CardSample("8.1", 0, memory_mib=None, memory_busy_pct=30)
    reports = {
        "gpu-a": HostReport("gpu-a", True, samples=cards),
        "gpu-b": HostReport("gpu-b", True, samples=(other,)),
        "down": HostReport("down", False, samples=(CardSample("9.1", 0),)),
    }
    samples = run_samples(reports)
    assert set(samples) == {"7.1", "8.1"}  # a host that did not answer says nothing
    two = samples["7.1"]
    assert (two.sm_pct, two.memory_peak_mib, two.pcie_mbps, two.memory_busy_pct) == (
        50.0,
        5000,
        10.0,
        None,
    )
    assert combine([other]).memory_peak_mib is None
