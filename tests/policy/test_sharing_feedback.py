"""Feedback on shared cards in the pure policy: when a run counts as slowed by its neighbour,
which of a pair is the opportunistic one, and a pair kept apart is never placed together."""

from __future__ import annotations

from dataclasses import replace

import pytest
from builders import NOW, job, snapshot
from hypothesis import given
from hypothesis import strategies as st

from scheduler.policy.colocation import Fingerprint
from scheduler.policy.scheduler import schedule
from scheduler.policy.sharing import (
    MIN_JUDGED_UTIL,
    ShareCode,
    SharedCard,
    Sharer,
    Tenant,
    may_join,
    opportunistic,
    slowdown_seen,
    slowed,
)
from scheduler.policy.snapshot import HOUR, Gpu, Host, Knobs, Pending, Running

LIGHT = Fingerprint(gpu_util=10.0, gmem_util=5.0, gmem_mib=8000.0)
BUSY = Fingerprint(gpu_util=80.0, gmem_util=10.0, gmem_mib=8000.0)
CARD = Gpu(1, "g1", "A100-80GB", 80.0)


def _share(job_id: int, *, apart_from: frozenset[int] = frozenset()) -> Pending:
    return replace(job(job_id, mem=20), share=True, fingerprint=LIGHT, apart_from=apart_from)


def test_a_run_below_its_pace_alone_by_more_than_the_slowdown_allowed_is_slowed() -> None:
    knobs = Knobs(share_max_slowdown=0.15)
    # 80 % SM busy alone: slowed below 68 %.
    assert not slowed(80.0, BUSY, knobs)
    assert not slowed(68.0, BUSY, knobs)  # exactly the slowdown allowed
    assert slowed(67.0, BUSY, knobs)
    assert slowed(40.0, BUSY, knobs)
    assert slowdown_seen(40.0, BUSY) == pytest.approx(0.5)
    assert slowdown_seen(95.0, BUSY) == 0.0  # faster than alone is no slowdown
    assert not slowed(40.0, BUSY, Knobs(share_max_slowdown=0.6))


def test_a_run_that_cannot_be_judged_is_never_slowed() -> None:
    knobs = Knobs()
    assert slowdown_seen(None, BUSY) is None  # no sample this poll
    assert slowdown_seen(10.0, None) is None  # no earlier run
    light_alone = replace(BUSY, gpu_util=MIN_JUDGED_UTIL - 1)
    assert slowdown_seen(0.0, light_alone) is None
    assert not slowed(None, BUSY, knobs) and not slowed(0.0, None, knobs)
    assert not slowed(0.0, light_alone, knobs)


@given(
    sm=st.floats(min_value=0, max_value=100),
    alone=st.floats(min_value=MIN_JUDGED_UTIL, max_value=100),
    allowed=st.floats(min_value=0.01, max_value=1.0),
)
def test_slowed_is_below_the_allowed_share_of_the_pace_alone(
    sm: float, alone: float, allowed: float
) -> None:
    fingerprint = replace(BUSY, gpu_util=alone)
    lost = slowdown_seen(sm, fingerprint)
    assert lost is not None and 0.0 <= lost <= 1.0
    below = sm < (1 - allowed) * alone
    assert slowed(sm, fingerprint, Knobs(share_max_slowdown=allowed)) == below
    assert below == (lost > allowed) or lost == pytest.approx(allowed)


def test_the_opportunistic_job_is_the_lower_class_then_the_later_to_join() -> None:
    first_normal = Sharer(1, "normal", NOW - HOUR)
    later_idle = Sharer(2, "idle", NOW)
    later_normal = Sharer(3, "normal", NOW)
    earlier_idle = Sharer(4, "idle", NOW - 2 * HOUR)
    assert opportunistic(first_normal, later_normal) == later_normal
    assert opportunistic(later_normal, first_normal) == later_normal
    assert opportunistic(earlier_idle, first_normal) == earlier_idle  # class first
    assert opportunistic(first_normal, earlier_idle) == earlier_idle
    assert opportunistic(later_idle, earlier_idle) == later_idle
    same_moment = Sharer(5, "normal", NOW)
    assert opportunistic(same_moment, later_normal) == same_moment  # submitted later


def test_may_join_refuses_a_card_holding_a_job_it_is_kept_apart_from() -> None:
    card = SharedCard(CARD, [Tenant(7, 20.0, LIGHT)])
    knobs = Knobs()
    code, slowdown = may_join(card, _share(1), knobs)
    assert code is None and slowdown == pytest.approx(0.001)  # two light jobs: 0.1 x 0.1 x 0.1
    assert may_join(card, _share(1, apart_from=frozenset({7})), knobs) == (ShareCode.APART, 0.0)
    assert may_join(card, _share(1, apart_from=frozenset({8})), knobs)[0] is None


def test_a_pair_kept_apart_is_placed_on_two_cards() -> None:
    host = Host("g1", (CARD, Gpu(2, "g1", "A100-80GB", 80.0)), sharing="mps")
    there = Running(
        7, "normal", "vision", (1,), "A100-80GB", NOW - HOUR, NOW + HOUR,
        share_gib=20.0, fingerprint=LIGHT,
    )  # fmt: skip
    shared = replace(host, gpus=(replace(CARD, job_id=7, tenants=(7,)), host.gpus[1]))
    beside = schedule(snapshot([shared], [_share(1)], [there]))
    apart = schedule(snapshot([shared], [_share(1, apart_from=frozenset({7}))], [there]))
    assert [start.gpu_ids for start in beside.starts] == [(1,)]
    assert [start.gpu_ids for start in apart.starts] == [(2,)]  # a card of its own
