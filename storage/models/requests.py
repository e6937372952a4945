"""Slack requests already seen, so a replayed one is acknowledged and does nothing."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlmodel import Field, SQLModel

from storage.models.base import at_field

# A SHA-256 digest in hex.
DIGEST = 64


class SeenRequest(SQLModel, table=True):
    """One signed request (or Socket Mode envelope) taken on, by any paika instance."""

    __tablename__ = "seen_requests"

    # The SHA-256 of what makes the request unique (its X-Slack-Signature): the signature
    # covers the timestamp and the body, so a replay carries the same one.
    key: str = Field(sa_type=String(DIGEST), primary_key=True)
    seen_at: datetime = at_field(index=True)  # old rows are purged by this
