"""What a queue-and-cluster snapshot reads: every table it keeps, as plain rows, one query
each (a snapshot of 10,000 jobs is built in a few tens of milliseconds, so no ORM objects).

The columns are named here, table by table: they are what a restore writes back
(storage/queries/restore.py). Hosts leave out every token column but the revocation
(no token material leaves the database; a revoked host must stay unused after a restore),
and the readings that change at every poll (utilization, memory in use, failed polls).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Column, Table, func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from storage.models import (
    ACTIVE_STATES,
    Allocation,
    Gpu,
    Host,
    Job,
    LedgerEntry,
    Member,
    Quota,
    Team,
    Template,
    UnixAccount,
)

Row = Mapping[str, Any]


def _table(model: Any) -> Table:
    table: Table = model.__table__
    return table


def _columns(model: Any, names: Sequence[str]) -> list[Column[Any]]:
    table = _table(model)
    return [table.c[name] for name in names]


# Per table, the columns a snapshot keeps (and a restore writes back), in the order written.
TEAM = ("id", "name", "channel", "created_at")
MEMBER = ("id", "slack_user_id", "team_id", "role", "created_at")
ACCOUNT = ("id", "subject_kind", "subject", "account", "set_by", "set_at")
QUOTA = (
    "id",
    "team_id",
    "gpu_type",
    "gpu_hours",
    "expires_on",
    "owner",
    "note",
    "created_by",
    "created_at",
)
TEMPLATE = ("id", "team_id", "name", "fields", "version", "created_by", "created_at", "updated_at")
HOST = (
    "id",
    "name",
    "url",
    "state",
    "draining",
    "added_at",
    "last_seen_at",
    "state_since",
    "agent_version",
    "untrusted",
    "token_revoked_at",
)
GPU = ("id", "host_id", "index", "uuid", "name", "gpu_type", "memory_gib", "healthy",
       "foreign_memory_gib")  # fmt: skip
# Every column of a job but its optimistic-locking version (a restored row starts at 0).
JOB = tuple(c.name for c in _table(Job).columns if c.name != "version")
ALLOCATION = ("id", "job_id", "gpu_id", "started_at")


def _rows(session: Session, model: Any, names: Sequence[str], *order: Any) -> list[Row]:
    query = sa_select(*_columns(model, names)).order_by(*order)
    return [dict(row) for row in session.execute(query).mappings()]


def teams(*, session: Session) -> list[Row]:
    return _rows(session, Team, TEAM, col(Team.id))


def members(*, session: Session) -> list[Row]:
    return _rows(session, Member, MEMBER, col(Member.id))


def accounts(*, session: Session) -> list[Row]:
    return _rows(session, UnixAccount, ACCOUNT, col(UnixAccount.id))


def quotas(*, session: Session) -> list[Row]:
    """Every quota with the GPU-hours used of it so far (`used_hours`: charged in the ledger,
    and carried over by a restore), in one query."""
    used = (
        sa_select(col(LedgerEntry.quota_id), func.sum(col(LedgerEntry.gpu_hours)).label("used"))
        .where(col(LedgerEntry.quota_id).is_not(None))
        .group_by(col(LedgerEntry.quota_id))
        .subquery()
    )
    query = (
        sa_select(
            *_columns(Quota, QUOTA),
            (func.coalesce(used.c.used, 0.0) + col(Quota.carried_hours)).label("used_hours"),
        )
        .outerjoin(used, used.c.quota_id == col(Quota.id))
        .order_by(col(Quota.id))
    )
    return [dict(row) for row in session.execute(query).mappings()]


def templates(*, session: Session) -> list[Row]:
    return _rows(session, Template, TEMPLATE, col(Template.id))


def hosts(*, session: Session) -> list[Row]:
    return _rows(session, Host, HOST, col(Host.id))


def gpus(*, session: Session) -> list[Row]:
    return _rows(session, Gpu, GPU, col(Gpu.id))


def active_jobs(*, session: Session) -> list[Row]:
    """Every job not yet ended, every column, by id."""
    query = (
        sa_select(*_columns(Job, JOB))
        .where(col(Job.state).in_(ACTIVE_STATES))
        .order_by(col(Job.id))
    )
    return [dict(row) for row in session.execute(query).mappings()]


def open_allocations(*, session: Session) -> list[Row]:
    """Allocations still open of jobs not yet ended (a job holding a GPU now), by id."""
    query = (
        sa_select(*_columns(Allocation, ALLOCATION))
        .join(Job, col(Job.id) == col(Allocation.job_id))
        .where(col(Allocation.ended_at).is_(None), col(Job.state).in_(ACTIVE_STATES))
        .order_by(col(Allocation.id))
    )
    return [dict(row) for row in session.execute(query).mappings()]
