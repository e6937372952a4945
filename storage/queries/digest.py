"""What the daily digest reads beyond the board: GPU samples bucketed in time, idle GPU time
held by jobs, and the allocations of a window.

Samples are many (one per GPU per minute), so they are summed in SQL and only the sums
come back: per GPU and time bucket for the timeline, per GPU type and hour for the
utilization chart, per job and type for the idle GPU-hours.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Float, Integer, and_, case, func, or_
from sqlalchemy import select as select_columns
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.functions import FunctionElement
from sqlmodel import Session, col, select

from storage.models import Allocation, Gpu, GpuSample, Job, JobOutput, LedgerEntry, OutputKind


class _Bucket(FunctionElement[int]):
    """floor((seconds since the epoch of a UTC timestamp column − start) ÷ width).

    Each backend says "seconds since the epoch" its own way; timestamps are stored as
    naive UTC, so each reads them as UTC. Only rows at or after `start` are bucketed, so
    SQLite's truncating CAST is a floor there too (it may lack floor()).
    """

    type = Integer()
    inherit_cache = True
    name = "paika_bucket"


def _bucket(at: Any, start: float, width: float) -> ColumnElement[int]:
    return _Bucket(at, float(start), float(width))


def _args(element: _Bucket, compiler: SQLCompiler, **kw: Any) -> tuple[str, str, str]:
    at, start, width = (compiler.process(clause, **kw) for clause in element.clauses)
    return at, start, width


@compiles(_Bucket, "sqlite")
def _bucket_sqlite(element: _Bucket, compiler: SQLCompiler, **kw: Any) -> str:
    at, start, width = _args(element, compiler, **kw)
    # julianday's day fraction is off by microseconds; rounded to the millisecond, a sample
    # taken on a bucket's edge lands in that bucket, not the one before.
    seconds = f"ROUND((julianday({at}) - 2440587.5) * 86400.0, 3)"
    return f"CAST(({seconds} - {start}) / {width} AS INTEGER)"


@compiles(_Bucket, "postgresql")
def _bucket_postgresql(element: _Bucket, compiler: SQLCompiler, **kw: Any) -> str:
    at, start, width = _args(element, compiler, **kw)
    return f"CAST(FLOOR((EXTRACT(EPOCH FROM {at}) - {start}) / {width}) AS INTEGER)"


@compiles(_Bucket, "mysql")
def _bucket_mysql(element: _Bucket, compiler: SQLCompiler, **kw: Any) -> str:
    at, start, width = _args(element, compiler, **kw)
    # TIMESTAMPDIFF, unlike UNIX_TIMESTAMP, ignores the session's time zone.
    seconds = f"TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {at}) / 1000000.0"
    return f"CAST(FLOOR(({seconds} - {start}) / {width}) AS SIGNED)"


@dataclass(frozen=True)
class SampleBucket:
    """One GPU's samples in one time bucket, summed."""

    gpu_id: int
    bucket: int  # 0 is the bucket starting at the window's start
    samples: int  # polls that answered for this GPU
    readings: int  # of those, with a utilization reading
    idle: int  # readings below the idle threshold
    utilization_sum: float  # of the readings


def sample_buckets(
    *,
    session: Session,
    start: datetime,
    end: datetime,
    width_seconds: float,
    idle_below_pct: float,
    gpu_ids: Collection[int],
) -> list[SampleBucket]:
    """The samples of `gpu_ids` in [start, end) summed per GPU and `width_seconds` bucket."""
    if not gpu_ids:
        return []
    util = col(GpuSample.utilization_pct)
    # Bucketed in a subquery and grouped outside it: PostgreSQL will not match a GROUP BY
    # expression to the same expression in the SELECT when each carries its own parameters.
    inner = (
        select(
            col(GpuSample.gpu_id).label("gpu_id"),
            _bucket(col(GpuSample.at), start.timestamp(), width_seconds).label("bucket"),
            util.label("util"),
        )
        .where(
            col(GpuSample.at) >= start,
            col(GpuSample.at) < end,
            col(GpuSample.gpu_id).in_(list(gpu_ids)),
        )
        .subquery()
    )
    # sqlalchemy's own select: sqlmodel's types stop at four columns.
    query = select_columns(
        inner.c.gpu_id,
        inner.c.bucket,
        func.count(),
        func.count(inner.c.util),
        func.sum(case((inner.c.util < idle_below_pct, 1), else_=0)),
        func.coalesce(func.sum(inner.c.util), 0.0),
    ).group_by(inner.c.gpu_id, inner.c.bucket)
    return [
        SampleBucket(int(gpu), int(bucket), int(n), int(readings), int(idle or 0), float(total))
        for gpu, bucket, n, readings, idle, total in session.execute(query).all()
    ]


def utilization_by_type(
    *, session: Session, start: datetime, end: datetime, width_seconds: float
) -> list[tuple[str, int, float]]:
    """Mean utilization per GPU type and `width_seconds` bucket in [start, end), over every GPU."""
    inner = (
        select(
            col(Gpu.gpu_type).label("gpu_type"),
            _bucket(col(GpuSample.at), start.timestamp(), width_seconds).label("bucket"),
            col(GpuSample.utilization_pct).label("util"),
        )
        .join(Gpu, col(Gpu.id) == col(GpuSample.gpu_id))
        .where(
            col(GpuSample.at) >= start,
            col(GpuSample.at) < end,
            col(GpuSample.utilization_pct).is_not(None),
        )
        .subquery()
    )
    query = select(
        inner.c.gpu_type, inner.c.bucket, func.avg(inner.c.util, type_=Float())
    ).group_by(inner.c.gpu_type, inner.c.bucket)
    return [
        (str(gpu_type), int(bucket), float(mean))
        for gpu_type, bucket, mean in session.execute(query).all()
        if mean is not None
    ]


def allocations_between(
    *, session: Session, start: datetime, end: datetime, gpu_ids: Collection[int]
) -> Sequence[tuple[Allocation, str]]:
    """Allocations of `gpu_ids` that overlap [start, end), each with its job's name."""
    if not gpu_ids:
        return []
    query = (
        select(Allocation, col(Job.name))
        .join(Job, col(Job.id) == col(Allocation.job_id))
        .where(
            col(Allocation.gpu_id).in_(list(gpu_ids)),
            col(Allocation.started_at) < end,
            or_(col(Allocation.ended_at).is_(None), col(Allocation.ended_at) > start),
        )
        .order_by(col(Allocation.started_at), col(Allocation.id))
    )
    return [(allocation, str(name)) for allocation, name in session.exec(query).all()]


def jobs_by_id(*, session: Session, job_ids: Collection[int]) -> dict[int, Job]:
    """Jobs by id, in one query."""
    if not job_ids:
        return {}
    query = select(Job).where(col(Job.id).in_(list(job_ids)))
    return {job.id or 0: job for job in session.exec(query).all()}


def jobs_ended_between(
    *, session: Session, start: datetime, end: datetime, states: Collection[str]
) -> Sequence[Job]:
    """Jobs that ended in [start, end) in one of `states`, by id."""
    query = (
        select(Job)
        .where(
            col(Job.ended_at) >= start,
            col(Job.ended_at) < end,
            col(Job.state).in_(list(states)),
        )
        .order_by(col(Job.id))
    )
    return session.exec(query).all()


def metric_outputs(
    *, session: Session, start: datetime, end: datetime, job_ids: Collection[int]
) -> Sequence[tuple[int, str, float]]:
    """(job id, name, value) of every metric reported in [start, end), and of every metric
    the jobs `job_ids` ever reported (a run that finished reported most of them earlier)."""
    reported = and_(col(JobOutput.at) >= start, col(JobOutput.at) < end)
    which = or_(reported, col(JobOutput.job_id).in_(list(job_ids))) if job_ids else reported
    query = (
        select_columns(col(JobOutput.job_id), col(JobOutput.name), col(JobOutput.value))
        .where(
            col(JobOutput.kind) == OutputKind.METRIC,
            col(JobOutput.value).is_not(None),
            which,
        )
        .order_by(col(JobOutput.id))
    )
    return [(int(j), str(n), float(v)) for j, n, v in session.execute(query).all()]


def spend_by_job(*, session: Session, job_ids: Collection[int]) -> dict[int, tuple[float, float]]:
    """GPU-hours and cost charged to each of `job_ids` over all its runs (one query)."""
    if not job_ids:
        return {}
    query = (
        select_columns(
            col(LedgerEntry.job_id), func.sum(LedgerEntry.gpu_hours), func.sum(LedgerEntry.cost)
        )
        .where(col(LedgerEntry.job_id).in_(list(job_ids)))
        .group_by(col(LedgerEntry.job_id))
    )
    return {
        int(job_id): (float(hours or 0.0), float(cost or 0.0))
        for job_id, hours, cost in session.execute(query).all()
    }
