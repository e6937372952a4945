"""Quotas: what each team was granted, has used and has left, and until when."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from scheduler.errors import Action, NotFound, Problem, UserError
from scheduler.ledger import quota_use
from scheduler.policy.quota import QuotaState
from scheduler.results import SaidCode
from scheduler.service.context import Context
from scheduler.service.lookup import team_by_name, team_name
from scheduler.service.records import QuotaRecord
from storage.models import Quota
from storage.queries import accounting


@dataclass(frozen=True)
class QuotaView:
    """A quota with its team name, usage and days to expiry."""

    quota: QuotaRecord
    team: str
    state: QuotaState
    days_left: int


@dataclass(frozen=True)
class QuotaListing:
    """Quotas to show, with what to say when there are none (None: an answer about one
    quota, never empty)."""

    quotas: Sequence[QuotaView]
    empty: SaidCode | None = None


def show(ctx: Context, team: str | None) -> list[QuotaView]:
    """The quotas of the actor's team (admins: any team, or all)."""
    if team is not None:
        team_row = team_by_name(ctx, team)
        if not ctx.actor.in_team(team_row.id or 0):
            raise UserError(Problem.OTHER_TEAMS_QUOTAS, team=team_row.name)
        team_id: int | None = team_row.id
    elif ctx.actor.is_admin and ctx.actor.team_id is None:
        team_id = None
    else:
        team_id = ctx.require_team().id
    return _views(ctx, list(accounting.quotas(session=ctx.session, team_id=team_id)))


def add(
    ctx: Context,
    team: str,
    gpu_type: str | None,
    hours: float,
    expires: date,
    owner: str,
    note: str | None,
) -> QuotaView:
    """Grant a team GPU-hours on one type (or any) until a date."""
    ctx.require_admin(Action.GRANT_QUOTAS)
    team_row = team_by_name(ctx, team)
    canonical = _type(ctx, gpu_type)
    _not_past(ctx, expires)
    quota = Quota(
        team_id=team_row.id or 0,
        gpu_type=canonical,
        gpu_hours=hours,
        expires_on=expires,
        owner=owner,
        note=note,
        created_by=ctx.actor.user_id,
        created_at=ctx.now,
    )
    ctx.session.add(quota)
    ctx.session.flush()
    ctx.audit(
        "quota.add",
        "quota",
        quota.id,
        team=team_row.name,
        type=canonical,
        hours=hours,
        expires=str(expires),
    )
    return _views(ctx, [quota])[0]


def renew(ctx: Context, quota_id: int, expires: date, hours: float | None) -> QuotaView:
    """Move a quota's expiry (and optionally its total)."""
    ctx.require_admin(Action.RENEW_QUOTAS)
    quota = _get(ctx, quota_id)
    _not_past(ctx, expires)
    before = (str(quota.expires_on), quota.gpu_hours)
    quota.expires_on = expires
    if hours is not None:
        quota.gpu_hours = hours
    ctx.session.add(quota)
    ctx.audit(
        "quota.renew", "quota", quota_id, before=before, expires=str(expires), hours=quota.gpu_hours
    )
    return _views(ctx, [quota])[0]


def adjust(ctx: Context, quota_id: int, hours: float, reason: str) -> QuotaView:
    """Set a quota's total GPU-hours."""
    ctx.require_admin(Action.ADJUST_QUOTAS)
    quota = _get(ctx, quota_id)
    before = quota.gpu_hours
    quota.gpu_hours = hours
    ctx.session.add(quota)
    ctx.audit("quota.adjust", "quota", quota_id, before=before, after=hours, reason=reason)
    return _views(ctx, [quota])[0]


def listing(ctx: Context, team: str | None) -> list[QuotaView]:
    """Every quota (admins), optionally of one team."""
    ctx.require_admin(Action.LIST_ALL_QUOTAS)
    team_id = team_by_name(ctx, team).id if team else None
    return _views(ctx, list(accounting.quotas(session=ctx.session, team_id=team_id)))


def _views(ctx: Context, quotas: list[Quota]) -> list[QuotaView]:
    states = quota_use(ctx.session, quotas, ctx.now)
    today = ctx.now.date()
    return [
        QuotaView(QuotaRecord.of(q), team_name(ctx, q.team_id), state, (q.expires_on - today).days)
        for q, state in zip(quotas, states, strict=True)
    ]


def _get(ctx: Context, quota_id: int) -> Quota:
    quota = accounting.get_quota(session=ctx.session, quota_id=quota_id)
    if quota is None:
        raise NotFound(Problem.QUOTA_NOT_FOUND, quota_id=quota_id)
    return quota


def _type(ctx: Context, gpu_type: str | None) -> str | None:
    if gpu_type is None:
        return None
    known = ctx.policy.canonical_type(gpu_type)
    if known is None:
        raise UserError(
            Problem.UNKNOWN_QUOTA_GPU_TYPE, name=gpu_type, types=tuple(ctx.policy.gpu_types)
        )
    return known


def _not_past(ctx: Context, expires: date) -> None:
    if expires < ctx.now.date():
        later = ctx.now.date() + timedelta(days=90)
        raise UserError(Problem.EXPIRY_IN_PAST, expires=str(expires), example=str(later))
