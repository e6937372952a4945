"""The frontier of the mean and longest wait (scheduler/simulate/frontier.py): which points
are on it, the choice within a bound, and points that replays reproduce from their seed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.simulate.draw import DrawConfig
from scheduler.simulate.frontier import Point, across, best_within, frontier
from scheduler.simulate.policies import policy_setup
from scheduler.simulate.run import ClusterOverride, resolve_cluster, simulate
from scheduler.simulate.traces import read_trace


def test_the_frontier_keeps_what_nothing_beats_on_both() -> None:
    a, b, c, d = Point("a", 10, 100), Point("b", 20, 50), Point("c", 30, 60), Point("d", 5, 200)
    assert frontier([a, b, c, d]) == [b, a, d]  # c: b is better on both
    assert best_within([a, b, c, d], 100) == a
    assert best_within([a, b, c, d], 60) == b
    assert best_within([a, b, c, d], 40) is None


points = st.lists(
    st.builds(
        Point,
        st.text("abcdef", min_size=1, max_size=3),
        st.floats(1, 1e6),
        st.floats(1, 1e7),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(points, st.floats(1, 1e7))
def test_the_choice_within_the_bound_is_on_the_frontier(found: list[Point], bound: float) -> None:
    chosen = best_within(found, bound)
    within = [p for p in found if p.longest_s <= bound]
    if chosen is None:
        assert not within
        return
    assert chosen.longest_s <= bound
    assert not any(p.dominates(chosen) for p in within)
    edge = frontier(found)
    assert all(not any(q.dominates(p) for q in found) for p in edge)
    assert all(p in edge or any(q.dominates(p) for q in found) for p in found)


def test_one_setting_for_every_cluster_is_the_least_worst_excess_over_each_best() -> None:
    # On "busy" slow aging ("b") is best, on "light" it is past the bound; "a" is 4 % and
    # 2 % from each's best, "c" best on light but 30 % above on busy.
    busy = [Point("a", 104, 10), Point("b", 100, 12), Point("c", 130, 9)]
    light = [Point("a", 51, 5), Point("b", 40, 50), Point("c", 50, 6)]
    chosen = across({"busy": busy, "light": light}, {"busy": 15, "light": 10})
    assert chosen is not None and chosen.label == "a"
    assert chosen.best == {"busy": "b", "light": "c"}
    assert round(chosen.excess["busy"], 3) == 0.04 and round(chosen.worst, 3) == 0.04
    # A setting not replayed on a configuration, or past its bound there, is not chosen.
    assert across({"busy": busy, "light": light[1:]}, {"busy": 15, "light": 10}).label == "c"
    assert across({"busy": busy, "light": light}, {"busy": 15, "light": 1}) is None


labelled = st.lists(st.tuples(st.floats(1, 1e6), st.floats(1, 1e7)), min_size=4, max_size=4)


@settings(max_examples=200, deadline=None)
@given(labelled, labelled, st.floats(1, 1e7), st.floats(1, 1e7))
def test_the_setting_chosen_across_clusters_is_never_beaten_everywhere(
    one: list[tuple[float, float]], two: list[tuple[float, float]], b1: float, b2: float
) -> None:
    labels = "abcd"
    configurations = {
        "one": [Point(label, *figures) for label, figures in zip(labels, one, strict=True)],
        "two": [Point(label, *figures) for label, figures in zip(labels, two, strict=True)],
    }
    bounds = {"one": b1, "two": b2}
    chosen = across(configurations, bounds)
    within = {
        label
        for label in labels
        if all(
            next(p for p in points if p.label == label).longest_s <= bounds[name]
            for name, points in configurations.items()
        )
    }
    if chosen is None:
        assert not within or any(
            best_within(points, bounds[name]) is None for name, points in configurations.items()
        )
        return
    assert chosen.label in within
    mean = {(name, p.label): p.mean_s for name, points in configurations.items() for p in points}
    for other in within - {chosen.label}:
        assert not all(mean[name, other] < mean[name, chosen.label] for name in configurations)


def test_each_setting_replays_to_the_same_point_from_the_seed(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    rows = [f"{n * 90},{600 + (n * 37) % 5000},{1 + n % 3}," for n in range(120)]
    path.write_text("submit_time,duration,gpus,priority\n" + "\n".join(rows) + "\n")
    trace = resolve_cluster(read_trace(path, "csv"), ClusterOverride(2, 4), per_vc=False)
    draws = DrawConfig(seed=3, core_share=0.1, not_ready_share=0.3, estimate_noise=0.5)
    paika = policy_setup("paika")

    def point(aging: float, starve: float) -> Point:
        knobs = replace(paika.knobs, aging_drains=aging, starve_after_drains=starve)
        summary = simulate(trace, replace(paika, knobs=knobs), draws)
        return Point(f"{aging}/{starve}", summary["wait_s"]["mean"], summary["wait_s"]["max"])

    first = [point(a, s) for a in (0.25, 2.0) for s in (1.5, 6.0)]
    again = [point(a, s) for a in (0.25, 2.0) for s in (1.5, 6.0)]
    assert first == again
    assert frontier(first) == frontier(again)
