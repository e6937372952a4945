"""Job profiles: how each run used its cards, one row per run, and a job's typical figures
from its earlier runs.

The poll adds each run's sample to its row (`add_sample`): the count goes up, each mean takes
the new figure in, the peak memory keeps the most. A sample without a figure (None: the card
does not offer it, or not this time) counts as the mean so far, so a figure that comes and
goes moves its mean a little less; one no sample had stays None.

A job's earlier runs (`earlier_runs`) are those of jobs from the same template of its team,
or where its template has none yet, or it has no template, of jobs with the same owner and
the same command; its own earlier attempts count, its current run does not. Its typical
figures (`typical_figures`) are the medians of the last RECENT_RUNS such runs' figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from statistics import median
from typing import Any

from sqlmodel import Session, col, select

from storage.models import ON_HOST_STATES, Job, JobProfile

RECENT_RUNS = 5


@dataclass(frozen=True, slots=True)
class RunSample:
    """What one poll said of one run, its cards' figures already combined (SM and memory-
    controller busy %, PCIe MB/s and DRAM bandwidth %: per card; peak memory: its fullest
    card's). None: not read."""

    sm_pct: float | None = None
    memory_busy_pct: float | None = None
    memory_peak_mib: int | None = None
    pcie_mbps: float | None = None
    dram_bw_pct: float | None = None


@dataclass(frozen=True, slots=True)
class TypicalFigures:
    """A job's typical use of one card, the medians of its recent runs' figures: SM busy %,
    memory-controller busy %, peak memory (MiB), PCIe MB/s (None: no run had it)."""

    gpu_util: float
    gmem_util: float
    gmem_mib: float
    pcie_mbps: float | None
    runs: int  # how many runs they come from


def _mean(mean: float | None, value: float | None, count: int) -> float | None:
    """The running mean after the `count`-th sample (`value` None: as the mean so far)."""
    if value is None:
        return mean
    if mean is None:
        return float(value)
    return mean + (value - mean) / count


def profile_of(*, session: Session, job_id: int, attempt: int) -> JobProfile | None:
    """The row of one run, or None before its first sample."""
    query = select(JobProfile).where(
        col(JobProfile.job_id) == job_id, col(JobProfile.attempt) == attempt
    )
    return session.exec(query).first()


def add_sample(
    *, session: Session, job_id: int, attempt: int, sample: RunSample, at: datetime
) -> JobProfile:
    """Take one poll's sample of a run into its row (made at its first sample)."""
    row = profile_of(session=session, job_id=job_id, attempt=attempt)
    if row is None:
        row = JobProfile(job_id=job_id, attempt=attempt, samples=0, updated_at=at)
        session.add(row)
    count = row.samples + 1
    row.sm_pct = _mean(row.sm_pct, sample.sm_pct, count)
    row.memory_busy_pct = _mean(row.memory_busy_pct, sample.memory_busy_pct, count)
    row.pcie_mbps = _mean(row.pcie_mbps, sample.pcie_mbps, count)
    row.dram_bw_pct = _mean(row.dram_bw_pct, sample.dram_bw_pct, count)
    peaks = [p for p in (row.memory_peak_mib, sample.memory_peak_mib) if p is not None]
    row.memory_peak_mib = max(peaks) if peaks else None
    row.samples, row.updated_at = count, at
    return row


def _runs_where(session: Session, job: Job, *where: Any) -> list[JobProfile]:
    query = (
        select(JobProfile)
        .join(Job, col(Job.id) == col(JobProfile.job_id))
        .where(*where, col(JobProfile.samples) > 0)
        .order_by(col(JobProfile.updated_at).desc(), col(JobProfile.id).desc())
    )
    current = (job.id, job.attempts) if job.state in ON_HOST_STATES else None
    runs = [row for row in session.exec(query) if (row.job_id, row.attempt) != current]
    return runs[:RECENT_RUNS]


def earlier_runs(*, session: Session, job: Job) -> list[JobProfile]:
    """The last RECENT_RUNS runs, newest first, that `job`'s next run is judged by."""
    if job.template is not None:
        same_template = _runs_where(
            session, job, col(Job.team_id) == job.team_id, col(Job.template) == job.template
        )
        if same_template:
            return same_template
    return _runs_where(session, job, col(Job.owner) == job.owner, col(Job.command) == job.command)


def _median(values: Sequence[float | int | None]) -> float | None:
    known = [float(v) for v in values if v is not None]
    return median(known) if known else None


def typical_figures(*, session: Session, job: Job) -> TypicalFigures | None:
    """The medians of the figures of `job`'s earlier runs; None with no run that had its SM
    and memory-controller busy % and its memory."""
    runs = earlier_runs(session=session, job=job)
    gpu_util = _median([r.sm_pct for r in runs])
    gmem_util = _median([r.memory_busy_pct for r in runs])
    gmem_mib = _median([r.memory_peak_mib for r in runs])
    if gpu_util is None or gmem_util is None or gmem_mib is None:
        return None
    pcie = _median([r.pcie_mbps for r in runs])
    return TypicalFigures(gpu_util, gmem_util, gmem_mib, pcie, len(runs))
