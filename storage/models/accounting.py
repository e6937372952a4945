"""Quotas granted to teams, and the ledger of what was spent."""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import String
from sqlmodel import Field, SQLModel

from storage.limits import GPU_TYPE
from storage.models.base import SLACK_ID, at_field, number_field, text_field


class Quota(SQLModel, table=True):
    """GPU-hours granted to a team on one GPU type (None: any type) until `expires_on`."""

    __tablename__ = "quotas"

    id: int | None = Field(default=None, primary_key=True)
    team_id: int = Field(foreign_key="teams.id", index=True)
    gpu_type: str | None = Field(default=None, sa_type=String(GPU_TYPE))
    gpu_hours: float = number_field()
    expires_on: date
    owner: str = Field(sa_type=String(SLACK_ID))
    note: str | None = text_field()
    # GPU-hours used before a restore from a snapshot: the ledger entries that charged them
    # stayed in the install the snapshot came from (scheduler/archive/state.py).
    carried_hours: float = number_field(default=0.0, server_default="0")
    created_by: str = Field(sa_type=String(SLACK_ID))
    created_at: datetime = at_field()


class LedgerEntry(SQLModel, table=True):
    """GPU-hours and their cost, charged to a team (and a quota) for one stretch of a job."""

    __tablename__ = "ledger_entries"

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", index=True)
    allocation_id: int | None = Field(default=None, foreign_key="allocations.id")
    team_id: int = Field(foreign_key="teams.id", index=True)
    quota_id: int | None = Field(default=None, foreign_key="quotas.id", index=True)
    gpu_type: str = Field(sa_type=String(GPU_TYPE))
    gpu_hours: float = number_field()
    # Of gpu_hours, the time the GPU sat below the idle threshold (from the samples).
    idle_gpu_hours: float = number_field(default=0.0, server_default="0")
    # Of gpu_hours, the work a preemption threw away: the time since the last checkpoint the
    # job reported in this stretch (all of it when it reported none); 0 for other stretches.
    lost_gpu_hours: float = number_field(default=0.0, server_default="0")
    cost: float = number_field()
    started_at: datetime = at_field()
    ended_at: datetime = at_field()
    recorded_at: datetime = at_field(index=True)
