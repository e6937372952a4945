"""What a queue-and-cluster snapshot reads: every table it keeps, as plain rows, one query
each (a snapshot of 10,000 jobs is built in a few tens of milliseconds, so no ORM objects).

The columns are named here, table by table: they are what a restore writes back
(storage/queries/restore.py). Hosts leave out every token column but the revocation
(no token material leaves the database; a revoked host must stay unused after a restore),
and the readings that change at every poll (utilization, memory in use, failed polls).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import JSON, Boolean, Column, Date, String, Table, Text, cast, func
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
from storage.models.cluster import MaintenanceWindow, ShareApart, TeamReservation
from storage.models.jobs import DependencyState, JobDependency
from storage.types import UTCDateTime

UNMET_DEPENDENCIES = (DependencyState.WAITING, DependencyState.BROKEN)


def table_of(model: Any) -> Table:
    """A model's table (SQLModel declares `__table__` without its type)."""
    table: Table = model.__table__
    return table


def _columns(model: Any, names: Sequence[str]) -> list[Column[Any]]:
    table = table_of(model)
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
    "state_since",
    "agent_version",
    "untrusted",
    "token_revoked_at",
)
GPU = ("id", "host_id", "index", "uuid", "name", "gpu_type", "memory_gib", "healthy",
       "foreign_memory_gib")  # fmt: skip
# Every column of a job but its optimistic-locking version (a restored row starts at 0).
# A run's report token is kept as its SHA-256 only (`token_digest`): whoever reads the object
# store cannot report for a running job, and a restored run's reports are still taken.
JOB = tuple(c.name for c in table_of(Job).columns if c.name != "version")
TOKEN_DIGEST_LENGTH = 64  # hex digits of a SHA-256; a run's own token is 43 characters


def token_digest(token: str) -> str:
    """What a snapshot keeps of a run's report token: its SHA-256 in hex (a digest already
    is kept as it is: a database restored from a snapshot holds digests)."""
    if is_token_digest(token):
        return token
    return hashlib.sha256(token.encode()).hexdigest()


def is_token_digest(value: str) -> bool:
    """Whether a stored report token is a digest (restored from a snapshot), not a token."""
    return len(value) == TOKEN_DIGEST_LENGTH and all(c in "0123456789abcdef" for c in value)


ALLOCATION = ("id", "job_id", "gpu_id", "share_milli", "started_at")


@dataclass(frozen=True)
class Rows:
    """One table's rows as lists, in `columns` order: times as text (UTC, ISO 8601 without a
    zone, as the database keeps them) and JSON columns as their values."""

    columns: tuple[str, ...]
    rows: list[list[Any]]


def _read(session: Session, query: Any, columns: Sequence[Column[Any]]) -> Rows:
    """Run `query` over `columns` on the connection (no ORM), times and JSON fetched as text.

    Thousands of rows are read each time a snapshot is taken: parsing each time into a
    datetime only to write it out again, and each JSON value on its own, would cost more
    than the query. Every JSON column is parsed with one call instead."""
    selected: list[Any] = []
    times, documents = [], []
    for index, column in enumerate(columns):
        if isinstance(column.type, UTCDateTime):
            times.append(index)
            selected.append(cast(column, String).label(column.name))
        elif isinstance(column.type, Date):  # ISO 8601 days on every backend
            selected.append(cast(column, String).label(column.name))
        elif isinstance(column.type, JSON):
            documents.append(index)
            selected.append(cast(column, Text).label(column.name))
        else:
            selected.append(column)
    rows = _fetch(session, query.with_only_columns(*selected))
    for index, column in enumerate(columns):
        if isinstance(column.type, Boolean):  # SQLite and MySQL answer 0 and 1
            for row in rows:
                if row[index] is not None:
                    row[index] = bool(row[index])
    for index in times:
        for row in rows:
            if row[index] is not None:
                row[index] = _iso(row[index])
    for index in documents:
        values = orjson.loads("[" + ",".join(row[index] or "null" for row in rows) + "]")
        for row, value in zip(rows, values, strict=True):
            row[index] = value
    return Rows(tuple(column.name for column in columns), rows)


def _fetch(session: Session, query: Any) -> list[list[Any]]:
    """The query's rows as lists, straight from the driver's cursor: SQLAlchemy's own rows
    cost three times the fetch at 10,000 jobs, and every column here is plain (text,
    numbers, flags) once times and JSON are cast to text."""
    connection = session.connection()
    dialect = connection.dialect
    compiled = query.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        if dialect.positional:
            cursor.execute(
                compiled.string, tuple(params[name] for name in compiled.positiontup or ())
            )
        else:
            cursor.execute(compiled.string, params)
        return [list(row) for row in cursor.fetchall()]
    finally:
        cursor.close()


def _iso(text: str) -> str:
    """A time as the database casts it to text, in ISO 8601 with a T and no zero fraction
    (PostgreSQL writes a space and no fraction, MySQL and SQLite a space and six digits)."""
    if text.endswith(".000000"):
        text = text[:-7]
    return text if text[10:11] == "T" else text[:10] + "T" + text[11:]


def _all(session: Session, model: Any, names: Sequence[str]) -> Rows:
    columns = _columns(model, names)
    return _read(session, sa_select(*columns).order_by(table_of(model).c.id), columns)


def teams(*, session: Session) -> Rows:
    return _all(session, Team, TEAM)


def members(*, session: Session) -> Rows:
    return _all(session, Member, MEMBER)


def accounts(*, session: Session) -> Rows:
    return _all(session, UnixAccount, ACCOUNT)


def quotas(*, session: Session) -> Rows:
    """Every quota with the GPU-hours used of it so far (`used_hours`: charged in the ledger,
    and carried over by a restore), in one query."""
    used = (
        sa_select(col(LedgerEntry.quota_id), func.sum(col(LedgerEntry.gpu_hours)).label("used"))
        .where(col(LedgerEntry.quota_id).is_not(None))
        .group_by(col(LedgerEntry.quota_id))
        .subquery()
    )
    columns = _columns(Quota, QUOTA)
    total = (func.coalesce(used.c.used, 0.0) + col(Quota.carried_hours)).label("used_hours")
    query = (
        sa_select(*columns, total)
        .outerjoin(used, used.c.quota_id == col(Quota.id))
        .order_by(col(Quota.id))
    )
    found = _read(session, query, [*columns, total])  # type: ignore[list-item]
    return found


def templates(*, session: Session) -> Rows:
    return _all(session, Template, TEMPLATE)


def hosts(*, session: Session) -> Rows:
    return _all(session, Host, HOST)


def host_polls(*, session: Session) -> Rows:
    """When each host's agent last answered (apart: it changes at every poll)."""
    return _all(session, Host, ("id", "last_seen_at"))


def gpus(*, session: Session) -> Rows:
    return _all(session, Gpu, GPU)


def last_job_id(*, session: Session) -> int:
    """The highest job id given so far (0: none): a later snapshot's jobs above an earlier
    one's that it does not hold came and went in between."""
    return int(session.execute(sa_select(func.max(col(Job.id)))).scalar() or 0)


def active_jobs(*, session: Session) -> Rows:
    """Every job not yet ended, every column, by id."""
    columns = _columns(Job, JOB)
    query = sa_select(*columns).where(col(Job.state).in_(ACTIVE_STATES)).order_by(col(Job.id))
    found = _read(session, query, columns)
    at = found.columns.index("report_token")
    for row in found.rows:
        if row[at]:
            row[at] = token_digest(row[at])
    return found


SHARE_APART = ("job_a", "job_b", "at", "reason_code", "reason_values")


def share_apart(*, session: Session) -> Rows:
    """Pairs of jobs kept apart (never to share a card again) of which both have not ended:
    the only pairs a placement could still meet, and jobs a snapshot keeps."""
    columns = _columns(ShareApart, SHARE_APART)
    active = sa_select(col(Job.id)).where(col(Job.state).in_(ACTIVE_STATES))
    query = (
        sa_select(*columns)
        .where(col(ShareApart.job_a).in_(active), col(ShareApart.job_b).in_(active))
        .order_by(col(ShareApart.job_a), col(ShareApart.job_b))
    )
    return _read(session, query, columns)


MAINTENANCE = (
    "id",
    "host",
    "starts_at",
    "ends_at",
    "reason",
    "created_by",
    "created_at",
    "stopped_at",
)


def maintenance(*, session: Session, now: datetime) -> Rows:
    """Hosts' planned maintenance not cancelled and not over at `now`: the windows a
    restored install still has to keep, by start."""
    columns = _columns(MaintenanceWindow, MAINTENANCE)
    query = (
        sa_select(*columns)
        .where(col(MaintenanceWindow.cancelled_at).is_(None))
        .where(col(MaintenanceWindow.ends_at) > now)
        .order_by(col(MaintenanceWindow.starts_at), col(MaintenanceWindow.id))
    )
    return _read(session, query, columns)


RESERVATIONS = (
    "id",
    "team_id",
    "gpu_type",
    "gpus",
    "starts_at",
    "ends_at",
    "reason",
    "created_by",
    "created_at",
)


def reservations(*, session: Session, now: datetime) -> Rows:
    """Cards booked for teams, not cancelled and not over at `now`, by start."""
    columns = _columns(TeamReservation, RESERVATIONS)
    query = (
        sa_select(*columns)
        .where(col(TeamReservation.cancelled_at).is_(None))
        .where(col(TeamReservation.ends_at) > now)
        .order_by(col(TeamReservation.starts_at), col(TeamReservation.id))
    )
    return _read(session, query, columns)


DEPENDENCIES = ("job_id", "upstream_id", "kind", "state", "settled_at", "settled_by", "told_at")


def dependencies(*, session: Session) -> Rows:
    """What jobs not yet ended still wait for (after=, afterany=, data=after:), waiting or
    held: the only dependencies a restored queue needs."""
    columns = _columns(JobDependency, DEPENDENCIES)
    active = sa_select(col(Job.id)).where(col(Job.state).in_(ACTIVE_STATES))
    query = (
        sa_select(*columns)
        .where(col(JobDependency.job_id).in_(active))
        .where(col(JobDependency.state).in_(UNMET_DEPENDENCIES))
        .order_by(col(JobDependency.job_id), col(JobDependency.id))
    )
    return _read(session, query, columns)


def open_allocations(*, session: Session) -> Rows:
    """Allocations still open of jobs not yet ended (a job holding a GPU now), by id."""
    columns = _columns(Allocation, ALLOCATION)
    query = (
        sa_select(*columns)
        .join(Job, col(Job.id) == col(Allocation.job_id))
        .where(col(Allocation.ended_at).is_(None), col(Job.state).in_(ACTIVE_STATES))
        .order_by(col(Allocation.id))
    )
    return _read(session, query, columns)
