"""Acknowledgements first: the work after an ack waits while a burst of requests arrives.

Answers are Python that holds the GIL; started the moment their ack is sent, they slow the
acks of the requests still arriving in the same burst (fifty people opening `/gpu queue` at
the start of a meeting). Work handed to the bot's worker therefore waits until no request
has arrived for `quiet_s`, and never longer than `longest_s`, so answers are not starved.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class AcksFirst:
    """Knows when the last request arrived; lets background work wait for a quiet moment."""

    def __init__(self, quiet_s: float = 0.05, longest_s: float = 0.5) -> None:
        self.quiet_s, self.longest_s = quiet_s, longest_s
        self._last = 0.0

    def arrived(self) -> None:
        """A request came in (called by the HTTP layer before dispatching it)."""
        self._last = time.monotonic()

    def wait_for_quiet(self) -> None:
        deadline = time.monotonic() + self.longest_s
        while True:
            now = time.monotonic()
            gap = now - self._last
            if gap >= self.quiet_s or now >= deadline:
                return
            time.sleep(min(self.quiet_s - gap, deadline - now))


class PacedExecutor(ThreadPoolExecutor):
    """A thread pool whose tasks start only once the requests have paused."""

    def __init__(self, pacing: AcksFirst, max_workers: int, thread_name_prefix: str) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
        self.pacing = pacing

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        def paced() -> Any:
            self.pacing.wait_for_quiet()
            return fn(*args, **kwargs)

        return super().submit(paced)
