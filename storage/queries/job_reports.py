"""What jobs reported of themselves (job_outputs), and how far each run's report file was taken."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, func, select

from storage.models import Job, JobOutput
from storage.models.jobs import OutputKind


def outputs_of(*, session: Session, job_id: int) -> Sequence[JobOutput]:
    """Every output row of a job, oldest first."""
    query = select(JobOutput).where(JobOutput.job_id == job_id).order_by(col(JobOutput.id))
    return session.exec(query).all()


def latest_status(*, session: Session, job_id: int, attempt: int) -> str | None:
    """The verdict a run last reported of itself (`succeeded` or `failed`), None if none."""
    query = (
        select(JobOutput.text)
        .where(
            JobOutput.job_id == job_id,
            JobOutput.attempt == attempt,
            JobOutput.kind == OutputKind.STATUS.value,
            JobOutput.name == "status",
        )
        .order_by(col(JobOutput.id).desc())
        .limit(1)
    )
    return session.exec(query).first()


def last_artefact_at(*, session: Session, job_id: int, attempt: int, name: str) -> datetime | None:
    """When a run last reported an artefact labelled `name` (its checkpoint), None if never."""
    query = (
        select(JobOutput.at)
        .where(
            JobOutput.job_id == job_id,
            JobOutput.attempt == attempt,
            JobOutput.kind == OutputKind.ARTEFACT.value,
            JobOutput.name == name,
        )
        .order_by(col(JobOutput.at).desc(), col(JobOutput.id).desc())
        .limit(1)
    )
    return session.exec(query).first()


def lines_taken(*, session: Session, job_ids: Sequence[int]) -> Sequence[tuple[int, int, Any]]:
    """(job id, current attempt, report_lines_taken) of each job: how far its run's report
    file is stored."""
    if not job_ids:
        return []
    query = select(Job.id, Job.attempts, Job.report_lines_taken).where(col(Job.id).in_(job_ids))
    return [(int(i or 0), int(a), taken) for i, a, taken in session.exec(query).all()]


def rows_of_run(*, session: Session, job_id: int, attempt: int) -> int:
    """How many output rows one run of a job has stored."""
    query = select(func.count()).where(JobOutput.job_id == job_id, JobOutput.attempt == attempt)
    return int(session.exec(query).one())
