"""Each running run's samples, kept as its profile: one row per run, updated every poll.

An agent samples what each of its running runs does to each of its cards (memory, SM busy %,
the card's memory-controller busy %, PCIe and DRAM bandwidth). The cycle takes one sample per
run and poll into that run's row (storage/queries/profiles.py): the cards of a run with more
than one are combined first (the mean per card of each busy % and of the bandwidths, the
peak memory of its fullest card), so a run's profile speaks of one card, as a fingerprint
does. Only runs of jobs that hold GPUs count: a run paika no longer holds is not profiled.

A fingerprint is how a job uses a card alone: on a card another run shares at that poll, the
card's own figures (its memory controller, PCIe and DRAM bandwidth, and its SM busy % where
the card cannot tell processes apart) are its neighbours' too, so they are left out (None: not
read); the run's own memory and its own SM busy % still count. A job that only ever ran shared
has no fingerprint yet, and runs alone until it has one, rather than look as busy as it and
its neighbour together.

A profile is what later runs are judged by, not what this one is settled by: a write that
fails (the database away, a race on a run's first row) is logged and the cycle goes on; the
next poll samples again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from statistics import fmean
from typing import Any

from sqlalchemy import Engine, Row
from sqlalchemy.exc import SQLAlchemyError

from scheduler.dispatch import agent_job_id
from scheduler.hosts.report import CardSample, HostReport
from storage.db import session_scope
from storage.queries import profiles as profile_queries
from storage.queries.profiles import RunSample

log = logging.getLogger(__name__)


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(fmean(known), 2) if known else None


def combine(cards: Sequence[CardSample]) -> RunSample:
    """One run's sample at one poll, from its cards' samples."""
    peaks = [c.memory_peak_mib if c.memory_peak_mib is not None else c.memory_mib for c in cards]
    known_peaks = [p for p in peaks if p is not None]
    return RunSample(
        sm_pct=_mean([c.sm_pct for c in cards]),
        memory_busy_pct=_mean([c.memory_busy_pct for c in cards]),
        memory_peak_mib=max(known_peaks) if known_peaks else None,
        pcie_mbps=_mean([c.pcie_mbps for c in cards]),
        dram_bw_pct=_mean([c.dram_bw_pct for c in cards]),
    )


def run_samples(reports: Mapping[str, HostReport]) -> dict[str, RunSample]:
    """Each sampled run (by its agent id) and its sample at this poll, every host's cards
    of it together."""
    cards: dict[str, list[CardSample]] = {}
    for report in reports.values():
        if not report.ok:
            continue
        runs_on: dict[int, int] = {}
        for sample in report.samples:
            runs_on[sample.gpu] = runs_on.get(sample.gpu, 0) + 1
        for sample in report.samples:
            if runs_on[sample.gpu] > 1:
                sample = _own_figures(sample)
            cards.setdefault(sample.run, []).append(sample)
    return {run: combine(samples) for run, samples in cards.items()}


def _own_figures(sample: CardSample) -> CardSample:
    """What of a sample on a shared card is the run's own: its memory, and its SM busy %
    where the card told processes apart."""
    return replace(
        sample,
        sm_pct=sample.sm_pct if sample.sm_own else None,
        memory_busy_pct=None,
        pcie_mbps=None,
        dram_bw_pct=None,
    )


def record_profiles(
    engine: Engine, reports: Mapping[str, HostReport], held: Iterable[Row[Any]], now: datetime
) -> int:
    """Add this poll's sample of every run paika holds (`held`: the on-host jobs' rows, with
    id and attempts) to its profile; how many were."""
    runs = {agent_job_id(row.id, row.attempts): (row.id, row.attempts) for row in held}
    samples = {run: s for run, s in run_samples(reports).items() if run in runs}
    if not samples:
        return 0
    try:
        with session_scope(engine) as session:
            for run, sample in samples.items():
                job_id, attempt = runs[run]
                profile_queries.add_sample(
                    session=session, job_id=job_id, attempt=attempt, sample=sample, at=now
                )
    except SQLAlchemyError as exc:
        log.warning("the runs' profiles were not updated this cycle (next poll again): %s", exc)
        return 0
    return len(samples)
