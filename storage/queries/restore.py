"""Writing a snapshot's rows into an empty database (the take-over story: a new install, the
same queue). Rows come as plain JSON values, as storage/queries/state.py read them; times and
dates are turned back into their column types here.

Ids are written as they were, so people's job numbers stay the same; PostgreSQL's id
sequences do not move when an id is given, so they are advanced past the restored ids
afterwards (else the next submitted job would collide with job #1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import Date, Table, func, insert, text
from sqlalchemy import select as sa_select
from sqlmodel import Session

from storage.models import (
    Allocation,
    Gpu,
    Host,
    Job,
    LedgerEntry,
    Member,
    Quota,
    Team,
    Template,
    TemplateVersion,
    UnixAccount,
)
from storage.models.cluster import MaintenanceWindow, ShareApart, TeamReservation
from storage.models.jobs import JobDependency
from storage.queries.state import table_of
from storage.types import UTCDateTime

# The tables a restore fills, parents first; a database with a row in any of them is not
# empty, and a restore would mix two installs.
FILLED: tuple[Any, ...] = (
    Team,
    Member,
    UnixAccount,
    Quota,
    Template,
    TemplateVersion,
    Host,
    Gpu,
    Job,
    Allocation,
    LedgerEntry,
    ShareApart,
    JobDependency,
    MaintenanceWindow,
    TeamReservation,
)


def tables_with_rows(*, session: Session) -> list[str]:
    """The tables a restore would fill that already hold rows (jobs first), [] when empty."""
    found = []
    for model in (Job, *(m for m in FILLED if m is not Job)):
        table = table_of(model)
        if session.execute(sa_select(func.count()).select_from(table)).scalar_one():
            found.append(table.name)
    return found


def typed(model: Any, row: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON row of the model's table with its times and dates as the columns take them."""
    return _typed(table_of(model), row)


def _typed(table: Table, row: Mapping[str, Any]) -> dict[str, Any]:
    typed = {}
    for name, value in row.items():
        column = table.c[name]
        if value is not None and isinstance(column.type, UTCDateTime):
            value = datetime.fromisoformat(value)
            if value.tzinfo is None:  # snapshots keep times as the database does: UTC
                value = value.replace(tzinfo=UTC)
        elif value is not None and isinstance(column.type, Date):
            value = date.fromisoformat(value)
        typed[name] = value
    return typed


def insert_rows(*, session: Session, model: Any, rows: Iterable[Mapping[str, Any]]) -> int:
    """Insert plain rows (ids included) into the model's table in one statement; how many."""
    table = table_of(model)
    typed = [_typed(table, row) for row in rows]
    if typed:
        # Rows may leave out columns that were None; every row names the same columns here.
        names = sorted({name for row in typed for name in row})
        session.execute(insert(table), [{name: row.get(name) for name in names} for row in typed])
    return len(typed)


def template_versions_of_current(*, session: Session, rows: Sequence[Mapping[str, Any]]) -> int:
    """A template_versions row for each restored template's current version (the versions
    before it stay in the old install's object store, under templates/<team>/<name>.json)."""
    versions = [
        {
            "team_id": row["team_id"],
            "name": row["name"],
            "version": row.get("version") or 1,
            "fields": row.get("fields"),
            "author": row["created_by"],
            "at": row["updated_at"],
        }
        for row in rows
    ]
    return insert_rows(session=session, model=TemplateVersion, rows=versions)


def advance_sequences(*, session: Session) -> None:
    """Move PostgreSQL's id sequences past the ids written (MySQL's AUTO_INCREMENT and
    SQLite's rowid follow the largest id by themselves)."""
    if session.get_bind().dialect.name != "postgresql":
        return
    for model in FILLED:
        table = table_of(model)
        if "id" not in table.c:
            continue
        session.execute(
            text(
                "SELECT setval(pg_get_serial_sequence(:table, 'id'), "
                f"COALESCE((SELECT MAX(id) FROM {table.name}), 0) + 1, false)"
            ),
            {"table": table.name},
        )
