"""The cycle collector's pause nests, overlaps across threads, and restores what it found."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from scheduler.collector import collector_paused


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_nested_pauses_bring_the_collector_back_after_the_last() -> None:
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer build is still going
    assert gc.isenabled()


def test_overlapping_pauses_in_two_threads_end_with_the_collector_on() -> None:
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    with collector_paused():
        thread.start()
        assert inside.wait(10)
    assert not gc.isenabled()  # the other thread's pause has not ended
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_an_error_inside_still_ends_the_pause() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("the build failed")
    assert gc.isenabled()
