"""The trade between the mean wait and the longest: points, the frontier, and a choice on it.

A point is one replay's mean and longest wait (seconds) under one setting of the ordering
knobs (or one baseline policy). The frontier is the points no other point beats on both
(lower or equal on each, lower on one). A setting is chosen on it by a bound on the longest
wait relative to a reference (EASY backfill's): the lowest mean among the points within
the bound.

One setting for every cluster (`across`): the knobs are scale-free, so one default is meant to
hold on clusters whose waits are minutes and on ones whose waits are weeks. Of the settings
replayed on every configuration and within the bound on each, the rule picks the one whose
worst excess over each configuration's own lowest mean within the bound is least (minimax
regret): never one that another such setting beats on every configuration, and no setting
tuned to one trace. Pure: the replays are the caller's (bench/frontier.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Point:
    """One replay: its label (a knob setting or a baseline's name), mean and longest wait."""

    label: str
    mean_s: float
    longest_s: float

    def dominates(self, other: Point) -> bool:
        """No worse on both, better on one."""
        return (
            self.mean_s <= other.mean_s
            and self.longest_s <= other.longest_s
            and (self.mean_s < other.mean_s or self.longest_s < other.longest_s)
        )


def frontier(points: Sequence[Point]) -> list[Point]:
    """The points no other point dominates, by longest wait (then mean) ascending."""
    kept = [p for p in points if not any(q.dominates(p) for q in points)]
    return sorted(kept, key=lambda p: (p.longest_s, p.mean_s, p.label))


def best_within(points: Sequence[Point], longest_at_most: float) -> Point | None:
    """The lowest mean among the points whose longest wait is within the bound (None: none
    is). Ties go to the shorter longest wait, then the label, so the choice is stable."""
    within = [p for p in points if p.longest_s <= longest_at_most]
    if not within:
        return None
    return min(within, key=lambda p: (p.mean_s, p.longest_s, p.label))


@dataclass(frozen=True, slots=True)
class Choice:
    """The setting the rule picks across configurations: its label, its excess over each
    configuration's lowest mean within the bound (0.05: 5 % above), and that best's label."""

    label: str
    excess: dict[str, float]
    best: dict[str, str]

    @property
    def worst(self) -> float:
        return max(self.excess.values(), default=0.0)


def across(
    configurations: Mapping[str, Sequence[Point]], longest_at_most: Mapping[str, float]
) -> Choice | None:
    """The setting with the least worst excess over each configuration's lowest mean within
    its bound, among the settings replayed on every configuration and within the bound on
    each (None: no such setting). Ties go to the lower total excess, then the label."""
    best: dict[str, Point] = {}
    for name, points in configurations.items():
        found = best_within(points, longest_at_most[name])
        if found is None:
            return None
        best[name] = found
    candidates: dict[str, dict[str, float]] = {}
    for name, points in configurations.items():
        for point in points:
            if point.longest_s <= longest_at_most[name]:
                excess = point.mean_s / best[name].mean_s - 1.0
                candidates.setdefault(point.label, {})[name] = excess
    everywhere = {label: excess for label, excess in candidates.items() if len(excess) == len(best)}
    if not everywhere:
        return None
    label = min(
        everywhere,
        key=lambda key: (max(everywhere[key].values()), sum(everywhere[key].values()), key),
    )
    return Choice(label, everywhere[label], {name: p.label for name, p in best.items()})
