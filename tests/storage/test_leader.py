"""Only one paika instance schedules: the leader lock on every backend."""

from __future__ import annotations

from datetime import timedelta

import pytest
from paika_test_servers import create_database
from paika_test_time import T0
from sqlalchemy import Engine, text

from storage.db import make_engine
from storage.leader import LeaderLock


def test_one_holder_at_a_time_and_the_next_takes_over(engine: Engine) -> None:
    url = engine.url.render_as_string(hide_password=False)
    other_engine = make_engine(url)
    first, second = (
        LeaderLock(engine, ttl=timedelta(seconds=30)),
        LeaderLock(other_engine, ttl=timedelta(seconds=30)),
    )
    try:
        assert first.acquire(T0)
        assert not second.acquire(T0)
        assert first.acquire(T0 + timedelta(seconds=10))  # renewing keeps it
        assert not second.acquire(T0 + timedelta(seconds=20))
        first.release()
        assert second.acquire(T0 + timedelta(seconds=21))
        assert not first.acquire(T0 + timedelta(seconds=22))
    finally:
        first.release()
        second.release()
        other_engine.dispose()


def test_a_lease_that_is_not_renewed_expires(engine: Engine) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip("server locks die with their connection instead of expiring")
    first, second = (
        LeaderLock(engine, ttl=timedelta(seconds=30)),
        LeaderLock(engine, ttl=timedelta(seconds=30)),
    )
    assert first.acquire(T0)
    assert not second.acquire(T0 + timedelta(seconds=29))
    assert second.acquire(T0 + timedelta(seconds=31))


def test_two_paikas_on_two_databases_of_one_server_each_lead(engine: Engine) -> None:
    """Server-wide locks (MySQL's GET_LOCK) must not let one paika block another's database."""
    if engine.dialect.name == "sqlite":
        pytest.skip("a SQLite file is its own server")
    url, admin = create_database(engine.dialect.name.replace("mysql", "mariadb"))
    other_engine = make_engine(url)
    here, there = LeaderLock(engine), LeaderLock(other_engine)
    try:
        assert here.acquire(T0)
        assert there.acquire(T0)  # another database: its own leader
        assert not LeaderLock(engine).acquire(T0)  # the same database: still one
    finally:
        here.release()
        there.release()
        other_engine.dispose()
        with admin.connect() as conn:
            force = " WITH (FORCE)" if engine.dialect.name == "postgresql" else ""
            conn.execute(text(f"DROP DATABASE {url.rsplit('/', 1)[1]}{force}"))
        admin.dispose()
