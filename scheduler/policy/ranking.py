"""The order in which pending jobs are considered.

Key, smallest first:
1. priority class (core < normal < idle), unless classes are ignored (baselines);
2. starving jobs first: a job waiting longer than `starve_after_hours` is ordered by submit
   time ahead of the rest of its class (the backstop: no job waits forever);
3. within the class, `shortest_first` orders by estimated GPU-seconds ÷ aging × fair share:
   aging = 2 ** (wait / aging_hours), capped at `max_aging_factor` when one is set;
   fair share = 1 + fair_share_weight × the team's share of recent usage;
   `submit_order` orders by submit time;
4. submit time, then id, so ties never reorder.

Uncapped aging bounds every wait: a job k times the size of another, submitted before it,
goes first once it has waited aging_hours × log2(k) — with the default 24 h, a job 1,000×
bigger waits at most ten days more behind a stream of small ones. (A cap stops aging, and
a big enough job then waits for as long as smaller ones keep arriving.) The order among
aged jobs still favours the shorter, where moving everything old to submit order would
make every long job wait behind every other. The key is compared in log2 space, so a
long wait never overflows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from operator import attrgetter

from scheduler.policy.snapshot import CLASS_RANK, HOUR, Knobs, Pending, WithinClass

RankKey = tuple[int, int, float, float, int]


def rank_key(job: Pending, now: float, knobs: Knobs, shares: Mapping[str, float]) -> RankKey:
    """The sort key of one pending job."""
    rank = CLASS_RANK.get(job.priority, len(CLASS_RANK)) if knobs.respect_classes else 0
    wait = max(0.0, now - job.submitted_at)
    starving = knobs.starve_after_hours is not None and wait >= knobs.starve_after_hours * HOUR
    if starving or knobs.within_class is WithinClass.SUBMIT_ORDER:
        return (rank, 0 if starving else 1, job.submitted_at, job.submitted_at, job.id)
    aging = wait / (knobs.aging_hours * HOUR)  # log2 of the aging factor
    if knobs.max_aging_factor is not None:
        aging = min(aging, math.log2(knobs.max_aging_factor))
    fair = 1.0 + knobs.fair_share_weight * shares.get(job.team, 0.0)
    size = max(1.0, job.gpus * job.run_seconds)
    return (rank, 1, math.log2(size * fair) - aging, job.submitted_at, job.id)


def usage_shares(team_usage: Mapping[str, float]) -> dict[str, float]:
    """Each team's share (0..1) of recent usage."""
    total = sum(team_usage.values())
    if total <= 0:
        return {}
    return {team: hours / total for team, hours in team_usage.items()}


def ordered(
    jobs: Sequence[Pending], now: float, knobs: Knobs, team_usage: Mapping[str, float]
) -> list[Pending]:
    """Pending jobs in the order the scheduler considers them."""
    if knobs.within_class is WithinClass.SUBMIT_ORDER:
        # Starving jobs are the earliest submitted, so this is plain submit order within
        # each class; sorted with a C-level key, as FIFO queues get long.
        by_submit = sorted(jobs, key=attrgetter("submitted_at", "id"))
        if not knobs.respect_classes:
            return by_submit
        return sorted(by_submit, key=lambda job: CLASS_RANK.get(job.priority, len(CLASS_RANK)))
    shares = usage_shares(team_usage)
    return sorted(jobs, key=lambda job: rank_key(job, now, knobs, shares))
