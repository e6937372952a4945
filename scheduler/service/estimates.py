"""Estimates, seen: how each person's recent runs compared with their estimates.

The figures are the planner's own (scheduler.snapshots.estimate_records): what people are
shown is what paika plans their jobs with. Everyone may see everyone's: estimates shape
everybody's ETAs on a shared queue.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scheduler.service.context import Context
from scheduler.service.lookup import team_by_name
from scheduler.snapshots import ESTIMATE_HISTORY, EstimateRecord, estimate_records
from storage.queries import org as org_queries


@dataclass(frozen=True)
class EstimateRow:
    """One person's record."""

    user: str
    record: EstimateRecord

    @property
    def overran_share(self) -> float:
        """The share of the counted runs that took longer than estimated."""
        return self.record.overran / self.record.runs if self.record.runs else 0.0


@dataclass(frozen=True)
class EstimatesReport:
    """`/gpu report estimates`: per person, furthest off first."""

    team: str | None
    rows: tuple[EstimateRow, ...]
    history: int = ESTIMATE_HISTORY  # the most recent runs counted per person


def own(ctx: Context, user_id: str | None = None) -> EstimateRecord | None:
    """The asker's (or `user_id`'s) record; None before any finished run."""
    user = user_id or ctx.actor.user_id
    return estimate_records(ctx.session, {user}).get(user)


def report(ctx: Context, team: str | None) -> EstimatesReport:
    """Every member's record (of one team, or all), the furthest from their estimates first."""
    found = team_by_name(ctx, team) if team is not None else None
    users = {
        member.slack_user_id
        for member in org_queries.members(session=ctx.session, team_id=found.id if found else None)
    }
    records = estimate_records(ctx.session, users)
    rows = sorted(
        (EstimateRow(user, record) for user, record in records.items()),
        key=lambda row: (-abs(math.log(max(row.record.median, 1e-9))), row.user),
    )
    return EstimatesReport(found.name if found else None, tuple(rows))
