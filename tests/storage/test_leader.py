"""Only one paika instance schedules: the leader lock on every backend."""

from __future__ import annotations

import threading
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


def test_periodic_jobs_on_many_threads_never_drop_leadership(engine: Engine) -> None:
    """paika up's cycle, alerts and prune run on APScheduler's threads and each asks the lock
    whether it leads. They once shared the lock's one connection at the same moment: on
    MariaDB the protocol tangled, the check failed and leadership flapped once a minute."""
    lock = LeaderLock(engine, ttl=timedelta(seconds=30))
    rival = LeaderLock(engine, ttl=timedelta(seconds=30))
    assert lock.acquire(T0)
    answers: list[bool] = []
    start = threading.Barrier(6)

    def ask() -> None:
        start.wait()
        for i in range(40):
            answers.append(lock.acquire(T0 + timedelta(seconds=i % 20)))

    threads = [threading.Thread(target=ask) for _ in range(6)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert answers == [True] * 240
        assert not rival.acquire(T0 + timedelta(seconds=25))  # nobody else got in meanwhile
    finally:
        lock.release()
        rival.release()


def test_a_lost_connection_is_retaken_in_the_same_check(engine: Engine) -> None:
    """A lock connection the server dropped (a restart, wait_timeout, a proxy) is closed and the
    lock taken again at once when nobody else holds it: one check, no cycle without a leader."""
    if engine.dialect.name == "sqlite":
        pytest.skip("a lease has no connection to lose")
    lock = LeaderLock(engine, ttl=timedelta(seconds=30))
    assert lock.acquire(T0)
    held = lock._connection
    assert held is not None
    held.invalidate()  # as if the server had closed it: the next use fails
    try:
        assert lock.acquire(T0 + timedelta(seconds=5))
        assert not LeaderLock(engine).acquire(T0 + timedelta(seconds=6))
    finally:
        lock.release()
