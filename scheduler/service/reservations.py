"""`/gpu admin reserve add | list | cancel`: cards booked ahead for a team (issue 32).

What a booking does is the policy's (scheduler/policy/capacity.py, `reserved_against`): before
its window no other team's job is started on the type's cards that would leave fewer free at
its start than it books; inside the window other teams leave that many free for the team.
The team's members see their bookings in `/gpu queue`; others see why the cards are not
theirs in the reason their job waits.
"""

from __future__ import annotations

from datetime import datetime

from scheduler.errors import Action, NotFound, Problem, UserError
from scheduler.maintenance import local_time
from scheduler.results import Listing, Said, SaidCode
from scheduler.service.context import Context
from scheduler.service.lookup import team_by_name
from scheduler.service.maintenance import window_of
from storage.models import TeamReservation
from storage.queries import cluster as cluster_queries
from storage.queries import org as org_queries
from storage.queries import reservations as reservation_queries


def add(
    ctx: Context,
    gpus: int,
    gpu_type: str,
    starts: datetime,
    ends: datetime,
    team_name: str,
    reason: str,
) -> Said:
    """Book `gpus` cards of a type for a team, from now on; no more than the type has."""
    ctx.require_admin(Action.BOOK_CARDS)
    team = team_by_name(ctx, team_name)
    if gpu_type not in ctx.policy.gpu_types:
        raise NotFound(
            Problem.BOOKING_UNKNOWN_TYPE, gpu_type=gpu_type, types=tuple(ctx.policy.gpu_types)
        )
    starts, ends = window_of(ctx, starts, ends)
    have = sum(
        1
        for gpu in cluster_queries.all_gpus(session=ctx.session)
        if gpu.gpu_type == gpu_type and gpu.healthy
    )
    booked = sum(
        b.gpus
        for b in reservation_queries.not_over(session=ctx.session, now=ctx.now)
        if b.gpu_type == gpu_type and b.starts_at < ends and b.ends_at > starts
    )
    if gpus + booked > have:
        raise UserError(
            Problem.BOOKING_TOO_MANY, gpus=gpus, gpu_type=gpu_type, have=have, booked=booked
        )
    booking = reservation_queries.add(
        session=ctx.session,
        team_id=team.id or 0,
        gpu_type=gpu_type,
        gpus=gpus,
        starts_at=starts,
        ends_at=ends,
        reason=reason,
        by=ctx.actor.user_id,
        at=ctx.now,
    )
    ctx.audit(
        "reservation.add",
        "team",
        team.name,
        booking=booking.id,
        gpus=gpus,
        gpu_type=gpu_type,
        starts=starts.isoformat(),
        ends=ends.isoformat(),
        reason=reason,
    )
    return Said(SaidCode.BOOKING_ADDED, _values(ctx, booking, team.name))


def listing(ctx: Context) -> Listing:
    """The bookings ahead and under way, soonest first."""
    ctx.require_admin(Action.BOOK_CARDS)
    return Listing(
        [
            Said(SaidCode.BOOKING_ROW, _values(ctx, b, _team_name(ctx, b.team_id)))
            for b in reservation_queries.not_over(session=ctx.session, now=ctx.now)
        ],
        SaidCode.BOOKING_NONE,
    )


def cancel(ctx: Context, booking_id: int) -> Said:
    """Cancel a booking (one under way ends now: its cards are everyone's again)."""
    ctx.require_admin(Action.BOOK_CARDS)
    booking = reservation_queries.get(session=ctx.session, reservation_id=booking_id)
    if (
        booking is None
        or booking.ends_at <= ctx.now
        or not reservation_queries.cancel(
            session=ctx.session, reservation_id=booking_id, by=ctx.actor.user_id, at=ctx.now
        )
    ):
        raise NotFound(Problem.BOOKING_NOT_FOUND, booking=booking_id)
    ctx.audit("reservation.cancel", "team", _team_name(ctx, booking.team_id), booking=booking_id)
    return Said(SaidCode.BOOKING_CANCELLED, _values(ctx, booking, _team_name(ctx, booking.team_id)))


def upcoming(ctx: Context) -> list[Said]:
    """Every booking ahead or under way, as the board shows it to anyone."""
    return [
        Said(SaidCode.BOOKING_ROW, _values(ctx, b, _team_name(ctx, b.team_id)))
        for b in reservation_queries.not_over(session=ctx.session, now=ctx.now)
    ]


def of_team(ctx: Context, team_id: int | None) -> list[Said]:
    """A team's bookings ahead and under way, as its members see them in /gpu queue."""
    if team_id is None:
        return []
    return [
        Said(SaidCode.BOOKING_YOURS, _values(ctx, b, _team_name(ctx, b.team_id)))
        for b in reservation_queries.not_over(session=ctx.session, now=ctx.now)
        if b.team_id == team_id
    ]


def _team_name(ctx: Context, team_id: int) -> str:
    team = org_queries.team_by_id(session=ctx.session, team_id=team_id)
    return team.name if team is not None else f"team {team_id}"


def _values(ctx: Context, booking: TeamReservation, team: str) -> dict[str, str | int]:
    return {
        "id": booking.id or 0,
        "team": team,
        "gpus": booking.gpus,
        "gpu_type": booking.gpu_type,
        "starts": _local(ctx, booking.starts_at),
        "ends": _local(ctx, booking.ends_at),
        "reason": booking.reason,
    }


def _local(ctx: Context, moment: datetime) -> str:
    return local_time(moment, ctx.policy.zone)
