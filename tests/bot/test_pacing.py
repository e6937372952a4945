"""Work after acks waits out a burst of requests, but never long."""

from __future__ import annotations

import threading
import time

from bot.pacing import AcksFirst, PacedExecutor


def test_work_starts_at_once_when_nothing_arrives() -> None:
    pacing = AcksFirst(quiet_s=0.05, longest_s=1.0)
    began = time.monotonic()
    pacing.wait_for_quiet()
    assert time.monotonic() - began < 0.05


def test_work_waits_while_requests_keep_arriving_but_not_past_the_bound() -> None:
    pacing = AcksFirst(quiet_s=0.05, longest_s=0.3)
    stop = threading.Event()

    def burst() -> None:
        while not stop.is_set():
            pacing.arrived()
            time.sleep(0.01)

    arrivals = threading.Thread(target=burst)
    arrivals.start()
    try:
        began = time.monotonic()
        with PacedExecutor(pacing, 1, "test-paced") as pool:
            ran_after = pool.submit(lambda: time.monotonic() - began).result(timeout=5)
    finally:
        stop.set()
        arrivals.join()
    assert 0.25 <= ran_after < 1.0  # held back by the burst, released by the bound
