"""The database servers the tests use, and fresh databases on them (shared by the fixtures
and the tests that need a second database)."""

from __future__ import annotations

import atexit
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, make_url, text
from sqlalchemy.exc import OperationalError

from storage.models.base import metadata

SERVER_URLS = {
    "postgresql": os.environ.get(
        "PAIKA_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
    ),
    "mariadb": os.environ.get("PAIKA_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/test"),
}
BACKENDS = ["sqlite", "postgresql", "mariadb"]


def servers_required() -> bool:
    return os.environ.get("PAIKA_TEST_REQUIRE_SERVERS") == "1"


def without_tls(url: str) -> str:
    """`url` with TLS off for MariaDB, unless it names TLS options of its own.

    PyMySQL otherwise reads the system's CA certificates into a TLS context for every
    connection (25-40 ms each, and a test opens several), though the loopback server offers
    no TLS. The URL carries it, as paika makes its own engines from the URL a test gives."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "mysql" or any(key.startswith("ssl") for key in parsed.query):
        return url
    return parsed.update_query_dict({"ssl_disabled": "true"}).render_as_string(hide_password=False)


def create_database(backend: str) -> tuple[str, Engine]:
    """A fresh, uniquely named database on a server; returns its URL and an admin engine."""
    admin = create_engine(without_tls(SERVER_URLS[backend]), isolation_level="AUTOCOMMIT")
    name = f"paika_test_{uuid.uuid4().hex[:10]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}"))
    except OperationalError as exc:
        admin.dispose()
        message = f"{backend} server not reachable at {SERVER_URLS[backend]} ({exc.orig})"
        if servers_required():
            pytest.fail(message + "; PAIKA_TEST_REQUIRE_SERVERS=1 makes it required")
        pytest.skip(message)
    # The server's own URL, not the admin's: callers name the database by the URL's end.
    url = make_url(SERVER_URLS[backend]).set(database=name).render_as_string(hide_password=False)
    return url, admin


# Second databases on the servers, migrated and not in use, by server: creating and
# migrating one took 0.5-1 s, emptying one that a test is done with a few milliseconds.
_SPARES: dict[str, list[str]] = {}


@contextmanager
def fresh_engine(backend: str, folder: Path) -> Iterator[Engine]:
    """A second, empty, migrated database on `backend` (sqlite, postgresql or mysql, as an
    engine's dialect names it): a new install beside the test's own database."""
    from storage.db import make_engine, upgrade

    if backend == "sqlite":
        engine = make_engine(f"sqlite:///{folder / 'fresh.db'}")
        upgrade(engine)
        try:
            yield engine
        finally:
            engine.dispose()
        return
    spares = _SPARES.setdefault("postgresql" if backend == "postgresql" else "mariadb", [])
    url = spares.pop() if spares else _spare(backend)
    engine = make_engine(url)
    try:
        empty_database(engine)
        yield engine
    finally:
        engine.dispose()
        spares.append(url)


def _spare(backend: str) -> str:
    """A new migrated database on a server, dropped as the test run ends."""
    from storage.db import make_engine, upgrade

    server = "postgresql" if backend == "postgresql" else "mariadb"
    url, admin = create_database(server)
    url = without_tls(url)
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()

    def drop() -> None:
        with admin.connect() as conn:
            force = " WITH (FORCE)" if server == "postgresql" else ""
            conn.execute(text(f"DROP DATABASE {url.rsplit('/', 1)[1].split('?')[0]}{force}"))
        admin.dispose()

    atexit.register(drop)
    return url


def empty_database(eng: Engine) -> None:
    """Delete every row and restart ids at 1, so tests can name job #1.

    TRUNCATE of all 25 tables took 0.1-0.5 s a test on the servers. A test writes to a few
    tables, so one query names those, and only they are emptied and their ids restarted.
    The result is the database a TRUNCATE of every table left, down to where rows will lie:
    a deleted or rolled-back row leaves its space in a PostgreSQL table, a later insert may
    fill it, and a query without ORDER BY would read rows in another order than after a
    fresh start; so the servers truncate (PostgreSQL with CASCADE, as it must name the tables
    referring to one). SQLite keeps rows in id order, and DELETE is what it did before.
    alembic_version is not in the metadata and keeps its row."""
    tables = [table.name for table in reversed(metadata.sorted_tables)]
    dialect = eng.dialect.name
    with eng.begin() as conn:
        found = {(kind, name) for kind, name in conn.execute(text(_touched(dialect, tables)))}
        touched = [table for table in tables if ("table", table) in found]
        sequences = sorted(name for kind, name in found if kind == "sequence")
        if dialect == "postgresql":
            if touched:
                conn.execute(text(f"TRUNCATE {', '.join(touched)} CASCADE"))
            if sequences:
                calls = ", ".join(f"setval('{seq}', 1, false)" for seq in sequences)
                conn.execute(text(f"SELECT {calls}"))
        elif dialect == "mysql":
            if touched:  # TRUNCATE restarts AUTO_INCREMENT too
                conn.execute(text("SET FOREIGN_KEY_CHECKS=0"))
                for table in touched:
                    conn.execute(text(f"TRUNCATE TABLE {table}"))
                conn.execute(text("SET FOREIGN_KEY_CHECKS=1"))
        else:
            for table in touched:  # the children first
                conn.execute(text(f"DELETE FROM {table}"))
            if sequences:
                conn.execute(text("DELETE FROM sqlite_sequence"))


def _touched(dialect: str, tables: list[str]) -> str:
    """One query naming each table to empty ("table", name) and, on PostgreSQL, each id
    sequence to restart ("sequence", name).

    A table to empty: on PostgreSQL one with any page (a truncated table has none, and any
    insert since, kept or rolled back, adds one); on MariaDB one with a row or whose
    AUTO_INCREMENT moved (a rolled-back insert moves it; information_schema reads it live);
    on SQLite one with a row. PostgreSQL's sequences move apart from their tables, on a
    rolled-back insert too. SQLite numbers from the largest id left, so an empty table starts
    at 1, unless AUTOINCREMENT made it keep a count in sqlite_sequence."""
    if dialect == "postgresql":
        parts = [f"SELECT 'table', '{t}' WHERE pg_relation_size('{t}') > 0" for t in tables]
        parts.append(
            "SELECT 'sequence', sequencename FROM pg_sequences"
            " WHERE schemaname = current_schema() AND last_value IS NOT NULL"
        )
    elif dialect == "mysql":
        parts = [
            f"SELECT 'table', '{t}' FROM DUAL WHERE EXISTS (SELECT 1 FROM {t})" for t in tables
        ]
        parts.append(
            "SELECT 'table', table_name FROM information_schema.tables"
            " WHERE table_schema = DATABASE() AND auto_increment > 1"
        )
    else:
        parts = [f"SELECT 'table', '{t}' WHERE EXISTS (SELECT 1 FROM {t})" for t in tables]
        parts.append("SELECT 'sequence', name FROM sqlite_master WHERE name = 'sqlite_sequence'")
    return " UNION ALL ".join(parts)
