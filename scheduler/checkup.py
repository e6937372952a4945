"""What `paika doctor` finds, as plain values, and what the running service last found.

Findings are codes with values (bot/doctor_words.py says them). `paika up` runs the doctor's
checks as it starts and again now and then; it keeps the last result here, in the process,
so the board can show its admins what stands between them and a working queue without
asking every agent again for each reply. Nothing here does I/O: replies that read it stay
quick and load nothing of the network's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    OK = "ok"
    WARN = "warn"
    BLOCK = "block"


@dataclass(frozen=True)
class Finding:
    """One thing the doctor found: `code` names it (and its words), `values` what it names."""

    code: str
    severity: Severity
    values: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity.value, "values": self.values}


def blocks(findings: Iterable[Finding]) -> bool:
    """Whether any finding stops paika from working until it is fixed."""
    return any(f.severity is Severity.BLOCK for f in findings)


@dataclass(frozen=True)
class Checkup:
    """The doctor's findings that are not fine, and when they were found."""

    at: datetime
    findings: tuple[Finding, ...]


_lock = threading.Lock()
_last: Checkup | None = None


def remember(findings: Iterable[Finding], at: datetime) -> Checkup:
    """Keep the findings of the checks just run (only those that are not fine)."""
    global _last
    checkup = Checkup(at, tuple(f for f in findings if f.severity is not Severity.OK))
    with _lock:
        _last = checkup
    return checkup


def last() -> Checkup | None:
    """What this process's checks last found (None: it has run none, as in `paika cmd`)."""
    with _lock:
        return _last


def forget() -> None:
    """Forget the last checkup (a service that stops; tests)."""
    global _last
    with _lock:
        _last = None
