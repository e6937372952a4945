"""The database servers the tests use, and fresh databases on them (shared by the fixtures
and the tests that need a second database)."""

from __future__ import annotations

import os
import uuid

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
