"""What jobs reported of themselves (job_outputs), and how far each run's report file was taken."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlmodel import Session, col, select

from storage.models import AuditEvent, JobOutput
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


def file_lines_taken(
    *, session: Session, job_ids: Sequence[int], action: str
) -> Mapping[tuple[int, int, str], int]:
    """(job id, attempt, host) → the number of the last report-file line taken, read from
    the audit records of each taking (actor `job:<id>`; `detail`: attempt, host, last)."""
    if not job_ids:
        return {}
    # By actor (the job itself: `job:<id>`), which is indexed: the audit trail only grows.
    query = select(AuditEvent.target_id, AuditEvent.detail).where(
        col(AuditEvent.actor).in_([f"job:{job_id}" for job_id in job_ids]),
        AuditEvent.action == action,
        AuditEvent.target_kind == "job",
    )
    taken: dict[tuple[int, int, str], int] = {}
    for target_id, detail in session.exec(query).all():
        if not isinstance(detail, dict):
            continue
        try:
            key = (int(target_id), int(detail["attempt"]), str(detail["host"]))
            last = int(detail["last"])
        except (KeyError, TypeError, ValueError):
            continue
        taken[key] = max(taken.get(key, 0), last)
    return taken
