"""Draws are deterministic per seed, one stream per attribute."""

from __future__ import annotations

import math

import pytest

from scheduler.simulate.draw import DrawConfig, draw
from scheduler.simulate.traces import TraceJob

JOBS = [TraceJob(i, float(i * 10), 100.0 + i, 1 + i % 4, f"vc{i % 3}") for i in range(1, 401)]


def test_same_seed_same_draws_and_other_seed_other_draws() -> None:
    one = draw(JOBS, DrawConfig(seed=7), pooled=True)
    assert one == draw(JOBS, DrawConfig(seed=7), pooled=True)
    other = draw(JOBS, DrawConfig(seed=8), pooled=True)
    assert [d.est_gpu_hours for d in one] != [d.est_gpu_hours for d in other]
    assert [d.ready_delay for d in one] != [d.ready_delay for d in other]
    assert [d.priority for d in one] != [d.priority for d in other]


def test_each_attribute_has_its_own_stream() -> None:
    base = draw(JOBS, DrawConfig(seed=3, core_share=0.1), pooled=True)
    more_core = draw(JOBS, DrawConfig(seed=3, core_share=0.5, estimate_noise=0.9), pooled=True)
    assert [d.ready_delay for d in base] == [d.ready_delay for d in more_core]
    assert [d.team for d in base] == [d.team for d in more_core]
    assert [d.user for d in base] == [d.user for d in more_core]
    # A prefix of the trace (--limit) gets the same draws as in the full run.
    assert draw(JOBS[:50], DrawConfig(seed=3), pooled=True) == base[:50]


def test_shares_and_ranges() -> None:
    drawn = draw(JOBS, DrawConfig(seed=1, core_share=0.25, not_ready_share=0.5), pooled=True)
    core = sum(d.priority == "core" for d in drawn) / len(drawn)
    not_ready = sum(d.ready_delay > 0 for d in drawn) / len(drawn)
    assert 0.18 < core < 0.32 and 0.42 < not_ready < 0.58
    assert all(0 <= d.ready_delay <= 6 * 3600 for d in drawn)
    for job, d in zip(JOBS, drawn, strict=True):
        factor = d.est_gpu_hours / (job.duration * job.gpus / 3600)
        assert 0.1 - 1e-9 <= factor <= 10 + 1e-9
    assert {d.team for d in drawn} <= {f"team-{n}" for n in range(1, 9)}
    assert len({d.team for d in drawn}) == 8


def test_zero_noise_is_exact_and_trace_values_win() -> None:
    jobs = [
        TraceJob(1, 0.0, 7200.0, 2, "vc", priority="idle", user="bob", est_hours=9.0),
        TraceJob(2, 0.0, 7200.0, 2, "vc"),
    ]
    given, drawn = draw(jobs, DrawConfig(core_share=1.0, estimate_noise=0.0), pooled=False)
    assert (given.priority, given.user, given.est_gpu_hours, given.team) == (
        "idle",
        "bob",
        9.0,
        "vc",
    )
    assert drawn.priority == "core" and math.isclose(drawn.est_gpu_hours, 4.0)
    assert drawn.team == "vc" and drawn.user.startswith("vc-u")


def test_bad_shares_are_refused() -> None:
    with pytest.raises(ValueError, match="core_share"):
        DrawConfig(core_share=1.5)
    with pytest.raises(ValueError, match="estimate_noise"):
        DrawConfig(estimate_noise=-1)
