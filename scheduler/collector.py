"""Python's cycle collector paused while a big result is built (a queue snapshot, a year's
report): building ~10^5 small objects that all live until the result is made sets off full
collections that each walk every object of the process, again and again (at 10,000 jobs
they cost more than the queries). Those objects hold no cycles; reference counting frees
them after, and the collector runs again once the last pause ends.

Pauses nest and may overlap across threads (a report asked in Slack while the archiver
builds a snapshot): the collector comes back when the last one ends, and only if it was on
when the first began."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside the block (see the module's docstring)."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
