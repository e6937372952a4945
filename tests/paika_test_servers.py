"""The database servers the tests use, and fresh databases on them (shared by the fixtures
and the tests that need a second database)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import OperationalError

SERVER_URLS = {
    "postgresql": os.environ.get(
        "PAIKA_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
    ),
    "mariadb": os.environ.get("PAIKA_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/test"),
}
BACKENDS = ["sqlite", "postgresql", "mariadb"]


def servers_required() -> bool:
    return os.environ.get("PAIKA_TEST_REQUIRE_SERVERS") == "1"


def create_database(backend: str) -> tuple[str, Engine]:
    """A fresh, uniquely named database on a server; returns its URL and an admin engine."""
    admin = create_engine(SERVER_URLS[backend], isolation_level="AUTOCOMMIT")
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
    url = admin.url.set(database=name).render_as_string(hide_password=False)
    return url, admin


@contextmanager
def fresh_engine(backend: str, folder: Path) -> Iterator[Engine]:
    """A second, empty, migrated database on `backend` (sqlite, postgresql or mysql, as an
    engine's dialect names it): a new install beside the test's own database."""
    from storage.db import make_engine, upgrade

    admin = None
    if backend == "sqlite":
        url = f"sqlite:///{folder / 'fresh.db'}"
    else:
        url, admin = create_database("postgresql" if backend == "postgresql" else "mariadb")
    engine = make_engine(url)
    upgrade(engine)
    try:
        yield engine
    finally:
        engine.dispose()
        if admin is not None:
            with admin.connect() as conn:
                force = " WITH (FORCE)" if backend == "postgresql" else ""
                conn.execute(text(f"DROP DATABASE {url.rsplit('/', 1)[1].split('?')[0]}{force}"))
            admin.dispose()
