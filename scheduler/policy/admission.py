"""Admission: is the queue already deeper than the cluster can work off soon?

Backlog = estimated GPU-hours of all jobs waiting ÷ GPUs in the cluster = hours of the
whole cluster's capacity already promised. Past `max_backlog_hours`, a non-core submission
is warned (or deferred, if so configured); core work is always admitted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class Verdict(StrEnum):
    """What admission says of a submission."""

    ADMIT = "admit"
    WARN = "warn"
    DEFER = "defer"


@dataclass(frozen=True, slots=True)
class Admission:
    """The verdict and the figures behind it."""

    verdict: Verdict
    backlog_hours: float
    max_backlog_hours: float


def admit(
    priority: str,
    waiting_gpu_hours: Iterable[float],
    cluster_gpus: int,
    *,
    max_backlog_hours: float,
    action: str,
) -> Admission:
    """Admission of one submission of class `priority` given the work already waiting."""
    backlog = sum(waiting_gpu_hours) / cluster_gpus if cluster_gpus else 0.0
    if priority == "core" or backlog <= max_backlog_hours or cluster_gpus == 0:
        return Admission(Verdict.ADMIT, backlog, max_backlog_hours)
    verdict = Verdict.DEFER if action == "defer" else Verdict.WARN
    return Admission(verdict, backlog, max_backlog_hours)
