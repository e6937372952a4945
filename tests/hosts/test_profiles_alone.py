"""A fingerprint is how a job uses a card alone: on a card two runs share at a poll, the card's
own figures (memory controller, PCIe, DRAM bandwidth, and SM busy % the card cannot tell apart)
are left out of each run's sample; each run's own memory and own SM busy % count."""

from __future__ import annotations

from scheduler.hosts.profiles import run_samples
from scheduler.hosts.report import CardSample, HostReport


def _sample(run: str, gpu: int, *, sm_own: bool) -> CardSample:
    return CardSample(
        run=run,
        gpu=gpu,
        memory_mib=8000,
        memory_peak_mib=9000,
        sm_pct=60.0,
        memory_busy_pct=45.0,
        pcie_mbps=3000.0,
        dram_bw_pct=40.0,
        sm_own=sm_own,
    )


def test_a_shared_cards_own_figures_are_left_out_of_each_runs_sample() -> None:
    report = HostReport(
        "gpu-a",
        True,
        samples=(
            _sample("1.1", 0, sm_own=True),
            _sample("2.1", 0, sm_own=False),
            _sample("3.1", 1, sm_own=False),  # alone on its card
        ),
    )
    found = run_samples({"gpu-a": report})
    shared_own, shared_card, alone = found["1.1"], found["2.1"], found["3.1"]
    assert (shared_own.sm_pct, shared_own.memory_peak_mib) == (60.0, 9000)
    assert (shared_own.memory_busy_pct, shared_own.pcie_mbps, shared_own.dram_bw_pct) == (
        None,
        None,
        None,
    )
    assert shared_card.sm_pct is None and shared_card.memory_peak_mib == 9000
    assert (alone.sm_pct, alone.memory_busy_pct, alone.pcie_mbps) == (60.0, 45.0, 3000.0)
