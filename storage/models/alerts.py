"""Alerts paika sends on its own (quota expiry and use, idle GPUs, the daily digest).

Each alert has a key that names the one occasion it is for (e.g. `quota-expiry:12:7d`),
so however many times a check runs, on however many instances, an occasion is claimed
once. The row is written before the message is sent and marked sent after, so an alert
whose sending failed is retried rather than lost.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import String
from sqlmodel import Field, SQLModel

from storage.models.base import SLACK_ID, at_field, json_field


class Alert(SQLModel, table=True):
    """One occasion to tell someone something, claimed once."""

    __tablename__ = "alerts"

    key: str = Field(sa_type=String(200), primary_key=True)
    kind: str = Field(sa_type=String(32), index=True)
    subject: str = Field(sa_type=String(64))  # what it is about: a quota id, a job id, a date
    created_at: datetime = at_field(index=True)
    sent_at: datetime | None = at_field(nullable=True)
    attempts: int = 0  # sending attempts that failed
    # For alerts with buttons (acknowledge, still using / release): the first answer wins.
    answer: str | None = Field(default=None, sa_type=String(32))
    answered_by: str | None = Field(default=None, sa_type=String(SLACK_ID))
    answered_at: datetime | None = at_field(nullable=True)
    detail: dict[str, Any] | None = json_field()
