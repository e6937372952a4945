"""A job's fingerprint, as the co-location policy reads it, from its earlier runs' profiles.

The poll keeps one profile per run (scheduler/hosts/profiles.py). A job's fingerprint is the
medians of the last runs of the same template of its team, else of its owner's runs of the
same command (storage/queries/profiles.py says which runs, and how many). A job with no such
run has none: the policy then shares its card only by its declared memory.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlmodel import Session

from scheduler.policy.colocation import Fingerprint, bandwidth, pcie
from scheduler.policy.snapshot import Snapshot
from storage.models import Job
from storage.queries import profiles as profile_queries


def fingerprint_for(session: Session, job: Job) -> Fingerprint | None:
    """`job`'s fingerprint from its earlier runs, or None when it has none."""
    figures = profile_queries.typical_figures(session=session, job=job)
    if figures is None:
        return None
    return Fingerprint(
        gpu_util=figures.gpu_util,
        gmem_util=figures.gmem_util,
        gmem_mib=figures.gmem_mib,
        pcie_mbps=figures.pcie_mbps,
    )


def with_fingerprints(session: Session, snapshot: Snapshot) -> Snapshot:
    """`snapshot` with the fingerprints of the jobs sharing decisions weigh: each pending job
    that accepts a shared card and each running job on one (the others' are never read).
    A job's is looked up once a pass, from its earlier runs."""
    wanted = {job.id for job in snapshot.pending if job.share} | {
        job.id for job in snapshot.running if job.share_gib is not None
    }
    if not wanted:
        return snapshot
    found: dict[int, Fingerprint | None] = {}
    for job_id in sorted(wanted):
        row = session.get(Job, job_id)
        found[job_id] = fingerprint_for(session, row) if row is not None else None
    return replace(
        snapshot,
        pending=tuple(
            replace(job, fingerprint=found[job.id]) if found.get(job.id) else job
            for job in snapshot.pending
        ),
        running=tuple(
            replace(job, fingerprint=found[job.id]) if found.get(job.id) else job
            for job in snapshot.running
        ),
    )


@dataclass(frozen=True, slots=True)
class CardUse:
    """A job's fingerprint as people read it (`/gpu status`, `/gpu match`): how its earlier
    runs used a card alone, and how hard that presses the card's memory bandwidth and PCIe
    (light, moderate, heavy; PCIe None when not known)."""

    sm_pct: float
    bandwidth_pct: float
    memory_gib: float
    pcie_mbps: float | None
    bandwidth: str
    pcie: str | None


def card_use(session: Session, job: Job) -> CardUse | None:
    """`job`'s fingerprint as people read it; None before any earlier run was sampled."""
    found = fingerprint_for(session, job)
    if found is None:
        return None
    return CardUse(
        sm_pct=round(found.gpu_util, 1),
        bandwidth_pct=round(found.gmem_util, 1),
        memory_gib=round(found.gmem_mib / 1024, 1),
        pcie_mbps=None if found.pcie_mbps is None else round(found.pcie_mbps),
        bandwidth=str(bandwidth(found)),
        pcie=None if found.pcie_mbps is None else str(pcie(found)),
    )
