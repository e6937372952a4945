"""The audit trail: every change, who made it, and to what."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import String
from sqlmodel import Field, SQLModel

from storage.models.base import SLACK_ID, at_field, json_field


class AuditEvent(SQLModel, table=True):
    """One change made by a user or by the scheduler."""

    __tablename__ = "audit_events"

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = at_field(index=True)
    actor: str = Field(sa_type=String(SLACK_ID), index=True)
    action: str = Field(sa_type=String(64))
    target_kind: str = Field(sa_type=String(32))
    target_id: str = Field(sa_type=String(64))
    detail: dict[str, Any] | None = json_field()
