"""The trade between the mean wait and the longest: points, the frontier, and a choice on it.

A point is one replay's mean and longest wait (seconds) under one setting of the ordering
knobs (or one baseline policy). The frontier is the points no other point beats on both
(lower or equal on each, lower on one). A setting is chosen on it by a bound on the longest
wait relative to a reference (EASY backfill's): the lowest mean among the points within
the bound. Pure: the replays are the caller's (bench/frontier.py).
"""

from __future__ import annotations

from collections.abc import Sequence
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
