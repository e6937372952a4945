"""Work after acks waits out a burst of requests, but never long."""

from __future__ import annotations

import time

from bot.pacing import AcksFirst, PacedExecutor


def test_work_starts_at_once_when_nothing_arrives() -> None:
    pacing = AcksFirst(quiet_s=0.05, longest_s=1.0)
    began = time.monotonic()
    pacing.wait_for_quiet()
    assert time.monotonic() - began < 0.05


class EverArriving(AcksFirst):
    """Requests arriving without a pause: the last one came just now, whenever it is asked
    (a thread calling `arrived` in a loop leaves gaps when a busy machine does not run it)."""

    @property
    def _last(self) -> float:
        return time.monotonic()

    @_last.setter
    def _last(self, value: float) -> None:
        pass


def test_work_waits_while_requests_keep_arriving_but_not_past_the_bound() -> None:
    pacing = EverArriving(quiet_s=0.05, longest_s=0.3)
    began = time.monotonic()
    with PacedExecutor(pacing, 1, "test-paced") as pool:
        ran_after = pool.submit(lambda: time.monotonic() - began).result(timeout=5)
    assert 0.3 <= ran_after < 5.0  # held back by the burst, released by the bound
