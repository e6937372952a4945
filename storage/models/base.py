"""Shared column helpers and the naming convention every constraint follows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Double, MetaData, Text
from sqlmodel import Field, SQLModel

from storage.limits import SLACK_ID as SLACK_ID  # re-exported: models import it from here
from storage.types import UTCDateTime

# Length of a reason's code beside its text (jobs.state_reason_code, job_events.reason_code,
# matches.reason_code, bump_requests.decision_reason_code): a code of
# scheduler.policy.reasons, never typed by a person.
REASON_CODE = 48

# Named constraints make migrations reproducible on every backend (MySQL needs names).
SQLModel.metadata.naming_convention = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
metadata: MetaData = SQLModel.metadata


def at_field(*, nullable: bool = False, index: bool = False) -> Any:
    """A timezone-aware UTC timestamp column."""
    return Field(default=None, sa_type=UTCDateTime, nullable=nullable, index=index)


def text_field(*, nullable: bool = True) -> Any:
    """An unbounded text column (commands, reasons)."""
    return Field(default=None, sa_type=Text, nullable=nullable)


def number_field(
    *, default: float | None = None, nullable: bool = False, server_default: str | None = None
) -> Any:
    """A double-precision number (MySQL's FLOAT is single precision: 12.3456789 → 12.3457)."""
    kwargs = {"server_default": server_default} if server_default is not None else {}
    return Field(default=default, sa_type=Double, nullable=nullable, sa_column_kwargs=kwargs)


def json_field() -> Any:
    """A JSON column; None when absent."""
    return Field(default=None, sa_type=JSON, nullable=True)


def utc_required(value: datetime | None) -> datetime:
    """Narrow a timestamp that the schema declares NOT NULL."""
    if value is None:
        raise ValueError("timestamp missing")
    return value
