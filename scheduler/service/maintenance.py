"""`/gpu admin maintenance add | list | cancel`: a host's planned maintenance (issue 32).

What a window does is the policy's and the cycle's: before it no job is started on the host
that would still run when it opens (scheduler/policy/capacity.py, `closing_before`); the
owners of jobs there that would run into it are told the day before and an hour before, and
at its start what still runs is stopped with its grace and queued again
(scheduler/maintenance.py); it ends by itself.
"""

from __future__ import annotations

from datetime import datetime

from scheduler.errors import Action, Conflict, NotFound, Problem, UserError
from scheduler.maintenance import local_time, runs_into
from scheduler.results import Listing, Said, SaidCode
from scheduler.service.context import Context
from storage.models import JobState, MaintenanceWindow
from storage.queries import cluster as cluster_queries
from storage.queries import maintenance as maintenance_queries


def add(ctx: Context, host: str, starts: datetime, ends: datetime, reason: str) -> Said:
    """Plan a window on a registered host, from now on, not overlapping another of its own."""
    ctx.require_admin(Action.PLAN_MAINTENANCE)
    if cluster_queries.host_by_name(session=ctx.session, name=host) is None:
        raise NotFound(Problem.HOST_NOT_FOUND, name=host)
    starts, ends = window_of(ctx, starts, ends)
    clash = maintenance_queries.overlapping(
        session=ctx.session, host=host, starts_at=starts, ends_at=ends
    )
    if clash:
        raise Conflict(
            Problem.MAINTENANCE_OVERLAPS,
            host=host,
            window=clash[0].id or 0,
            starts=_local(ctx, clash[0].starts_at),
            ends=_local(ctx, clash[0].ends_at),
        )
    window = maintenance_queries.add(
        session=ctx.session,
        host=host,
        starts_at=starts,
        ends_at=ends,
        reason=reason,
        by=ctx.actor.user_id,
        at=ctx.now,
    )
    ctx.audit(
        "maintenance.add",
        "host",
        host,
        window=window.id,
        starts=starts.isoformat(),
        ends=ends.isoformat(),
        reason=reason,
    )
    return Said(
        SaidCode.MAINTENANCE_ADDED,
        {**_values(ctx, window), "overrun": _running_into(ctx, window)},
    )


def listing(ctx: Context) -> Listing:
    """The windows planned and under way, soonest first."""
    ctx.require_admin(Action.PLAN_MAINTENANCE)
    rows = [
        Said(
            SaidCode.MAINTENANCE_ROW_UNDER_WAY
            if window.starts_at <= ctx.now
            else SaidCode.MAINTENANCE_ROW,
            _values(ctx, window),
        )
        for window in maintenance_queries.not_over(session=ctx.session, now=ctx.now)
    ]
    return Listing(rows, SaidCode.MAINTENANCE_NONE)


def cancel(ctx: Context, window_id: int) -> Said:
    """Cancel a window (one under way ends now: its host takes jobs again)."""
    ctx.require_admin(Action.PLAN_MAINTENANCE)
    window = maintenance_queries.get(session=ctx.session, window_id=window_id)
    if window is None or window.ends_at <= ctx.now:
        raise NotFound(Problem.MAINTENANCE_NOT_FOUND, window=window_id)
    if not maintenance_queries.cancel(
        session=ctx.session, window_id=window_id, by=ctx.actor.user_id, at=ctx.now
    ):
        raise NotFound(Problem.MAINTENANCE_NOT_FOUND, window=window_id)
    ctx.audit("maintenance.cancel", "host", window.host, window=window_id)
    return Said(SaidCode.MAINTENANCE_CANCELLED, _values(ctx, window))


def _values(ctx: Context, window: MaintenanceWindow) -> dict[str, str | int]:
    return {
        "id": window.id or 0,
        "host": window.host,
        "starts": _local(ctx, window.starts_at),
        "ends": _local(ctx, window.ends_at),
        "reason": window.reason,
    }


def _running_into(ctx: Context, window: MaintenanceWindow) -> int:
    """How many jobs running on the host now are expected to still run at its start."""
    jobs = cluster_queries.jobs_on_host(session=ctx.session, host_name=window.host)
    return sum(
        1
        for job in jobs
        if job.state in (JobState.RUNNING, JobState.UNKNOWN)
        and runs_into(job, window.starts_at, ctx.now)
    )


def window_of(ctx: Context, starts: datetime, ends: datetime) -> tuple[datetime, datetime]:
    """A window an admin typed (a maintenance, a booking), in UTC: it ends after it starts,
    and has not ended yet."""
    starts, ends = ctx.moment(starts), ctx.moment(ends)
    if starts >= ends:
        raise UserError(
            Problem.MAINTENANCE_BACKWARDS, starts=_local(ctx, starts), ends=_local(ctx, ends)
        )
    if ends <= ctx.now:
        raise UserError(Problem.MAINTENANCE_OVER, ends=_local(ctx, ends))
    return starts, ends


def _local(ctx: Context, moment: datetime) -> str:
    return local_time(moment, ctx.policy.zone)
