"""A cheap fingerprint of everything the scheduling policy reads, to know when a result
computed from it (every waiting job's reason and ETA) can be reused."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlmodel import Session, col

from storage.models import (
    Allocation,
    Gpu,
    Host,
    HostState,
    Job,
    JobDependency,
    MaintenanceWindow,
    Quota,
    TeamReservation,
)
from storage.models.jobs import DependencyState


@dataclass(frozen=True)
class PlanningStamp:
    """`grows` only ever increases (every job write bumps a version, ids only grow), so a
    stamp whose `grows` is at least another's saw all of that one's job changes; `same`
    must be equal (GPU health, hosts, quotas change without touching a job)."""

    grows: tuple[int, int, int]
    same: tuple[object, ...]

    def covers(self, other: PlanningStamp) -> bool:
        """Whether a result computed at this stamp includes everything `other` saw."""
        return self.same == other.same and all(
            mine >= theirs for mine, theirs in zip(self.grows, other.grows, strict=True)
        )


def planning_stamp(*, session: Session) -> PlanningStamp:
    """The stamp of the state this session sees, in one round trip."""
    scalars = [
        select(func.count()).select_from(Job).scalar_subquery(),
        select(func.coalesce(func.sum(col(Job.version)), 0)).scalar_subquery(),
        select(func.coalesce(func.max(col(Allocation.id)), 0)).scalar_subquery(),
        select(func.count()).select_from(Host).scalar_subquery(),
        select(func.count()).select_from(Gpu).scalar_subquery(),
        select(func.count()).where(col(Gpu.healthy)).scalar_subquery(),
        select(func.coalesce(func.sum(col(Gpu.foreign_memory_gib)), 0)).scalar_subquery(),
        select(func.count()).where(col(Host.state) == HostState.DOWN).scalar_subquery(),
        select(func.count()).where(col(Host.draining)).scalar_subquery(),
        select(func.count()).where(col(Host.untrusted)).scalar_subquery(),
        select(func.count()).select_from(Quota).scalar_subquery(),
        select(func.coalesce(func.max(col(Quota.id)), 0)).scalar_subquery(),
        select(func.coalesce(func.sum(col(Quota.gpu_hours)), 0)).scalar_subquery(),
        select(func.max(col(Quota.expires_on))).scalar_subquery(),
        # Jobs waiting for other jobs: a dependency met, broken or released changes no job.
        select(func.count())
        .where(col(JobDependency.state) == DependencyState.WAITING)
        .scalar_subquery(),
        select(func.count())
        .where(col(JobDependency.state) == DependencyState.BROKEN)
        .scalar_subquery(),
        # Maintenance windows planned or cancelled (their edges pass with the clock: a quiet
        # pass is worked out again within REPLAN_EVERY anyway).
        select(func.coalesce(func.max(col(MaintenanceWindow.id)), 0)).scalar_subquery(),
        select(func.count()).where(col(MaintenanceWindow.cancelled_at).is_(None)).scalar_subquery(),
        # Cards booked for teams, booked or cancelled.
        select(func.coalesce(func.max(col(TeamReservation.id)), 0)).scalar_subquery(),
        select(func.count()).where(col(TeamReservation.cancelled_at).is_(None)).scalar_subquery(),
    ]
    row = session.execute(select(*scalars)).one()
    jobs, versions, allocations = (int(v) for v in row[:3])
    return PlanningStamp((jobs, versions, allocations), tuple(row[3:]))
