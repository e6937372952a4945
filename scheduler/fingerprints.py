"""A job's fingerprint, as the co-location policy reads it, from its earlier runs' profiles.

The poll keeps one profile per run (scheduler/hosts/profiles.py). A job's fingerprint is the
medians of the last runs of the same template of its team, else of its owner's runs of the
same command (storage/queries/profiles.py says which runs, and how many). A job with no such
run has none: the policy then shares its card only by its declared memory.
"""

from __future__ import annotations

from dataclasses import replace

from sqlmodel import Session

from scheduler.policy.colocation import Fingerprint
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
