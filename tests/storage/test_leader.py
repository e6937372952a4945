"""Only one paika instance schedules: the leader lock on every backend."""

from __future__ import annotations

from datetime import timedelta

import pytest
from paika_test_time import T0
from sqlalchemy import Engine

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
