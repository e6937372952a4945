"""APScheduler's warnings that come with every tick while the cycle runs long are said once a
minute, the next one counting those held back (paika up's default log)."""

from __future__ import annotations

import logging

import pytest

from scheduler.observe.logs import FOLDED, Fold, fold_repeats

SKIPPED = 'Execution of job "%s" skipped: maximum number of running instances reached (%d)'


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _record(msg: str, *args: object, level: int = logging.WARNING) -> logging.LogRecord:
    return logging.LogRecord("apscheduler.scheduler", level, __file__, 1, msg, args, None)


def test_a_warning_that_comes_each_tick_is_said_once_a_minute_with_its_count() -> None:
    ticks = Ticks()
    fold = Fold(60, ticks)
    passed = []
    for _ in range(30):  # a tick every 10 s for five minutes, each one skipped
        record = _record(SKIPPED, "Periodic.tick", 1)
        if fold.filter(record):
            passed.append(record.getMessage())
        ticks.now += 10
    assert len(passed) == 5
    assert passed[0].endswith("reached (1)")
    assert passed[1].endswith("reached (1) (and 5 more like it in the last 60 s)")


def test_other_messages_and_levels_are_folded_apart() -> None:
    fold = Fold(60, Ticks())
    assert fold.filter(_record(SKIPPED, "Periodic.tick", 1))
    assert fold.filter(_record('Run time of job "%s" was missed by %s', "Periodic.tick", "0:00:05"))
    assert fold.filter(_record(SKIPPED, "Periodic.tick", 1, level=logging.ERROR))
    assert not fold.filter(_record(SKIPPED, "Periodic.courier", 1))  # the same message


@pytest.fixture
def quiet_root() -> object:
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    yield root
    root.setLevel(level)
    for name in FOLDED:
        logger = logging.getLogger(name)
        for found in [f for f in logger.filters if isinstance(f, Fold)]:
            logger.removeFilter(found)


def test_paika_up_folds_apschedulers_loggers_once(quiet_root: object) -> None:
    fold_repeats()
    fold_repeats()
    for name in FOLDED:
        assert sum(isinstance(f, Fold) for f in logging.getLogger(name).filters) == 1
