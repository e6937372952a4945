"""Template versions: every save of a team's template, kept and never rewritten.

The templates row holds the latest fields and their version number; template_versions holds
every version (the latest too). A save writes a new version row and moves the templates row
on only if its version is still the one the writer read, so of two saves racing one wins
and the other loses (StaleDataError, or the unique key on the version) and is run again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, update
from sqlalchemy.orm.exc import StaleDataError
from sqlmodel import Session, col, select

from storage.models import Template, TemplateVersion
from storage.queries.names import spellings


def _spellings(session: Session, team_id: int, name: str) -> list[str]:
    return spellings(
        session, col(TemplateVersion.name), name, col(TemplateVersion.team_id) == team_id
    )


def last_version(*, session: Session, team_id: int, name: str) -> int:
    """The highest version ever saved of a team's template by this name (0 for none): a
    template deleted and saved again goes on from there, so no number means two things."""
    query = select(func.max(TemplateVersion.version)).where(
        TemplateVersion.team_id == team_id,
        col(TemplateVersion.name).in_(_spellings(session, team_id, name)),
    )
    return int(session.exec(query).one() or 0)


def add_version(
    *,
    session: Session,
    team_id: int,
    name: str,
    version: int,
    fields: dict[str, Any],
    author: str,
    at: datetime,
) -> TemplateVersion:
    """Keep one version of a template (flushed, so a taken number fails here)."""
    row = TemplateVersion(
        team_id=team_id, name=name, version=version, fields=fields, author=author, at=at
    )
    session.add(row)
    session.flush()
    return row


def advance(
    *,
    session: Session,
    template: Template,
    read_version: int,
    version: int,
    fields: dict[str, Any],
    at: datetime,
) -> None:
    """Move a stored template on to `version` with `fields`, only if it is still at
    `read_version`; StaleDataError when another save got there first."""
    statement = (
        update(Template)
        .where(col(Template.id) == template.id, col(Template.version) == read_version)
        .values(fields=fields, version=version, updated_at=at)
        .execution_options(synchronize_session=False)
    )
    if not session.execute(statement).rowcount:  # type: ignore[attr-defined]
        raise StaleDataError(f"template {template.name!r} moved on from v{read_version}")
    session.refresh(template)


def versions(*, session: Session, team_id: int, name: str) -> Sequence[TemplateVersion]:
    """A template's versions, newest first."""
    query = (
        select(TemplateVersion)
        .where(
            TemplateVersion.team_id == team_id,
            col(TemplateVersion.name).in_(_spellings(session, team_id, name)),
        )
        .order_by(col(TemplateVersion.version).desc())
    )
    return session.exec(query).all()


def version(*, session: Session, team_id: int, name: str, number: int) -> TemplateVersion | None:
    """One version of a template, if it was ever saved."""
    query = select(TemplateVersion).where(
        TemplateVersion.team_id == team_id,
        col(TemplateVersion.name).in_(_spellings(session, team_id, name)),
        TemplateVersion.version == number,
    )
    return session.exec(query).first()
