"""The team's memory: policy config versions, template versions, the decision log, and
how far each of them has been archived to the object store (storage/objects/)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, String, UniqueConstraint
from sqlmodel import Field, SQLModel

from storage.limits import TEMPLATE_NAME
from storage.models.base import SLACK_ID, at_field, json_field, text_field
from storage.types import name_string

# Who a version was made by when no person made it: the policy file read at start, a restore.
AUTHOR = 64


class ConfigVersion(SQLModel, table=True):
    """One version of the policy config: the whole YAML document, who made it, when and why.

    Versions are numbered 1, 2, 3 … by the writer (max + 1); two writers racing for the same
    number collide on the primary key and one of them starts over.
    """

    __tablename__ = "config_versions"

    version: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    content: str = text_field(nullable=False)
    sha256: str = Field(sa_type=String(64))
    author: str = Field(sa_type=String(AUTHOR))
    at: datetime = at_field()
    reason: str = text_field(nullable=False)
    # file (PAIKA_CONFIG read at start), set, rollback, restore
    source: str = Field(sa_type=String(16))
    # What it changed against the version before ([{key, old, new}]), or which it rolled back to.
    detail: dict[str, Any] | None = json_field()


class TemplateVersion(SQLModel, table=True):
    """Every saved version of a team's template, never rewritten: a job names the version it
    came from, so a run can be repeated exactly."""

    __tablename__ = "template_versions"
    __table_args__ = (
        UniqueConstraint("team_id", "name", "version", name="uq_template_versions_team_name"),
    )

    id: int | None = Field(default=None, primary_key=True)
    team_id: int = Field(foreign_key="teams.id", index=True)
    name: str = Field(sa_type=name_string(TEMPLATE_NAME))
    version: int
    fields: dict[str, Any] | None = json_field()
    author: str = Field(sa_type=String(SLACK_ID))
    at: datetime = at_field()


class Decision(SQLModel, table=True):
    """One line of the decision log: a start with its match, a preemption, a reservation, or
    a change of a job's wait reason (an unchanged reason is not written again)."""

    __tablename__ = "decisions"
    __table_args__ = (Index("ix_decisions_job_at", "job_id", "at"),)

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = at_field(index=True)
    job_id: int | None = None
    kind: str = Field(sa_type=String(16))
    detail: dict[str, Any] | None = json_field()


class ArchiveMark(SQLModel, table=True):
    """How far one stream has been handed to the object store: the last row id sent (config
    versions, template versions, job specs, decision lines), or the digest of the last
    snapshot written, so a restart neither skips nor repeats."""

    __tablename__ = "archive_marks"

    stream: str = Field(sa_type=String(32), primary_key=True)
    position: int = 0
    digest: str | None = Field(default=None, sa_type=String(64))
    at: datetime | None = at_field(nullable=True)
