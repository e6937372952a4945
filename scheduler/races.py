"""Running a unit of work again when it lost a race.

Every update of a job is conditional on the version it read (see `storage.models.jobs`):
when a user's command and the cycle change the same job at once, one of them fails with
StaleDataError (or, on a server, as a deadlock's victim) after its transaction was rolled
back whole (`storage.db.lost_race` tells them). Running it again on the fresh
state gives the truth (a cancel that lost to a start now stops the run).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from storage.db import lost_race

log = logging.getLogger(__name__)
T = TypeVar("T")
P = ParamSpec("P")
ATTEMPTS = 3


def retrying(work: Callable[[], T], *, what: str, attempts: int = ATTEMPTS) -> T:
    """`work()` (one whole transaction), again while it loses races; the last loss is raised."""
    for _ in range(attempts - 1):
        try:
            return work()
        except Exception as exc:
            if not lost_race(exc):
                raise
            log.info("%s raced another change of the same job; running it again", what)
    return work()


def on_race(what: str) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Decorate a function that is one whole transaction: it runs again when it loses a race."""

    def wrap(work: Callable[P, T]) -> Callable[P, T]:
        @functools.wraps(work)
        def run(*args: P.args, **kwargs: P.kwargs) -> T:
            return retrying(lambda: work(*args, **kwargs), what=what)

        return run

    return wrap
