"""Shared fixtures: a clean database on each backend, a manual clock, a paika core.

Storage and service tests run on SQLite and on the PostgreSQL and MariaDB servers on
127.0.0.1. Where a server is missing they skip with a message, unless
PAIKA_TEST_REQUIRE_SERVERS=1 (set by .ci/run), where a missing server fails the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from paika_test_servers import BACKENDS, create_database, empty_database, without_tls
from paika_test_time import T0  # noqa: E402,F401
from sqlalchemy import Engine, text

from bot.console import render
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.settings import Settings
from storage.db import make_engine, upgrade


@pytest.fixture(scope="session", params=BACKENDS)
def backend_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """One migrated database per backend for the whole run."""
    backend = request.param
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'paika.db'}"
        upgrade(make_engine(url))
        yield url
        return
    url, admin = create_database(backend)
    url = without_tls(url)
    engine = make_engine(url)
    upgrade(engine)
    yield url
    engine.dispose()
    with admin.connect() as conn:
        force = " WITH (FORCE)" if backend == "postgresql" else ""
        conn.execute(text(f"DROP DATABASE {url.rsplit('/', 1)[1].split('?')[0]}{force}"))
    admin.dispose()


@pytest.fixture
def engine(backend_url: str) -> Iterator[Engine]:
    """An engine on an empty (migrated) database of the current backend."""
    eng = make_engine(backend_url)
    empty_database(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def clock() -> ManualClock:
    """A clock that stands still until a test moves it."""
    return ManualClock(T0)


@pytest.fixture
def paika(engine: Engine, clock: ManualClock) -> Iterator[Paika]:
    """A paika core on the test database, with the bundled policy and admin UADMIN."""
    settings = Settings(
        database_url=engine.url.render_as_string(hide_password=False),
        admins=("UADMIN",),
        config=None,
    )
    core = Paika.start(settings, clock=clock, words=render)
    yield core
    core.engine.dispose()


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    """Where a test writes a policy file."""
    return tmp_path / "policy.yml"
