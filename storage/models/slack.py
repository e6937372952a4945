"""What the Slack bot keeps besides the scheduler's own tables."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlmodel import Field, SQLModel

from storage.models.base import at_field


class SlackDelivery(SQLModel, table=True):
    """An Events API delivery already taken on, so retries and other instances skip it."""

    __tablename__ = "slack_deliveries"

    event_id: str = Field(sa_type=String(64), primary_key=True)
    received_at: datetime = at_field(index=True)  # old rows are pruned by this
