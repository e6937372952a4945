"""`/gpu priority <job>`: a waiting job's place in the order, term by term (like Slurm's
`sprio`): its class, its size, its aging, its team's fair share, the starvation backstop,
and the jobs ahead of it.

The inputs are the cycle's own (`build_snapshot`), and the terms come from the policy's
`rank_terms`, so what is shown is what orders the queue. Anyone may ask about any job, as
with `/gpu status`; nothing here names a command.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.policy.capacity import Capacity
from scheduler.policy.ranking import RankTerms, TimeScale, rank_terms, time_scale, usage_shares
from scheduler.policy.scheduler import queue_order
from scheduler.policy.snapshot import HOUR, Knobs
from scheduler.service.context import Context
from scheduler.service.lookup import job_by_ref, team_name
from scheduler.service.records import JobRecord
from scheduler.snapshots import PENDING_STATES, build_snapshot


@dataclass(frozen=True, slots=True)
class TeamUsage:
    """One team's recent GPU-hours (decayed by age) and its share of all teams'."""

    team: str
    gpu_hours: float
    share: float


@dataclass(frozen=True, slots=True)
class AheadJob:
    """A job the scheduler considers before this one."""

    id: int
    priority: str
    team: str


@dataclass(frozen=True, slots=True)
class OrderingKnobs:
    """The policy's settings the terms are read against."""

    respect_classes: bool
    within_class: str
    aging_hours: float  # the wait that doubles aging, now
    max_aging_factor: float | None
    starve_after_hours: float | None  # the backstop, now
    fair_share_weight: float
    half_life_hours: float
    # Aging and the backstop are in units of the queue's drain time: the hours above are this
    # moment's (they move with the queue).
    scale_free: bool = False


@dataclass(frozen=True)
class PriorityResult:
    """A job's priority terms; `terms` is None when the job is not waiting (then only its
    state and times tell where it is)."""

    job: JobRecord
    team: str
    terms: RankTerms | None
    position: int  # 1 = considered first; 0 when not waiting
    queue_length: int
    ahead: tuple[AheadJob, ...]  # in the order considered
    usage: tuple[TeamUsage, ...]  # every team with recent usage, most first
    knobs: OrderingKnobs


def priority(ctx: Context, job_id: int | None, name: str | None) -> PriorityResult:
    """The breakdown of one job's place in the order at `ctx.now`."""
    job = job_by_ref(ctx, job_id, name)
    record = JobRecord.of(job)
    team = team_name(ctx, job.team_id)
    half_life = ctx.policy.scheduler.ordering.fair_share_half_life_hours
    if job.state not in PENDING_STATES:
        return PriorityResult(
            record, team, None, 0, 0, (), (), _knobs(ctx.policy.knobs(), half_life)
        )
    ctx.session.flush()
    snapshot = build_snapshot(ctx.session, ctx.policy, ctx.now)
    capacity = Capacity(snapshot)
    queue, scales = queue_order(snapshot, capacity)
    place = next(i for i, pending in enumerate(queue) if pending.id == record.id)
    shares = usage_shares(snapshot.team_usage)
    terms = rank_terms(
        queue[place],
        snapshot.now,
        snapshot.knobs,
        shares,
        cluster_gpus=capacity.total_gpus,
        scales=scales,
    )
    usage = tuple(
        TeamUsage(name, hours, shares.get(name, 0.0))
        for name, hours in sorted(snapshot.team_usage.items(), key=lambda kv: (-kv[1], kv[0]))
        if hours > 0
    )
    ahead = tuple(AheadJob(p.id, p.priority, p.team) for p in queue[:place])
    knobs = _knobs(snapshot.knobs, half_life, scales.of_job(terms.job_id, terms.class_rank))
    return PriorityResult(record, team, terms, place + 1, len(queue), ahead, usage, knobs)


def _knobs(knobs: Knobs, half_life_hours: float, scale: TimeScale | None = None) -> OrderingKnobs:
    scale = scale or time_scale(knobs)
    return OrderingKnobs(
        respect_classes=knobs.respect_classes,
        within_class=str(knobs.within_class),
        aging_hours=scale.aging_s / HOUR,
        max_aging_factor=knobs.max_aging_factor,
        starve_after_hours=None if scale.starve_after_s is None else scale.starve_after_s / HOUR,
        fair_share_weight=knobs.fair_share_weight,
        half_life_hours=half_life_hours,
        scale_free=knobs.aging_drains is not None or knobs.starve_after_drains is not None,
    )
