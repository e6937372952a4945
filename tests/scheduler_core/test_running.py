"""The running service's owner (scheduler/running.py): parts start in order and stop in
reverse, each within its bound; one that hangs is cut off and named while the others still
stop; one that fails to start stops those already started and its error comes out."""

from __future__ import annotations

import ast
import logging
import threading
import time
from pathlib import Path

import pytest

from scheduler import running
from scheduler.running import Part, Running


class Journal:
    """What the parts did, in order."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self._lock = threading.Lock()

    def part(self, name: str, *, stop_within_s: float = 1.0) -> Part:
        return Part(
            name,
            lambda: self.note(f"start {name}"),
            lambda: self.note(f"stop {name}"),
            "on nothing",
            stop_within_s,
        )

    def note(self, entry: str) -> None:
        with self._lock:
            self.entries.append(entry)


def test_parts_start_in_order_and_stop_in_reverse(caplog: pytest.LogCaptureFixture) -> None:
    journal = Journal()
    running = Running([journal.part(name) for name in ("a", "b", "c")])
    running.start()
    assert running.started == ["a", "b", "c"]
    with caplog.at_level(logging.INFO, logger="scheduler.running"):
        assert running.stop() == []
    assert journal.entries == ["start a", "start b", "start c", "stop c", "stop b", "stop a"]
    stopped = [r.getMessage() for r in caplog.records if "stopped" in r.getMessage()]
    assert [line.split()[0] for line in stopped] == ["c", "b", "a"]
    assert running.started == []
    assert running.stop() == []  # stopping twice stops nothing twice
    assert journal.entries.count("stop a") == 1


def test_a_part_whose_stop_hangs_is_cut_off_at_its_bound_and_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    journal = Journal()
    release = threading.Event()

    def hang() -> None:
        journal.note("stop stuck")
        release.wait(30)

    stuck = Part("stuck", lambda: journal.note("start stuck"), hang, "on nothing", 0.3)
    running = Running([journal.part("first"), stuck, journal.part("last")])
    running.start()
    began = time.monotonic()
    try:
        with caplog.at_level(logging.INFO, logger="scheduler.running"):
            late = running.stop()
    finally:
        release.set()
    took = time.monotonic() - began
    assert late == ["stuck"]
    assert 0.3 <= took < 2.0, took
    assert journal.entries[-3:] == ["stop last", "stop stuck", "stop first"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(w.startswith("stuck did not stop within 0.3 s") for w in warnings), warnings
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any(i.startswith("first stopped") for i in infos), infos
    assert any(i.startswith("last stopped") for i in infos), infos


def test_the_whole_stop_is_bounded_even_when_every_part_hangs() -> None:
    release = threading.Event()
    parts = [
        Part(name, lambda: None, lambda: release.wait(30), "on nothing", 5.0)
        for name in ("a", "b", "c")
    ]
    running = Running(parts, stop_within_s=0.5)
    assert running.stop_within_s == 0.5
    running.start()
    began = time.monotonic()
    try:
        late = running.stop()
    finally:
        release.set()
    assert late == ["c", "b", "a"]
    assert time.monotonic() - began < 1.5
    # Without a bound of its own, the whole stop is the sum of the parts' bounds.
    assert Running(parts).stop_within_s == 15.0


def test_a_part_that_fails_stopping_is_named_and_the_others_stop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    journal = Journal()

    def fail() -> None:
        raise OSError("the socket is gone")

    broken = Part("broken", lambda: None, fail, "on nothing", 1.0)
    running = Running([journal.part("first"), broken, journal.part("last")])
    running.start()
    with caplog.at_level(logging.INFO, logger="scheduler.running"):
        assert running.stop() == ["broken"]
    assert journal.entries[-2:] == ["stop last", "stop first"]
    failed = [r for r in caplog.records if r.getMessage() == "broken failed stopping"]
    assert failed and failed[0].exc_info is not None


def test_a_part_failing_to_start_stops_those_started_in_reverse_and_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    journal = Journal()

    def refuse() -> None:
        journal.note("start refused")
        raise RuntimeError("cannot listen on 127.0.0.1:3000")

    refused = Part("refused", refuse, lambda: journal.note("stop refused"), "on nothing")
    running = Running([journal.part("a"), journal.part("b"), refused, journal.part("never")])
    with (
        caplog.at_level(logging.INFO, logger="scheduler.running"),
        pytest.raises(RuntimeError, match="cannot listen"),
    ):
        running.start()
    # The part that failed is not stopped (it never ran); the one after it never starts.
    assert journal.entries == ["start a", "start b", "start refused", "stop b", "stop a"]
    assert running.started == []
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert said == ["refused did not start; stopping what did (b, a)"]


def test_part_names_are_unique() -> None:
    journal = Journal()
    with pytest.raises(ValueError, match="same name"):
        Running([journal.part("a"), journal.part("a")])


# ------------------------------------------------- paika up's parts, and the process's settings

ROOT = Path(__file__).resolve().parents[2]
# The program's entry for paika up: the one module that may set what holds for the whole
# process (the interpreter's switch interval).
ENTRY = ROOT / "bot" / "up.py"


def _sets_the_switch_interval(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "setswitchinterval":
                return True
    return False


def test_only_the_programs_entry_sets_the_switch_interval() -> None:
    callers = [
        path.relative_to(ROOT).as_posix()
        for package in ("bot", "scheduler")
        for path in sorted((ROOT / package).rglob("*.py"))
        if _sets_the_switch_interval(path)
    ]
    assert callers == [ENTRY.relative_to(ROOT).as_posix()]


def test_the_owners_table_lists_paika_ups_parts_in_their_start_order() -> None:
    from bot.up import PARTS

    rows = [line for line in (running.__doc__ or "").splitlines() if line.startswith("| ")]
    named = [row.split("|")[1].strip() for row in rows[1:]]  # less the header
    assert named == list(PARTS)
    stop_order = ", ".join(reversed(PARTS))
    assert stop_order in " ".join((running.__doc__ or "").split())
