"""The record of Slack requests seen: one row per request, old rows purged as requests come."""

from __future__ import annotations

from datetime import timedelta

from conftest import Bot
from sqlmodel import Session, select

from bot.replays import once
from bot.services import PURGE_EVERY, BotServices
from scheduler.app import Paika
from storage.models import SeenRequest
from storage.queries.requests import KEPT_FOR, first_sighting


def _seen(paika: Paika) -> int:
    with Session(paika.engine) as session:
        return len(session.exec(select(SeenRequest)).all())


def test_requests_are_seen_once_and_old_sightings_are_purged_every_so_often(paika: Paika) -> None:
    services = BotServices(paika)
    old = paika.clock.now() - KEPT_FOR - timedelta(seconds=1)
    with Session(paika.engine) as session:
        first_sighting(session=session, key="0" * 64, at=old)
        session.commit()
    # The first sighting of a process purges (rows left by an earlier run go at once).
    assert services.first_sighting("v0=first") is True
    assert _seen(paika) == 1
    assert services.first_sighting("v0=first") is False
    for n in range(2, PURGE_EVERY):
        assert services.first_sighting(f"v0={n}") is True
    with Session(paika.engine) as session:
        first_sighting(session=session, key="1" * 64, at=old)
        session.commit()
    assert _seen(paika) == PURGE_EVERY
    assert services.first_sighting("v0=last") is True  # the PURGE_EVERY-th: purges again
    assert _seen(paika) == PURGE_EVERY


def test_every_piece_of_work_after_an_ack_is_done_once_per_request(bot: Bot) -> None:
    """A lazy listener registered without `once` would act again on a replayed request."""
    guarded = once(bot.services, lambda body, respond: None).__code__
    lazies = [fn for listener in bot.app._listeners for fn in listener.lazy_functions]
    assert lazies and all(fn.__code__ is guarded for fn in lazies), [f.__name__ for f in lazies]
