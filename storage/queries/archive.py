"""What the archiver reads to hand to the object store, and how far it got (archive_marks).

Each stream is read by row id (or version) above its mark, in order and in bounded batches,
so a restart resumes where the last run stopped; the object keys are idempotent, so a batch
handed over twice is stored once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, insert, update
from sqlmodel import Session, col, select

from storage.models import (
    ArchiveMark,
    AuditEvent,
    ConfigVersion,
    Decision,
    Job,
    Team,
    TemplateVersion,
)
from storage.queries.once import insert_once


def mark(*, session: Session, stream: str) -> ArchiveMark:
    """The stream's mark (position 0 and no digest when it was never archived)."""
    found = session.get(ArchiveMark, stream)
    return found if found is not None else ArchiveMark(stream=stream, position=0)


def set_mark(
    *,
    session: Session,
    stream: str,
    position: int,
    at: datetime,
    digest: str | None = None,
) -> None:
    """Move the stream's mark (created on first use; a mark never moves back)."""
    created = insert_once(
        session,
        insert(ArchiveMark).values(stream=stream, position=position, digest=digest, at=at),
    )
    if created:
        return
    session.execute(
        update(ArchiveMark)
        .where(col(ArchiveMark.stream) == stream, col(ArchiveMark.position) <= position)
        .values(position=position, digest=digest, at=at)
    )


def config_versions_after(*, session: Session, version: int, limit: int) -> Sequence[ConfigVersion]:
    query = select(ConfigVersion).where(col(ConfigVersion.version) > version)
    return session.exec(query.order_by(col(ConfigVersion.version)).limit(limit)).all()


def template_versions_after(
    *, session: Session, row_id: int, limit: int
) -> Sequence[tuple[TemplateVersion, str]]:
    """Template versions with their team's name."""
    query = (
        select(TemplateVersion, Team.name)
        .join(Team, col(Team.id) == col(TemplateVersion.team_id))
        .where(col(TemplateVersion.id) > row_id)
        .order_by(col(TemplateVersion.id))
        .limit(limit)
    )
    return [(row, str(team)) for row, team in session.exec(query).all()]


def jobs_after(*, session: Session, job_id: int, limit: int) -> Sequence[tuple[Job, str]]:
    """Jobs submitted after `job_id`, with their team's name (for their specs)."""
    query = (
        select(Job, Team.name)
        .join(Team, col(Team.id) == col(Job.team_id))
        .where(col(Job.id) > job_id)
        .order_by(col(Job.id))
        .limit(limit)
    )
    return [(row, str(team)) for row, team in session.exec(query).all()]


def decisions_after(*, session: Session, row_id: int, limit: int) -> Sequence[Decision]:
    query = select(Decision).where(col(Decision.id) > row_id)
    return session.exec(query.order_by(col(Decision.id)).limit(limit)).all()


def audit_between(*, session: Session, start: datetime, end: datetime) -> Sequence[AuditEvent]:
    """Audit events in [start, end), oldest first."""
    query = select(AuditEvent).where(col(AuditEvent.at) >= start, col(AuditEvent.at) < end)
    return session.exec(query.order_by(col(AuditEvent.at), col(AuditEvent.id))).all()


def last_template_version_id(*, session: Session) -> int:
    """The newest template_versions row's id (0 when none)."""
    found = session.exec(select(func.max(TemplateVersion.id))).one()
    return int(found or 0)
