"""Hosts, GPUs and allocations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, case, delete, func, null, or_, union_all, update
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from storage.models import Allocation, Gpu, GpuSample, Host, Job
from storage.models.cluster import WHOLE_CARD
from storage.queries.accounting import ANY_JOB, JobFilter


def host_by_name(*, session: Session, name: str) -> Host | None:
    """The host called `name` (case-insensitive), if any."""
    return session.exec(select(Host).where(func.lower(Host.name) == name.lower())).first()


def all_hosts(*, session: Session) -> Sequence[Host]:
    """Every host, by name."""
    return session.exec(select(Host).order_by(col(Host.name))).all()


def host_rows(*, session: Session) -> Sequence[Row[Any]]:
    """What a cycle reads of every host, as plain rows, by name (no ORM objects to build)."""
    query = sa_select(
        col(Host.id),
        col(Host.name),
        col(Host.url),
        col(Host.state),
        col(Host.draining),
        col(Host.failed_polls),
        col(Host.agent_version),
        col(Host.last_error),
        col(Host.untrusted),
        col(Host.token_generation),
        col(Host.token_salt),
        col(Host.token_sha256),
        col(Host.token_revoked_at),
        col(Host.token_revocation_sent_at),
    ).order_by(col(Host.name))
    return session.execute(query).all()


def revocation_sent(
    *, session: Session, host_id: int, revoked_at: datetime, generation: int, at: datetime
) -> bool:
    """Record that a host's agent refuses its revoked token now; only if the host's token is
    still that revoked one (a rotation in between made the revocation moot)."""
    changed = session.execute(
        update(Host)
        .where(
            col(Host.id) == host_id,
            col(Host.token_revoked_at) == revoked_at,
            col(Host.token_generation) == generation,
        )
        .values(token_revocation_sent_at=at)
    )
    return bool(changed.rowcount)  # type: ignore[attr-defined]


def gpus_of_host(*, session: Session, host_id: int) -> Sequence[Gpu]:
    """A host's GPUs, by index."""
    return session.exec(select(Gpu).where(Gpu.host_id == host_id).order_by(col(Gpu.index))).all()


def open_allocations(*, session: Session, job_id: int | None = None) -> Sequence[Allocation]:
    """Allocations not yet ended (of one job, or all)."""
    query = select(Allocation).where(col(Allocation.ended_at).is_(None))
    if job_id is not None:
        query = query.where(Allocation.job_id == job_id)
    return session.exec(query.order_by(col(Allocation.id))).all()


def holder_ids(*, session: Session) -> dict[int, int]:
    """GPU id → the id of the job holding it, from the open allocations (one light query)."""
    query = sa_select(col(Allocation.gpu_id), col(Allocation.job_id)).where(
        col(Allocation.ended_at).is_(None)
    )
    return {gpu_id: job_id for gpu_id, job_id in session.execute(query)}


def open_parts(*, session: Session) -> list[tuple[int, int, int]]:
    """Every open allocation as (gpu_id, job_id, share_milli), by GPU then job: a shared card
    has one row per job on it (one light query)."""
    query = (
        sa_select(col(Allocation.gpu_id), col(Allocation.job_id), col(Allocation.share_milli))
        .where(col(Allocation.ended_at).is_(None))
        .order_by(col(Allocation.gpu_id), col(Allocation.job_id))
    )
    return [(gpu, job, milli) for gpu, job, milli in session.execute(query)]


def planning_gpus(*, session: Session) -> Sequence[Row[Any]]:
    """What the policy reads of every GPU, as plain rows."""
    query = sa_select(
        col(Gpu.id),
        col(Gpu.host_id),
        col(Gpu.index),
        col(Gpu.gpu_type),
        col(Gpu.memory_gib),
        col(Gpu.healthy),
        col(Gpu.foreign_memory_gib),
    )
    return session.execute(query).all()


class OverBooked(IntegrityError):
    """A card's part was asked for that it no longer has: another allocation took it first."""

    def __init__(self, gpu_id: int, share_milli: int) -> None:
        super().__init__(
            f"GPU {gpu_id} has no {share_milli}/{WHOLE_CARD} of its card left", None, Exception()
        )


def open_allocation(
    *, session: Session, job_id: int, gpu_id: int, at: datetime, share_milli: int = WHOLE_CARD
) -> Allocation:
    """Give `job_id` a part of GPU `gpu_id` (the whole card by default) from `at`.

    The part is booked on the card's row first, by one conditional update: of two
    transactions racing for the same card the second waits for the first and then finds the
    card full (the check on `booked_milli` refuses it too). Raises OverBooked (an
    IntegrityError, as the unique index raised before cards were shared) when the part is gone.
    """
    booked = session.execute(
        update(Gpu)
        .where(col(Gpu.id) == gpu_id, col(Gpu.booked_milli) + share_milli <= WHOLE_CARD)
        .values(booked_milli=col(Gpu.booked_milli) + share_milli)
        .execution_options(synchronize_session=False)
    )
    if not booked.rowcount:  # type: ignore[attr-defined]
        raise OverBooked(gpu_id, share_milli)
    allocation = Allocation(
        job_id=job_id, gpu_id=gpu_id, active_gpu_id=gpu_id, share_milli=share_milli, started_at=at
    )
    session.add(allocation)
    return allocation


def end_allocation(*, session: Session, allocation: Allocation, at: datetime) -> None:
    """End an open allocation at `at` (never before it began) and free its part of the card.
    An allocation already ended is left as it is."""
    if allocation.ended_at is not None:
        return
    allocation.ended_at = max(allocation.started_at, at)
    allocation.active_gpu_id = None
    session.add(allocation)
    left = col(Gpu.booked_milli) - allocation.share_milli
    session.execute(
        update(Gpu)
        .where(col(Gpu.id) == allocation.gpu_id)
        # Never below nothing: a release never fails for a count that went astray.
        .values(booked_milli=case((left < 0, 0), else_=left))
        .execution_options(synchronize_session=False)
    )


def drop_allocation(*, session: Session, allocation: Allocation) -> None:
    """Delete an allocation that never ran (its start never reached its host: no GPU time to
    charge) and free its part of the card when it was open."""
    if allocation.ended_at is None:
        end_allocation(session=session, allocation=allocation, at=allocation.started_at)
    session.delete(allocation)


def rebook_cards(*, session: Session) -> None:
    """Set every card's booked part to its open allocations' sum: after a restore writes
    allocations as rows (a snapshot keeps each one's part, not the cards' sums)."""
    held = (
        sa_select(func.coalesce(func.sum(col(Allocation.share_milli)), 0))
        .where(col(Allocation.gpu_id) == col(Gpu.id), col(Allocation.ended_at).is_(None))
        .scalar_subquery()
    )
    session.execute(
        update(Gpu).values(booked_milli=held).execution_options(synchronize_session=False)
    )


def overbooked_gpus(*, session: Session) -> Sequence[Row[Any]]:
    """GPUs whose open allocations add up to more than the card (GPU id, thousandths booked),
    or whose booked part disagrees with them: none should exist (the database refuses the
    first; opening and ending allocations only through this module prevents the second), and
    the audits of tests and benchmarks check it."""
    held = (
        sa_select(
            col(Allocation.gpu_id).label("gpu_id"),
            func.sum(col(Allocation.share_milli)).label("milli"),
        )
        .where(col(Allocation.ended_at).is_(None))
        .group_by(col(Allocation.gpu_id))
        .subquery()
    )
    milli = func.coalesce(held.c.milli, 0)
    query = (
        sa_select(col(Gpu.id), milli)
        .select_from(Gpu)
        .outerjoin(held, held.c.gpu_id == col(Gpu.id))
        .where((milli > WHOLE_CARD) | (milli != col(Gpu.booked_milli)))
    )
    return session.execute(query).all()


def allocations_of_host(*, session: Session, host_id: int) -> Sequence[Allocation]:
    """Every allocation, open or ended, on one host's GPUs."""
    query = (
        select(Allocation)
        .join(Gpu, col(Gpu.id) == col(Allocation.gpu_id))
        .where(Gpu.host_id == host_id)
    )
    return session.exec(query).all()


def jobs_on_host(*, session: Session, host_name: str) -> Sequence[Job]:
    """The jobs holding cards of a host now (open allocations), by id."""
    query = (
        select(Job)
        .where(
            col(Job.id).in_(
                select(Allocation.job_id)
                .join(Gpu, col(Gpu.id) == col(Allocation.gpu_id))
                .join(Host, col(Host.id) == col(Gpu.host_id))
                .where(Host.name == host_name)
                .where(col(Allocation.ended_at).is_(None))
            )
        )
        .order_by(col(Job.id))
    )
    return session.exec(query).all()


def schedulable_gpu_count(*, session: Session) -> int:
    """Healthy GPUs on hosts that are not draining or down."""
    query = (
        select(func.count())
        .select_from(Gpu)
        .join(Host, col(Host.id) == col(Gpu.host_id))
        .where(col(Gpu.healthy).is_(True), col(Host.draining).is_(False), col(Host.state) != "down")
    )
    return int(session.exec(query).one())


def delete_samples_before(*, session: Session, cutoff: datetime) -> int:
    """Delete GPU samples older than `cutoff`."""
    result = session.execute(delete(GpuSample).where(col(GpuSample.at) < cutoff))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def delete_samples_of_gpus(*, session: Session, gpu_ids: Sequence[int]) -> int:
    """Delete every sample of these GPUs (their host is being removed)."""
    if not gpu_ids:
        return 0
    result = session.execute(delete(GpuSample).where(col(GpuSample.gpu_id).in_(list(gpu_ids))))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def samples_of_gpu(*, session: Session, gpu_id: int, since: datetime) -> Sequence[GpuSample]:
    """One GPU's samples since a moment, oldest first."""
    query = (
        select(GpuSample)
        .where(GpuSample.gpu_id == gpu_id, col(GpuSample.at) >= since)
        .order_by(col(GpuSample.at))
    )
    return session.exec(query).all()


# The columns a poll report may change, read as plain rows to compare against the report.
READING_COLUMNS = (
    "uuid",
    "name",
    "gpu_type",
    "memory_gib",
    "healthy",
    "utilization_pct",
    "memory_used_gib",
    "foreign_memory_gib",
)


def reading_gpus(*, session: Session) -> Sequence[Row[Any]]:
    """Every GPU's id, host, index and the columns a poll report may change, as plain rows."""
    # `index` is labelled: a row is a tuple, whose `index` method would shadow it for typing.
    columns = [col(Gpu.id), col(Gpu.host_id), col(Gpu.index).label("position")]
    columns += [getattr(Gpu, name) for name in READING_COLUMNS]
    return session.execute(sa_select(*columns)).all()


def update_by_id(
    *, session: Session, model: type[Host] | type[Gpu], changes: Sequence[dict[str, Any]]
) -> None:
    """Bulk UPDATE by primary key: each dict holds `id` and the columns that change."""
    if changes:
        session.execute(update(model), list(changes))


def gpu_by_id(*, session: Session, gpu_id: int) -> Gpu | None:
    """The GPU with this id."""
    return session.get(Gpu, gpu_id)


def all_gpus(*, session: Session) -> Sequence[Gpu]:
    """Every GPU of every host."""
    return session.exec(select(Gpu)).all()


def gpu_hosts(*, session: Session) -> Sequence[tuple[int, int]]:
    """(GPU id, host id) of every GPU, without loading whole rows."""
    rows = session.execute(select(col(Gpu.id), col(Gpu.host_id))).all()
    return [(int(gpu_id), int(host_id)) for gpu_id, host_id in rows]


def open_allocations_between(
    *, session: Session, end: datetime, team_id: int | None = None
) -> Sequence[tuple[Allocation, str, Job]]:
    """Open allocations begun before `end`, each with its GPU's type and its job (one query)."""
    query = (
        select(Allocation, col(Gpu.gpu_type), Job)
        .join(Gpu, col(Gpu.id) == col(Allocation.gpu_id))
        .join(Job, col(Job.id) == col(Allocation.job_id))
        .where(col(Allocation.ended_at).is_(None), col(Allocation.started_at) < end)
        .order_by(col(Allocation.id))
    )
    if team_id is not None:
        query = query.where(Job.team_id == team_id)
    return [(allocation, str(gpu_type), job) for allocation, gpu_type, job in session.exec(query)]


@dataclass(frozen=True, slots=True)
class OpenCharge:
    """An allocation still open, as the ledger's reports count it: whose, on which type,
    since when."""

    job_id: int
    gpu_type: str
    started_at: datetime
    share_milli: int = WHOLE_CARD  # the part of its card it holds (a shared card: less)

    @property
    def part(self) -> float:
        """Its share of the card: what each of its hours is charged as."""
        return self.share_milli / WHOLE_CARD


def open_charges_between(
    *, session: Session, end: datetime, jobs: JobFilter = ANY_JOB
) -> list[OpenCharge]:
    """Open allocations of these jobs begun before `end`, oldest first, as plain rows (the
    ledger's reports)."""
    query = sa_select(
        col(Allocation.job_id),
        col(Gpu.gpu_type),
        col(Allocation.started_at),
        col(Allocation.share_milli),
    )
    query = _open_before(query.join(Gpu, col(Gpu.id) == col(Allocation.gpu_id)), end, jobs)
    return [
        OpenCharge(*row)
        for row in session.connection().execute(query.order_by(col(Allocation.id))).all()
    ]


def open_job_ids(*, end: datetime, jobs: JobFilter = ANY_JOB) -> Any:
    """A subquery: the ids of these jobs with an allocation open and begun before `end`."""
    return _open_before(sa_select(col(Allocation.job_id)), end, jobs)


def _open_before(query: Any, end: datetime, jobs: JobFilter) -> Any:
    query = query.where(col(Allocation.ended_at).is_(None), col(Allocation.started_at) < end)
    if jobs.team_id is not None or jobs.by_job:
        query = jobs.on_jobs(query.join(Job, col(Job.id) == col(Allocation.job_id)))
    return query


def last_run_cards(*, session: Session, job_id: int) -> list[tuple[str, str, int]]:
    """The cards of a job's latest run: (host, GPU type, how many), by host id then type."""
    latest = (
        sa_select(func.max(col(Allocation.started_at)))
        .where(col(Allocation.job_id) == job_id)
        .scalar_subquery()
    )
    query = (
        sa_select(col(Host.name), col(Gpu.gpu_type), func.count())
        .join(Gpu, col(Gpu.host_id) == col(Host.id))
        .join(Allocation, col(Allocation.gpu_id) == col(Gpu.id))
        .where(col(Allocation.job_id) == job_id, col(Allocation.started_at) == latest)
        .group_by(col(Host.id), col(Host.name), col(Gpu.gpu_type))
        .order_by(col(Host.id), col(Gpu.gpu_type))
    )
    return [(name, kind, int(n)) for name, kind, n in session.execute(query).all()]


def last_run_hosts(*, session: Session, job_id: int) -> Sequence[Host]:
    """The hosts of a job's latest run (its allocations begun last, open or ended), by host
    id: the order in which the run's start gave them their node ranks."""
    latest = (
        sa_select(func.max(col(Allocation.started_at)))
        .where(col(Allocation.job_id) == job_id)
        .scalar_subquery()
    )
    query = (
        select(Host)
        .join(Gpu, col(Gpu.host_id) == col(Host.id))
        .join(Allocation, col(Allocation.gpu_id) == col(Gpu.id))
        .where(col(Allocation.job_id) == job_id, col(Allocation.started_at) == latest)
        .distinct()
        .order_by(col(Host.id))
    )
    return session.exec(query).all()


@dataclass(frozen=True, slots=True)
class CardTenant:
    """A job on a held card and its part of it: the card's one job (the whole card), or one
    of a shared card's jobs."""

    job: Job
    share_milli: int = WHOLE_CARD

    @property
    def shares(self) -> bool:
        """Whether it holds part of the card, beside whoever else the card takes."""
        return self.share_milli < WHOLE_CARD


def card_tenants(*, session: Session) -> dict[int, tuple[CardTenant, ...]]:
    """Every job on each held GPU with its part of the card, by GPU id, each card's jobs by
    job id (one query)."""
    query = (
        select(col(Allocation.gpu_id), col(Allocation.share_milli), Job)
        .join(Job, col(Job.id) == col(Allocation.job_id))
        .where(col(Allocation.ended_at).is_(None))
        .order_by(col(Allocation.gpu_id), col(Allocation.job_id))
    )
    found: dict[int, list[CardTenant]] = {}
    for gpu_id, milli, job in session.exec(query).all():
        found.setdefault(int(gpu_id), []).append(CardTenant(job, int(milli)))
    return {gpu_id: tuple(tenants) for gpu_id, tenants in found.items()}


def _held_idle_samples(start: datetime, end: datetime, below_pct: float) -> Any:
    """Samples in [start, end) below `below_pct` joined to the allocation (open, or ended
    after the sample) of each job holding the card then: a shared card's sample once per
    job on it."""
    return (
        sa_select()
        .select_from(GpuSample)
        .join(Gpu, col(Gpu.id) == col(GpuSample.gpu_id))
        .join(
            Allocation,
            and_(
                col(Allocation.gpu_id) == col(GpuSample.gpu_id),
                col(Allocation.started_at) <= col(GpuSample.at),
                or_(
                    col(Allocation.ended_at).is_(None), col(Allocation.ended_at) > col(GpuSample.at)
                ),
            ),
        )
        .where(
            col(GpuSample.at) >= start,
            col(GpuSample.at) < end,
            col(GpuSample.utilization_pct) < below_pct,
        )
    )


@dataclass(frozen=True)
class IdleHeld:
    """Idle samples of held cards over a stretch of time."""

    # (job id, GPU type, share_milli, samples) per job, type and part, by job: a shared
    # card's idle sample counts for each job on it, each for its part.
    parts: list[tuple[int, str, int, int]]
    # Per GPU type, the idle samples of shared cards, each once however many jobs were on it.
    shared_cards: dict[str, int]


def idle_held_between(
    *, session: Session, start: datetime, end: datetime, below_pct: float
) -> IdleHeld:
    """The samples in [start, end) below `below_pct` on held cards, per job and part, and
    those of shared cards once per card (one query)."""
    parts = (
        _held_idle_samples(start, end, below_pct)
        .add_columns(
            col(Allocation.job_id).label("job_id"),
            col(Gpu.gpu_type).label("gpu_type"),
            col(Allocation.share_milli).label("milli"),
            func.count().label("n"),
        )
        .group_by(col(Allocation.job_id), col(Gpu.gpu_type), col(Allocation.share_milli))
    )
    cards = (
        _held_idle_samples(start, end, below_pct)
        .add_columns(
            null().label("job_id"),
            col(Gpu.gpu_type).label("gpu_type"),
            null().label("milli"),
            func.count(func.distinct(col(GpuSample.id))).label("n"),
        )
        .where(col(Allocation.share_milli) < WHOLE_CARD)
        .group_by(col(Gpu.gpu_type))
    )
    found = IdleHeld([], {})
    for job, kind, milli, n in session.execute(union_all(parts, cards)).all():
        if job is None:
            found.shared_cards[str(kind)] = int(n)
        else:
            found.parts.append((int(job), str(kind), int(milli), int(n)))
    found.parts.sort()
    return found
