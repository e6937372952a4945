"""The outbox: every notice paika sends people (job started, finished, failed, unknown …;
hosts down and back; bump requests and decisions; quota and idle-GPU alerts; the digest).

A notice is written in the same transaction as the change that caused it, so a crash or a
Slack outage between the change and the message loses nothing. Each has a key naming the
one occasion it is for (e.g. `quota-expiry:12:7d`, or one event of one job), so however
many times a check runs, on however many instances, an occasion is claimed once. A sender
takes a notice for a short lease before sending it and marks it sent after; a failed
sending is tried again later, further apart each time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import String
from sqlmodel import Field, SQLModel

from storage.models.base import SLACK_ID, at_field, json_field


class Notice(SQLModel, table=True):
    """One occasion to tell someone something, claimed once, delivered once."""

    __tablename__ = "notices"

    key: str = Field(sa_type=String(200), primary_key=True)
    kind: str = Field(sa_type=String(32), index=True)
    subject: str = Field(sa_type=String(64))  # what it is about: a quota id, a job id, a date
    created_at: datetime = at_field(index=True)
    sent_at: datetime | None = at_field(nullable=True, index=True)
    attempts: int = 0  # sending attempts that failed
    next_attempt_at: datetime | None = at_field(nullable=True)  # after a failure: not before
    taken_until: datetime | None = at_field(nullable=True)  # a sender's lease while it sends
    # For notices with buttons (acknowledge, still using / release): the first answer wins.
    answer: str | None = Field(default=None, sa_type=String(32))
    answered_by: str | None = Field(default=None, sa_type=String(SLACK_ID))
    answered_at: datetime | None = at_field(nullable=True)
    detail: dict[str, Any] | None = json_field()
