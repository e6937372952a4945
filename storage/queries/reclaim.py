"""Idle GPUs: the samples that show a held GPU idle, and the GPU-hours spent idle."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func
from sqlmodel import Session, col, select

from storage.models import Gpu, GpuSample, Job, Team


def samples_of_gpus(
    *, session: Session, gpu_ids: Sequence[int], since: datetime
) -> Sequence[GpuSample]:
    """The samples of some GPUs since a moment, by GPU, oldest first (one query)."""
    if not gpu_ids:
        return []
    query = (
        select(GpuSample)
        .where(col(GpuSample.gpu_id).in_(gpu_ids), col(GpuSample.at) >= since)
        .order_by(col(GpuSample.gpu_id), col(GpuSample.at))
    )
    return session.exec(query).all()


def idle_gpu_hours(
    *,
    session: Session,
    start: datetime,
    end: datetime,
    below_pct: float,
    sample_seconds: float,
) -> dict[tuple[str, str], float]:
    """GPU-hours that jobs held GPUs below `below_pct` utilization in [start, end), by
    (team, GPU type).

    Each sample stands for the `sample_seconds` between two samples, so a stretch with no
    samples (a host that did not answer) counts as nothing rather than as idle.
    """
    held_idle = (
        select(col(Team.name), col(Gpu.gpu_type), func.count())
        .select_from(GpuSample)
        .join(Gpu, col(Gpu.id) == col(GpuSample.gpu_id))
        .join(Job, col(Job.id) == col(GpuSample.job_id))
        .join(Team, col(Team.id) == col(Job.team_id))
        .where(
            col(GpuSample.at) >= start,
            col(GpuSample.at) < end,
            col(GpuSample.utilization_pct) < below_pct,
        )
        .group_by(col(Team.name), col(Gpu.gpu_type))
    )
    return {
        (str(team), str(gpu_type)): int(count) * sample_seconds / 3600
        for team, gpu_type, count in session.exec(held_idle).all()
    }


def idle_samples(
    *, session: Session, gpu_id: int, start: datetime, end: datetime, below_pct: float
) -> int:
    """How many of one GPU's samples in [start, end) were below `below_pct` utilization."""
    query = select(func.count()).where(
        col(GpuSample.gpu_id) == gpu_id,
        col(GpuSample.at) >= start,
        col(GpuSample.at) < end,
        col(GpuSample.utilization_pct) < below_pct,
    )
    return int(session.exec(query).one())
