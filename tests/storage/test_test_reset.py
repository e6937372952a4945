"""The reset every database test starts from: no row left anywhere, every id numbering from 1
again (tests name job #1), the schema's revision kept. It empties only the tables a test
touched, so a miss here would leak one test's rows or ids into the next."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from paika_test_servers import empty_database
from sqlalchemy import Connection, CursorResult, Engine, func, insert, inspect, select, text

from storage.db import current_revision, head_revision
from storage.models.base import metadata

AT = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
TEAMS = metadata.tables["teams"]
MEMBERS = metadata.tables["members"]
PREFS = metadata.tables["user_prefs"]
ACCOUNTS = metadata.tables["unix_accounts"]
LEASES = metadata.tables["leases"]


def _team(conn: Connection, name: str) -> int:
    return _id(conn.execute(insert(TEAMS).values(name=name, created_at=AT)))


def _account(conn: Connection) -> int:
    values = {"subject_kind": "user", "subject": "U1", "account": "u1", "set_by": "U1"}
    return _id(conn.execute(insert(ACCOUNTS).values(set_at=AT, **values)))


def _id(result: CursorResult[Any]) -> int:
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def _rows(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        counts = {
            t.name: conn.execute(select(func.count()).select_from(t)).scalar_one()
            for t in metadata.sorted_tables
        }
    return {name: count for name, count in counts.items() if count}


def _dirty(engine: Engine) -> None:
    """Rows in a parent, its child and a table without ids; a row written and deleted
    again; an id taken by an insert that was rolled back, which leaves no row behind
    (PostgreSQL and MariaDB keep the counter moved)."""
    with engine.begin() as conn:
        team = _team(conn, "vision")
        _team(conn, "nlp")
        conn.execute(insert(MEMBERS).values(slack_user_id="U1", team_id=team, created_at=AT))
        conn.execute(insert(PREFS).values(slack_user_id="U1", language="en", updated_at=AT))
        conn.execute(insert(LEASES).values(name="leader", holder="a", expires_at=AT))
    with engine.begin() as conn:
        conn.execute(LEASES.delete())
    with engine.connect() as conn, conn.begin() as transaction:
        _account(conn)
        transaction.rollback()


def test_each_test_starts_on_an_empty_database_at_the_newest_revision(engine: Engine) -> None:
    assert _rows(engine) == {}
    assert current_revision(engine) == head_revision()


def test_a_reset_leaves_no_row_and_restarts_every_id_at_1(engine: Engine) -> None:
    _dirty(engine)
    assert _rows(engine) == {"teams": 2, "members": 1, "user_prefs": 1}

    empty_database(engine)

    assert _rows(engine) == {}
    assert current_revision(engine) == head_revision()
    if engine.dialect.name == "postgresql":
        # Not only empty but as new: rows deleted or rolled back leave space that a later
        # insert may fill, and an unordered query would read rows in another order.
        with engine.connect() as conn:
            sizes = {
                t.name: conn.execute(text(f"SELECT pg_relation_size('{t.name}')")).scalar_one()
                for t in metadata.sorted_tables
            }
        assert {name: size for name, size in sizes.items() if size} == {}
    with engine.begin() as conn:
        assert _team(conn, "vision") == 1
        assert _account(conn) == 1  # its only id was taken by the insert rolled back


@pytest.mark.parametrize("resets", [1, 2])
def test_a_reset_of_an_empty_database_keeps_it_empty(engine: Engine, resets: int) -> None:
    for _ in range(resets):
        empty_database(engine)
    assert _rows(engine) == {}
    with engine.begin() as conn:
        assert _team(conn, "vision") == 1


def test_the_database_holds_only_the_models_tables_and_alembics(engine: Engine) -> None:
    # The reset empties the tables of the models; a table made only by a migration would
    # keep its rows from one test to the next.
    names = set(inspect(engine).get_table_names())
    assert names == set(metadata.tables) | {"alembic_version"}
    assert inspect(engine).get_view_names() == []


@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_the_reset_of_a_sqlite_database_with_autoincrement_restarts_its_ids(
    engine: Engine,
) -> None:
    # No model asks for AUTOINCREMENT today; one that did would keep its count in
    # sqlite_sequence, past the rows deleted.
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE counted (id INTEGER PRIMARY KEY AUTOINCREMENT)"))
        conn.execute(text("INSERT INTO counted DEFAULT VALUES"))
        conn.execute(text("DELETE FROM counted"))
    try:
        empty_database(engine)
        with engine.begin() as conn:
            assert conn.execute(text("SELECT count(*) FROM sqlite_sequence")).scalar_one() == 0
            conn.execute(text("INSERT INTO counted DEFAULT VALUES"))
            assert conn.execute(text("SELECT id FROM counted")).scalar_one() == 1
    finally:
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE counted"))
