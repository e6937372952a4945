"""Engines, sessions and schema migrations, the same on SQLite, PostgreSQL and MySQL.

Alembic is imported only when the schema is to change (or its scripts are read): a database
already at HEAD_REVISION is told apart with one query, so a console command does not pay the
fifth of a second that loading Alembic and every migration script costs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm.exc import StaleDataError
from sqlmodel import Session, create_engine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"


def _newest_script() -> str:
    """The newest revision this code ships, read from the scripts' names without Alembic:
    each migration is versions/NNNN_what.py with revision "NNNN", revising the one before
    (tests/storage/test_schema.py checks both, and that this is Alembic's head)."""
    names = (path.name for path in (MIGRATIONS / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))
    return max(names).partition("_")[0]


HEAD_REVISION = _newest_script()
# Where Alembic keeps the revision a database is at (its default; env.py keeps it).
VERSION_TABLE = "alembic_version"

# The drivers paika installs for each backend (see the `postgres` and `mysql` extras).
_DRIVERS = {
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mysql+pymysql",
}


def normalize_url(url: str) -> str:
    """Give bare `postgresql://` and `mysql://` URLs the driver paika ships with."""
    parsed = make_url(url)
    if parsed.drivername in _DRIVERS:
        parsed = parsed.set(drivername=_DRIVERS[parsed.drivername])
    if parsed.get_backend_name() == "mysql" and "charset" not in parsed.query:
        parsed = parsed.update_query_dict({"charset": "utf8mb4"})
    return parsed.render_as_string(hide_password=False)


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite gets its folder, foreign keys and a busy timeout."""
    url = normalize_url(url)
    parsed = make_url(url)
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
    engine = create_engine(url, **kwargs)
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


# Errors that mean "another transaction got there first; run yours again": MySQL/MariaDB
# deadlock and lock wait timeout; PostgreSQL deadlock and serialization failure. A unique
# key taken in between is one too: two writers numbering the same next version (a template's,
# the config's) both read N and insert N + 1; the loser, run again, reads N + 1 and goes on.
_MYSQL_RACES = {1213, 1205}
_POSTGRES_RACES = {"40P01", "40001"}
_MYSQL_DUPLICATE = 1062
_POSTGRES_UNIQUE = "23505"
_SQLITE_UNIQUE = {"SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY"}


def lost_race(exc: BaseException) -> bool:
    """Whether `exc` says the unit of work lost a race and may simply be run again: a
    conditional update that matched no row (the row's version moved on), the database
    choosing it as a deadlock's victim, or a unique key another writer took first."""
    if isinstance(exc, StaleDataError):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    orig = exc.orig
    code = getattr(orig, "args", (None,))[0] if orig is not None else None
    sqlstate = getattr(orig, "sqlstate", None)
    if code in _MYSQL_RACES or sqlstate in _POSTGRES_RACES:
        return True
    return isinstance(exc, IntegrityError) and _unique_taken(orig, code, sqlstate)


def _unique_taken(orig: object, code: object, sqlstate: object) -> bool:
    """A unique (or primary) key violation, as each driver says it; other integrity errors
    (a missing foreign row, a check) would fail the same way again, so they are no race."""
    errorname = getattr(orig, "sqlite_errorname", None)
    return code == _MYSQL_DUPLICATE or sqlstate == _POSTGRES_UNIQUE or errorname in _SQLITE_UNIQUE


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on any error."""
    with Session(engine, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


@contextmanager
def consistent_reads(engine: Engine) -> Iterator[Session]:
    """A read-only unit of work whose statements all see one state of the database: on
    PostgreSQL and MySQL each statement of a READ COMMITTED transaction sees the latest
    commits, so a document read in several queries could mix two states. SQLite's
    transaction sees one state already."""
    with Session(engine) as session:
        if engine.dialect.name != "sqlite":
            session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        yield session
        session.rollback()


def _alembic_config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema up to `revision` (the newest by default)."""
    if revision == "head" and current_revision(engine) == HEAD_REVISION:
        return  # up to date already: nothing for Alembic to do
    from alembic import command

    config = _alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    """The schema revision the database is at, or None for an empty database."""
    with engine.connect() as connection:
        return _stored_revision(connection)


def _stored_revision(connection: Connection) -> str | None:
    """What Alembic's version table holds (as Alembic's MigrationContext reads it)."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    rows = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    if len(rows) > 1:  # branches merged by hand; paika's history is one line
        raise RuntimeError(f"the database is at several schema revisions at once: {rows}")
    return rows[0] if rows else None


def head_revision() -> str | None:
    """The newest revision this code ships, as Alembic reads it from the scripts."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_alembic_config()).get_current_head()
