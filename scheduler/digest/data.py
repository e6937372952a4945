"""Building the daily digest from the database, in one transaction at `ctx.now`.

It reuses the services users already see (the board, the queue with its reasons and
ETAs, the ledger report, quotas), so the digest never disagrees with `/gpu board` or
`/gpu report`; only the idle GPU-hours and the timeline read the samples themselves.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta

from sqlmodel import Session

from scheduler.alerts.quota import used_thresholds_passed
from scheduler.config import PolicyConfig
from scheduler.digest.model import (
    BookingAhead,
    DayUsage,
    Digest,
    IdleJob,
    IdleUsage,
    JobLine,
    MaintenanceAhead,
    QuotaWarning,
    TypeUtilization,
    UsageLine,
    WaitInfo,
)
from scheduler.digest.outputs import day_outputs
from scheduler.digest.timeline import WINDOW, build_timeline, sample_interval
from scheduler.ledger import quota_use
from scheduler.policy.priority_classes import PriorityClass
from scheduler.service import jobs
from scheduler.service.board import NEXT_UP, board
from scheduler.service.context import Actor, Context
from scheduler.service.jobs import JobView
from scheduler.service.report import report
from scheduler.snapshots import build_snapshot
from storage.models import JobState
from storage.models.cluster import WHOLE_CARD
from storage.queries import accounting
from storage.queries import cluster as cluster_queries
from storage.queries import digest as digest_queries
from storage.queries import maintenance as maintenance_queries
from storage.queries import org as org_queries
from storage.queries import reservations as reservation_queries

# The actor the digest reads as: it only reads, and every part it reads is open to all.
SYSTEM_ACTOR = Actor("paika", None, None, None)
# How many jobs each list names; the totals still count every job.
READY_SHOWN = 10
WAITING_DATA_SHOWN = 10
IDLE_JOBS_SHOWN = 5


def build_digest(ctx: Context, day: date | None = None) -> Digest:
    """The digest for `day` (by default today in the policy's time zone) as things stand at `ctx.now`."""
    policy, now = ctx.policy, ctx.now
    day = day or now.astimezone(policy.zone).date()
    seen = board(ctx)
    queue = jobs.queue(ctx, "all")
    snapshot = build_snapshot(ctx.session, policy, now)
    cards = {(card.host, card.index): card for host in seen.hosts for card in host.cards}
    timeline = build_timeline(
        ctx.session,
        policy,
        now,
        cards,
        queue.waiting,
        {running.id: running.expected_end for running in snapshot.running},
        {pending.id: pending.run_seconds for pending in snapshot.pending},
    )
    ready = [v for v in queue.waiting if v.job.state != JobState.WAITING_DATA]
    for_data = sorted(
        (v for v in queue.waiting if v.job.state == JobState.WAITING_DATA),
        key=lambda v: (v.job.submitted_at, v.job.id or 0),
    )
    return Digest(
        day=day,
        at=now,
        timezone=policy.timezone,
        hosts=len(seen.hosts),
        types=seen.types,
        running=len(queue.running),
        waiting_by_class={
            priority.value: sum(1 for v in queue.waiting if v.job.priority == priority.value)
            for priority in PriorityClass
        },
        waiting_for_data=len(for_data),
        ready=tuple(_line(v) for v in ready[:READY_SHOWN]),
        ready_total=len(ready),
        waiting_data=tuple(_line(v) for v in for_data[:WAITING_DATA_SHOWN]),
        next_up=tuple(_line(v) for v in jobs.next_up(queue.waiting, NEXT_UP)),
        yesterday=_yesterday(ctx, day),
        idle=idle_usage(ctx, *day_bounds(policy, day - timedelta(days=1))),
        quota_warnings=_quota_warnings(ctx, day),
        timeline=timeline,
        utilization=_utilization(ctx, [t.gpu_type for t in seen.types]),
        config_version=seen.config_version,
        maintenance=_maintenance(ctx),
        bookings=_bookings(ctx),
    )


def _maintenance(ctx: Context) -> tuple[MaintenanceAhead, ...]:
    """Every host's planned maintenance not over yet, soonest first."""
    return tuple(
        MaintenanceAhead(window.host, window.starts_at, window.ends_at, window.reason)
        for window in maintenance_queries.not_over(session=ctx.session, now=ctx.now)
    )


def _bookings(ctx: Context) -> tuple[BookingAhead, ...]:
    """Every booking not over yet, soonest first, with its team's name."""
    names: dict[int, str] = {}
    found = []
    for booking in reservation_queries.not_over(session=ctx.session, now=ctx.now):
        if booking.team_id not in names:
            team = org_queries.team_by_id(session=ctx.session, team_id=booking.team_id)
            names[booking.team_id] = team.name if team is not None else f"team {booking.team_id}"
        found.append(
            BookingAhead(
                names[booking.team_id],
                booking.gpu_type,
                booking.gpus,
                booking.starts_at,
                booking.ends_at,
                booking.reason,
            )
        )
    return tuple(found)


def system_context(session: Session, policy: PolicyConfig, now: datetime) -> Context:
    """A context for building the digest outside any user's command."""
    return Context(session, now, policy, SYSTEM_ACTOR)


def day_bounds(policy: PolicyConfig, day: date) -> tuple[datetime, datetime]:
    """The start and end (UTC) of a calendar day in the policy's time zone."""
    zone = policy.zone
    start = datetime.combine(day, time.min, tzinfo=zone)
    end = datetime.combine(day + timedelta(days=1), time.min, tzinfo=zone)
    return start.astimezone(UTC), end.astimezone(UTC)


def _line(view: JobView) -> JobLine:
    job = view.job
    return JobLine(
        job_id=job.id or 0,
        name=job.name,
        team=view.team,
        owner=job.owner,
        priority=job.priority,
        state=job.state,
        gpus=job.gpus,
        gpu_type=view.likely_type,
        est_gpu_hours=job.est_gpu_hours,
        submitted_at=job.submitted_at,
        data_location=job.data_location,
        wait=WaitInfo.of(view.wait) if view.wait else None,
    )


def _yesterday(ctx: Context, day: date) -> DayUsage:
    before = day - timedelta(days=1)
    start, end = day_bounds(ctx.policy, before)
    ledger = report(ctx, None, start, min(end, ctx.now))
    finished, projects = day_outputs(ctx, start, min(end, ctx.now))
    return DayUsage(
        day=before,
        start=start,
        end=end,
        rows=tuple(
            UsageLine(row.team, row.gpu_type, row.gpu_hours, row.cost, row.jobs)
            for row in ledger.rows
        ),
        total_gpu_hours=ledger.total_gpu_hours,
        total_cost=ledger.total_cost,
        job_count=ledger.job_count,
        finished=finished,
        projects=projects,
    )


def idle_usage(ctx: Context, start: datetime, end: datetime) -> IdleUsage:
    """GPU-hours that running jobs held below the policy's idle utilization in [start, end).

    Each sample below the threshold on a held GPU stands for the time between two samples
    (see `sample_interval`), so a GPU idle for the whole day counts 24 GPU-hours.
    """
    threshold = ctx.policy.reclaim.idle_utilization_pct
    found = cluster_queries.idle_held_between(
        session=ctx.session, start=start, end=end, below_pct=threshold
    )
    hours_per_sample = sample_interval(ctx.policy) / 3600
    by_type: dict[str, float] = defaultdict(float)
    by_job: dict[tuple[int, str], float] = defaultdict(float)
    for job_id, gpu_type, milli, samples in found.parts:
        # A job on a shared card held its part of it idle, as the ledger charges it.
        part = min(milli, WHOLE_CARD) / WHOLE_CARD
        by_job[(job_id, gpu_type)] += samples * hours_per_sample * part
        if milli >= WHOLE_CARD:
            by_type[gpu_type] += samples * hours_per_sample
    # A shared card idle counts once, whatever number of jobs were on it.
    for gpu_type, samples in found.shared_cards.items():
        by_type[gpu_type] += samples * hours_per_sample
    held = digest_queries.jobs_by_id(session=ctx.session, job_ids={job for job, _ in by_job})
    teams = {team.id: team.name for team in org_queries.all_teams(session=ctx.session)}
    ranked = sorted(by_job.items(), key=lambda item: (-item[1], item[0]))
    named = []
    for (job_id, gpu_type), hours in ranked[:IDLE_JOBS_SHOWN]:
        job = held.get(job_id)
        named.append(
            IdleJob(
                job_id,
                job.name if job else f"job {job_id}",
                teams.get(job.team_id, "") if job else "",
                job.owner if job else "",
                gpu_type,
                hours,
            )
        )
    return IdleUsage(
        start=start,
        end=end,
        threshold_pct=threshold,
        gpu_hours=sum(by_type.values()),
        by_type=dict(sorted(by_type.items())),
        jobs=tuple(named),
        job_count=len({job for job, _ in by_job}),
    )


def _quota_warnings(ctx: Context, day: date) -> tuple[QuotaWarning, ...]:
    """Quotas the alerts would warn about now: expiring within the furthest alert's days,
    or past any used-% alert (each with the highest threshold passed). Expired ones are
    left out: nothing can be charged to them any more, so there is nothing left to warn of."""
    alerts = ctx.policy.alerts
    within = max(alerts.quota_days_before, default=0)
    rows = list(accounting.quotas(session=ctx.session))
    teams = {team.id: team.name for team in org_queries.all_teams(session=ctx.session)}
    warnings = []
    # Running jobs' hours so far count, as /gpu quota counts them.
    for quota, state in zip(rows, quota_use(ctx.session, rows, ctx.now), strict=True):
        days_left = (quota.expires_on - day).days
        if days_left < 0:
            continue
        used_pct = 100 * state.used_hours / quota.gpu_hours if quota.gpu_hours > 0 else 100.0
        passed = used_thresholds_passed(quota.gpu_hours, state.used_hours, ctx.policy)
        expiring = days_left <= within
        if not expiring and not passed:
            continue
        warnings.append(
            QuotaWarning(
                quota_id=quota.id or 0,
                team=teams.get(quota.team_id, f"team {quota.team_id}"),
                gpu_type=quota.gpu_type,
                total_hours=quota.gpu_hours,
                used_hours=state.used_hours,
                left_hours=state.left_hours,
                expires_on=quota.expires_on,
                days_left=days_left,
                owner=quota.owner,
                expiring=expiring,
                used_pct=used_pct,
                used_threshold=max(passed) if passed else None,
            )
        )
    return tuple(sorted(warnings, key=lambda w: (w.days_left, -w.used_pct, w.quota_id)))


def _utilization(ctx: Context, types: Sequence[str]) -> tuple[TypeUtilization, ...]:
    """Hourly mean utilization per GPU type over the last day, in the board's type order."""
    start = ctx.now - WINDOW
    hours = int(WINDOW / timedelta(hours=1))
    means: dict[str, list[float | None]] = {}
    for gpu_type, bucket, mean in digest_queries.utilization_by_type(
        session=ctx.session, start=start, end=ctx.now, width_seconds=3600
    ):
        series = means.setdefault(gpu_type, [None] * hours)
        series[max(0, min(hours - 1, bucket))] = mean
    order = [name for name in types if name in means] + sorted(set(means) - set(types))
    return tuple(TypeUtilization(name, tuple(means[name])) for name in order)
