"""The database as the policy sees it: one immutable Snapshot per pass.

Times become POSIX seconds here; quota expiry dates become the end of that day in the
install's time zone; each owner's estimates are corrected by how their past jobs ran.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from sqlmodel import Session

from scheduler.config import PolicyConfig
from scheduler.fingerprints import with_fingerprints
from scheduler.ledger import quota_use
from scheduler.policy.matching import CardNeeds
from scheduler.policy.plan import HostOut
from scheduler.policy.quota import QuotaState
from scheduler.policy.snapshot import (
    HOUR,
    Gpu,
    Host,
    Pending,
    Running,
    Snapshot,
    TeamWindow,
    wall_hours,
)
from storage.models import ON_HOST_STATES, HostState, Job, JobState
from storage.models.cluster import WHOLE_CARD
from storage.queries import accounting, share_apart
from storage.queries import cluster as cluster_queries
from storage.queries import dependencies as dependency_queries
from storage.queries import holds as hold_queries
from storage.queries import jobs as job_queries
from storage.queries import maintenance as maintenance_queries
from storage.queries import org as org_queries
from storage.queries import reservations as reservation_queries

PENDING_STATES = (JobState.WAITING_DATA, JobState.QUEUED, JobState.PREEMPTED)
# How many of an owner's finished jobs tell how their estimates turn out, and the bounds
# on the correction, so one odd run cannot make paika trust an estimate 100× less.
ESTIMATE_HISTORY = 20

# A job as the policy reads it: a plain row of storage.queries.jobs.planning_rows (or a Job).
PlannedJob = Any
RATIO_BOUNDS = (0.25, 4.0)
# A resumed job's estimate of what is left never drops below this share of its estimate.
LEFT_FLOOR = 0.1


def build_snapshot(session: Session, policy: PolicyConfig, now: datetime) -> Snapshot:
    """Hosts, GPUs, running and pending jobs, quotas and usage at `now`."""
    teams = {team.id: team.name for team in org_queries.all_teams(session=session)}
    holders: dict[int, int] = {}
    tenants: dict[int, list[int]] = defaultdict(list)  # shared cards: GPU id → its jobs
    held: dict[int, list[int]] = defaultdict(list)
    shared_jobs: set[int] = set()
    for gpu_id, job_id, milli in cluster_queries.open_parts(session=session):
        holders[gpu_id] = job_id
        held[job_id].append(gpu_id)
        if milli < WHOLE_CARD:
            tenants[gpu_id].append(job_id)
            shared_jobs.add(job_id)
    hosts = _hosts(session, policy, holders, tenants, now)
    gpu_types = {gpu.id: gpu.gpu_type for host in hosts for gpu in host.gpus}
    jobs = job_queries.planning_rows(session=session, states=(*PENDING_STATES, *ON_HOST_STATES))
    ratios = _estimate_ratios(session, {job.owner for job in jobs})
    # A preemptible job stopped before resumes from its checkpoint: what is left to run.
    kept = accounting.kept_gpu_hours(
        session=session, job_ids=[job.id for job in jobs if job.preemptions]
    )
    preemption = policy.scheduler.preemption
    running = [
        _running(
            job,
            held,
            gpu_types,
            teams,
            ratios,
            kept,
            preemption.grace_of(job.preempt_grace_s),
            shared=(job.id or 0) in shared_jobs,
        )
        for job in jobs
        if job.state in ON_HOST_STATES  # an unknown job still holds its GPUs
    ]
    refused = _held_hosts(session)
    # Jobs that slowed, or were slowed by, another on a shared card never share one again.
    waiting = [
        job.id or 0 for job in jobs if job.state in PENDING_STATES and getattr(job, "share", False)
    ]
    apart = share_apart.apart_from(session=session, job_ids=waiting)
    # Jobs that wait for other jobs: what each still waits for (one query for the queue).
    upstream = dependency_queries.unmet_of(
        session=session, job_ids=[job.id or 0 for job in jobs if job.state in PENDING_STATES]
    )
    pending = [
        _pending(
            job,
            teams,
            ratios,
            kept,
            refused.get(job.id or 0, ()),
            apart.get(job.id or 0),
            upstream.get(job.id or 0, ()),
        )
        for job in jobs
        if job.state in PENDING_STATES
    ]
    quotas, ends = _quotas(session, policy, teams, now)
    snapshot = Snapshot(
        now=now.timestamp(),
        hosts=tuple(hosts),
        running=tuple(running),
        pending=tuple(pending),
        catalog=policy.catalog(),
        knobs=policy.knobs(),
        quotas=quotas,
        quota_ends=ends,
        team_usage=_team_usage(session, policy, teams, now),
        team_windows=tuple(
            TeamWindow(
                b.id or 0,
                b.gpu_type,
                b.gpus,
                teams.get(b.team_id, ""),
                b.starts_at.timestamp(),
                b.ends_at.timestamp(),
            )
            for b in reservation_queries.not_over(session=session, now=now)
        ),
    )
    return with_fingerprints(session, snapshot)


def _hosts(
    session: Session,
    policy: PolicyConfig,
    holders: dict[int, int],
    tenants: dict[int, list[int]] | None = None,
    now: datetime | None = None,
) -> list[Host]:
    by_host: dict[int, list[Any]] = defaultdict(list)
    for gpu in cluster_queries.planning_gpus(session=session):
        by_host[gpu.host_id].append(gpu)
    windows = _windows(session, now) if now is not None else {}
    hosts = []
    for host in cluster_queries.host_rows(session=session):
        gpus = tuple(
            Gpu(
                gpu.id or 0,
                host.name,
                gpu.gpu_type,
                gpu.memory_gib,
                gpu.healthy,
                gpu.foreign_memory_gib,
                holders.get(gpu.id or 0),
                tuple((tenants or {}).get(gpu.id or 0, ())),
            )
            for gpu in sorted(by_host.get(host.id, ()), key=lambda g: g.index)
        )
        # An untrusted host (its certificate or token refused) gets no job: a job's command
        # and environment would go to whoever answers there.
        out = (
            HostOut.DOWN
            if host.state == HostState.DOWN
            else HostOut.UNTRUSTED
            if host.untrusted
            else HostOut.DRAINING
            if host.draining
            else ""
        )
        closes_at = None
        for starts, ends in windows.get(host.name, ()):
            if now is not None and starts <= now < ends:
                out = out or HostOut.MAINTENANCE
            elif closes_at is None:
                closes_at = starts.timestamp()
        hosts.append(Host(host.name, gpus, not out, out, _sharing(policy, host.name), closes_at))
    return hosts


def _windows(session: Session, now: datetime) -> dict[str, list[tuple[datetime, datetime]]]:
    """Each host's planned maintenance not over by `now`, soonest first."""
    found: dict[str, list[tuple[datetime, datetime]]] = {}
    for window in maintenance_queries.not_over(session=session, now=now):
        found.setdefault(window.host, []).append((window.starts_at, window.ends_at))
    return found


def _sharing(policy: PolicyConfig, host: str) -> str:
    """How a host keeps jobs on one card apart ("": it shares none): a host its agent runs
    jobs on (no pool, or a pool whose executor takes no settings) as the policy's `sharing`
    names it; a pool's host as its executor's settings say (a Slurm pool: its `shares`)."""
    pool = policy.pool_of(host)
    options = pool[1].options if pool is not None else None
    if options is None:
        return policy.sharing.mode_of(host)
    return options.sharing_mode()


def card_needs(job: PlannedJob) -> CardNeeds:
    """What a job asks of each of its GPUs, as the policy's fit check takes it."""
    return CardNeeds(
        tuple(job.gpu_types) if job.gpu_types else None, job.min_memory_gib, job.min_speed
    )


def left_gpu_hours(job: PlannedJob, kept: dict[int, float]) -> float:
    """A job's estimate of what it still has to run: for a preemptible job stopped before,
    its estimate less the GPU-hours its earlier stretches kept, never below a tenth of it
    (the estimate may have been short); for any other job its estimate."""
    estimate = float(job.est_gpu_hours)
    done = kept.get(job.id or 0, 0.0) if job.preemptible and job.preemptions else 0.0
    return max(estimate - done, estimate * LEFT_FLOOR)


def _held_hosts(session: Session) -> dict[int, tuple[tuple[str, str], ...]]:
    """Job id → (host, refusal code) of each host that refused it for good and still holds
    it off (scheduler/holds.py): the policy places it anywhere else."""
    found: dict[int, list[tuple[str, str]]] = {}
    for row in hold_queries.standing(session=session):
        found.setdefault(row.job_id, []).append((row.host, row.refusal))
    return {job_id: tuple(pairs) for job_id, pairs in found.items()}


def _pending(
    job: PlannedJob,
    teams: dict[int | None, str],
    ratios: dict[str, float],
    kept: dict[int, float] | None = None,
    holds: tuple[tuple[str, str], ...] = (),
    apart_from: frozenset[int] | None = None,
    waits_for: tuple[tuple[int, str], ...] = (),
) -> Pending:
    return Pending(
        job.id or 0,
        job.priority,
        teams.get(job.team_id, ""),
        job.owner,
        job.submitted_at.timestamp(),
        job.data_ready,
        job.gpus,
        card_needs(job),
        left_gpu_hours(job, kept or {}),
        ratios.get(job.owner, 1.0),
        preemptible=bool(job.preemptible),
        preemptions=job.preemptions or 0,
        holds=holds,
        share=bool(getattr(job, "share", False)),
        account=job.account,
        apart_from=apart_from or frozenset(),
        waits_for=waits_for,
        array_id=getattr(job, "array_id", None),
        array_limit=getattr(job, "array_max_running", None),
    )


def _running(
    job: PlannedJob,
    holders: dict[int, list[int]],
    gpu_types: dict[int, str],
    teams: dict[int | None, str],
    ratios: dict[str, float],
    kept: dict[int, float] | None = None,
    grace_s: float | None = None,
    *,
    shared: bool = False,
) -> Running:
    gpu_ids = tuple(sorted(holders.get(job.id or 0, ())))
    # The start of its current run (a resumed job's earlier runs are in `kept`).
    started = (job.started_at or job.submitted_at).timestamp()
    left = left_gpu_hours(job, kept or {})
    expected = started + wall_hours(left, job.gpus, ratios.get(job.owner, 1.0)) * HOUR
    gpu_type = gpu_types.get(gpu_ids[0], "") if gpu_ids else ""
    preemptible = bool(job.preemptible)
    return Running(
        job.id or 0,
        job.priority,
        teams.get(job.team_id, ""),
        gpu_ids,
        gpu_type,
        started,
        expected,
        # Already asked to stop (a preemption, a cancel): its GPUs are on their way back.
        preempting=job.stop_requested_at is not None,
        preemptible=preemptible,
        preemptions=job.preemptions or 0,
        grace_s=grace_s if preemptible else None,
        # On a shared card: the memory it declared is what its neighbours plan around.
        share_gib=float(job.min_memory_gib or 0.0) if shared else None,
        account=job.account,
        array_id=getattr(job, "array_id", None),
    )


@dataclass(frozen=True)
class EstimateRecord:
    """How one owner's recent finished runs compared with their estimates."""

    runs: int  # finished runs counted (at most ESTIMATE_HISTORY)
    median: float  # median actual ÷ estimated run time, as measured
    ratio: float  # the same within RATIO_BOUNDS: what paika plans their jobs with
    overran: int  # runs that took longer than estimated


def estimate_records(session: Session, owners: Collection[str]) -> dict[str, EstimateRecord]:
    """Each owner's median actual ÷ estimated run time (wall time per GPU) over their recent
    finished jobs: what the planner corrects their estimates with, and what people are shown."""
    samples: dict[str, list[float]] = defaultdict(list)
    for run in job_queries.recent_runs(session=session, owners=owners, limit=ESTIMATE_HISTORY):
        if run.started_at is None or run.ended_at is None or run.est_gpu_hours <= 0:
            continue
        actual = (run.ended_at - run.started_at).total_seconds()
        estimated = wall_hours(run.est_gpu_hours, run.gpus) * HOUR
        samples[run.owner].append(actual / estimated)
    records = {}
    for owner, found in samples.items():
        found.sort()
        median = found[len(found) // 2]
        records[owner] = EstimateRecord(
            len(found),
            median,
            min(max(median, RATIO_BOUNDS[0]), RATIO_BOUNDS[1]),
            sum(1 for ratio in found if ratio > 1),
        )
    return records


def expected_wall_hours(session: Session, job: Job) -> float:
    """How long the job's run is expected to take, as the policy plans it: what it has left
    to run (a resumed job less what its checkpoint kept) over its GPUs, times its owner's
    ratio of actual to estimated run time. Slurm's --time is this with the pool's margin."""
    kept = (
        accounting.kept_gpu_hours(session=session, job_ids=[job.id or 0])
        if job.preemptible and job.preemptions
        else {}
    )
    ratio = _estimate_ratios(session, {job.owner}).get(job.owner, 1.0)
    return wall_hours(left_gpu_hours(job, kept), job.gpus, ratio)


def _estimate_ratios(session: Session, owners: set[str]) -> dict[str, float]:
    """Each owner's planning ratio (see `estimate_records`)."""
    return {owner: found.ratio for owner, found in estimate_records(session, owners).items()}


def _quotas(
    session: Session, policy: PolicyConfig, teams: dict[int | None, str], now: datetime
) -> tuple[dict[str, tuple[QuotaState, ...]], dict[int, float]]:
    rows = accounting.quotas(session=session)
    # What running jobs have used so far counts, as /gpu quota and the ledger count it: a
    # quota half spent by a running week-long job is not offered whole to the next job, and
    # the hours a wait reason says are left are the hours /gpu quota says are left.
    states = quota_use(session, rows, now)
    by_team: dict[str, list[QuotaState]] = defaultdict(list)
    ends = {}
    for row, state in zip(rows, states, strict=True):
        by_team[teams.get(row.team_id, "")].append(state)
        ends[state.id] = expiry_moment(row.expires_on, policy)
    return {team: tuple(states) for team, states in by_team.items()}, ends


def expiry_moment(day: date, policy: PolicyConfig) -> float:
    """A quota lasts to the end of its expiry day in the install's time zone (a day at the
    calendar's end, stored before dates were bounded at the door, means never)."""
    try:
        return datetime.combine(day + timedelta(days=1), time.min, tzinfo=policy.zone).timestamp()
    except (OverflowError, ValueError):
        return math.inf


def _team_usage(
    session: Session, policy: PolicyConfig, teams: dict[int | None, str], now: datetime
) -> dict[str, float]:
    """Recent GPU-hours per team, each entry decayed by its age (half-life from the policy)."""
    half_life = policy.scheduler.ordering.fair_share_half_life_hours * HOUR
    since = now - timedelta(seconds=half_life * 6)
    usage: dict[str, float] = defaultdict(float)
    for team_id, ended_at, gpu_hours in accounting.usage_since(session=session, since=since):
        age = max(0.0, (now - ended_at).total_seconds())
        usage[teams.get(team_id, "")] += gpu_hours * math.pow(0.5, age / half_life)
    return dict(usage)
