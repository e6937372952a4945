"""Slack requests seen: each is taken on once, by any instance; old sightings are purged."""

from __future__ import annotations

import hashlib
import threading
import time
from datetime import timedelta

import pytest
from paika_test_time import T0
from sqlalchemy import Engine
from sqlmodel import Session, select

from storage.models import SeenRequest, Team
from storage.queries.requests import KEPT_FOR, first_sighting, purge_sightings


def _key(signature: str) -> str:
    return hashlib.sha256(signature.encode()).hexdigest()


def _seen(engine: Engine) -> list[str]:
    with Session(engine) as session:
        return sorted(session.exec(select(SeenRequest.key)).all())


def test_a_request_is_seen_first_once_and_the_transaction_goes_on(engine: Engine) -> None:
    first, second = _key("v0=aaa"), _key("v0=bbb")
    with Session(engine) as session:
        assert first_sighting(session=session, key=first, at=T0) is True
        assert first_sighting(session=session, key=first, at=T0) is False
        # The refused insert must not spoil the rest of the caller's work.
        session.add(Team(name="vision", created_at=T0))
        assert first_sighting(session=session, key=second, at=T0) is True
        session.commit()
    with Session(engine) as session:
        assert first_sighting(session=session, key=first, at=T0 + timedelta(minutes=1)) is False
        session.commit()
        assert session.exec(select(Team.name)).all() == ["vision"]
    assert _seen(engine) == sorted([first, second])


def test_two_instances_racing_on_one_request_see_it_first_once(engine: Engine) -> None:
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite serialises writers; the race needs a server (PostgreSQL, MariaDB)")
    barrier = threading.Barrier(2)
    outcomes: list[bool] = []

    def sight() -> None:
        with Session(engine) as session:
            session.connection()  # begin the transaction before the race
            barrier.wait()
            won = first_sighting(session=session, key=_key("v0=race"), at=T0)
            time.sleep(0.2)  # hold the insert uncommitted while the other one tries
            session.commit()
            outcomes.append(won)

    threads = [threading.Thread(target=sight) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes) == [False, True]
    assert _seen(engine) == [_key("v0=race")]


def test_sightings_older_than_ten_minutes_are_purged(engine: Engine) -> None:
    assert timedelta(minutes=10) == KEPT_FOR
    with Session(engine) as session:
        first_sighting(session=session, key=_key("old"), at=T0 - timedelta(minutes=11))
        first_sighting(session=session, key=_key("recent"), at=T0 - timedelta(minutes=9))
        first_sighting(session=session, key=_key("now"), at=T0)
        session.commit()
    with Session(engine) as session:
        assert purge_sightings(session=session, at=T0) == 1
        session.commit()
    assert _seen(engine) == sorted([_key("recent"), _key("now")])
    with Session(engine) as session:  # a purged request would be taken on again
        assert first_sighting(session=session, key=_key("old"), at=T0) is True
        session.commit()
