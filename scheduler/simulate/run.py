"""One simulation from a trace to its summary: cluster choice, draws, replay(s), metrics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from scheduler.simulate.calendar import (
    Calendar,
    WeeklyPlan,
    busiest_team,
    calendar_summary,
    weekly_calendar,
)
from scheduler.simulate.draw import DrawConfig, draw
from scheduler.simulate.engine import (
    Engine,
    JobSpec,
    ProgressFn,
    RunResult,
    ScheduleFn,
    job_specs,
)
from scheduler.simulate.metrics import summarize
from scheduler.simulate.policies import PolicySetup
from scheduler.simulate.shares import (
    SHARING_MODES,
    Profile,
    ProfileError,
    default_profiles,
    draw_shares,
    load_profiles,
)
from scheduler.simulate.traces import (
    ClusterSpec,
    Trace,
    TraceError,
    single_type_catalog,
)


@dataclass(frozen=True, slots=True)
class ClusterOverride:
    """`--nodes N --gpus-per-node G [--gpu-type T]`."""

    nodes: int | None = None
    gpus_per_node: int | None = None
    gpu_type: str | None = None


def resolve_cluster(trace: Trace, override: ClusterOverride, *, per_vc: bool) -> Trace:
    """The trace on the cluster it will be replayed on; TraceError when there is none."""
    if (override.nodes is None) != (override.gpus_per_node is None):
        raise TraceError("give --nodes and --gpus-per-node together")
    if override.nodes is not None and override.gpus_per_node is not None:
        if per_vc:
            raise TraceError("--per-vc replays each VC on its own cluster; drop --nodes for it")
        if override.nodes <= 0 or override.gpus_per_node <= 0:
            raise TraceError("--nodes and --gpus-per-node must be positive")
        catalog = single_type_catalog(override.gpu_type)
        cluster = ClusterSpec.uniform(override.nodes, override.gpus_per_node, catalog[0].name)
        return trace.with_cluster(cluster, catalog)
    if per_vc and not trace.queue_clusters:
        raise TraceError(
            f"--per-vc needs per-VC cluster sizes, which the {trace.format} format does not have"
        )
    if not per_vc and trace.cluster is None:
        raise TraceError(
            f"the {trace.format} trace has no node list: give --nodes N --gpus-per-node G"
        )
    if override.gpu_type is not None and len(trace.catalog) == 1:
        catalog = single_type_catalog(override.gpu_type)
        name = catalog[0].name

        def renamed(spec: ClusterSpec) -> ClusterSpec:
            return ClusterSpec(tuple(replace(g, gpu_type=name) for g in spec.groups))

        return Trace(
            trace.format,
            trace.path,
            trace.jobs,
            catalog,
            renamed(trace.cluster) if trace.cluster else None,
            {queue: renamed(spec) for queue, spec in trace.queue_clusters.items()},
            dict(trace.dropped),
        )
    if override.gpu_type is not None:
        raise TraceError("--gpu-type renames a one-type cluster; this trace has typed nodes")
    return trace


HOST_SHARING = "mps"  # how the simulated hosts keep shared jobs apart when they share


@dataclass(frozen=True, slots=True)
class Sharing:
    """`--sharing none|memory|ideal [--profiles FILE]`: whether the simulated hosts share
    cards, and the single-job profiles that give jobs their fingerprints (None: beside the
    trace); `ideal` makes every fingerprint light (shares.py: the bound, not a forecast)."""

    mode: str = "none"
    profiles: Path | None = None

    def __post_init__(self) -> None:
        if self.mode not in SHARING_MODES:
            raise ValueError(
                f"unknown sharing {self.mode!r}; use one of: {', '.join(SHARING_MODES)}"
            )

    @property
    def on(self) -> bool:
        return self.mode != "none"


def sharing_profiles(trace: Trace, sharing: Sharing) -> tuple[tuple[Profile, ...], Path]:
    """The profiles to draw fingerprints from and where they were looked for: none when the
    file is absent (the caller says so); ProfileError when it is there but unreadable."""
    path = sharing.profiles or default_profiles(trace.path)
    if not path.is_file():
        if sharing.profiles is not None:
            raise ProfileError(f"profiles file not found: {path}")
        return (), path
    return load_profiles(path), path


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def simulate(
    trace: Trace,
    setup: PolicySetup,
    draws: DrawConfig,
    *,
    per_vc: bool = False,
    schedule: ScheduleFn | None = None,
    progress: ProgressFn | None = None,
    sharing: Sharing | None = None,
    calendar: WeeklyPlan | None = None,
) -> dict[str, Any]:
    """Replay `trace` (already on its cluster, see `resolve_cluster`) and summarise it; with
    a `calendar`, every host has a maintenance window a week (and a weekly booking if it
    asks for one), and the summary says what they cost (calendar.py)."""
    sharing = sharing or Sharing()
    drawn = draw(trace.jobs, draws, pooled=not per_vc)
    clusters = list(trace.queue_clusters.values()) if per_vc else [trace.cluster]
    gpu_types: Counter[str] = Counter()
    for cluster in clusters:
        if cluster is not None:
            gpu_types.update(cluster.gpus_by_type())
    profiles, profiles_path = sharing_profiles(trace, sharing) if sharing.on else ((), None)
    shares = draw_shares(
        trace.jobs,
        trace.catalog,
        set(gpu_types),
        profiles,
        seed=draws.seed,
        reserve_gib=setup.knobs.share_reserve_gib,
        sharing=sharing.on,
        light=sharing.mode == "ideal",
    )
    specs = job_specs(trace.jobs, drawn, setup, draws, shares)
    host_sharing = HOST_SHARING if sharing.on else ""
    dropped = Counter(trace.dropped)
    results: list[RunResult] = []
    if per_vc:
        by_queue: dict[str, list[JobSpec]] = {queue: [] for queue in trace.queue_clusters}
        for spec in specs:
            if spec.queue in by_queue:
                by_queue[spec.queue].append(spec)
            else:
                dropped["vc_without_nodes"] += 1
        done = 0
        total = sum(len(jobs) for jobs in by_queue.values())
        for queue, jobs in by_queue.items():
            engine = Engine(
                jobs,
                trace.queue_clusters[queue],
                trace.catalog,
                setup,
                schedule=schedule,
                label=queue,
                progress=_offset(progress, done, total),
                **_engine_options(setup),
                host_prefix=f"{queue}-n",
                sharing=host_sharing,
                calendar=_calendar(calendar, trace.queue_clusters[queue], jobs),
            )
            results.append(engine.run())
            done += len(jobs)
    else:
        assert trace.cluster is not None
        engine = Engine(
            specs,
            trace.cluster,
            trace.catalog,
            setup,
            schedule=schedule,
            progress=progress,
            **_engine_options(setup),
            sharing=host_sharing,
            calendar=_calendar(calendar, trace.cluster, specs),
        )
        results.append(engine.run())
    summary = summarize(results)
    summary["trace"] = {
        "format": trace.format,
        "file": trace.path.name,
        "jobs": len(trace.jobs),
        "dropped": dict(dropped),
        "per_vc": per_vc,
        "gpu_types": dict(gpu_types),
    }
    summary["draws"] = asdict(draws)
    summary["sharing"] = {
        "mode": sharing.mode,
        "hosts": host_sharing or None,
        "profiles": profiles_path.name if profiles and profiles_path else None,
        "profiles_found": bool(profiles) if sharing.on else None,
        "fraction_jobs": sum(1 for share in shares if share.fraction),
        "share_jobs": sum(1 for spec in specs if spec.share_gib is not None),
        "with_fingerprint": sum(1 for spec in specs if spec.fingerprint is not None),
    }
    summary["knobs"] = {key: _plain(value) for key, value in _knobs(setup).items()}
    if calendar is not None:
        summary["calendar"] = {
            **asdict(calendar),
            **calendar_summary(
                calendar.mode,
                [window for result in results for window in result.windows],
                [booking for result in results for booking in result.bookings],
            ),
        }
    return summary


def _calendar(
    plan: WeeklyPlan | None, cluster: ClusterSpec, jobs: list[JobSpec]
) -> Calendar | None:
    """The weekly windows of a cluster over its jobs' submissions; bookings for the team
    with the most estimated GPU-hours."""
    if plan is None or not jobs:
        return None
    first = min(spec.submit for spec in jobs)
    last = max(spec.submit for spec in jobs)
    team = busiest_team([(spec.team, spec.est_gpu_hours) for spec in jobs])
    return weekly_calendar(plan, cluster, first, last, team)


def _engine_options(setup: PolicySetup) -> dict[str, Any]:
    if setup.fair_share_half_life_hours is None:
        return {}
    return {"fair_share_half_life_hours": setup.fair_share_half_life_hours}


def _knobs(setup: PolicySetup) -> dict[str, Any]:
    knobs = setup.knobs
    figures = {name: getattr(knobs, name) for name in knobs.__dataclass_fields__}
    figures["headroom"] = dict(knobs.headroom)
    figures["multifactor"] = asdict(knobs.multifactor)
    figures["hold_gpus_for_data"] = setup.hold_gpus_for_data
    figures["oracle_estimates"] = setup.oracle_estimates
    return figures


def _offset(progress: ProgressFn | None, done: int, total: int) -> ProgressFn | None:
    if progress is None:
        return None
    report: Callable[[int, int], None] = progress

    def shifted(finished: int, _of: int) -> None:
        report(done + finished, total)

    return shifted
