"""How each run of a job used its cards: one row per run, kept up to date as it runs."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import UniqueConstraint
from sqlmodel import Field, SQLModel

from storage.models.base import at_field, number_field


class JobProfile(SQLModel, table=True):
    """One run (a job's attempt) as its host's agent sampled it, poll after poll: how many
    samples, the means of its SM busy %, memory-controller busy %, PCIe MB/s and DRAM
    bandwidth %, and its peak memory on one card. Updated in place, never a row per poll; a
    figure no sample had is None. A job's next runs are judged by its earlier ones."""

    __tablename__ = "job_profiles"
    __table_args__ = (UniqueConstraint("job_id", "attempt", name="uq_job_profiles_run"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", index=True)
    attempt: int
    samples: int = 0
    sm_pct: float | None = number_field(nullable=True)
    memory_busy_pct: float | None = number_field(nullable=True)
    memory_peak_mib: int | None = None
    pcie_mbps: float | None = number_field(nullable=True)
    dram_bw_pct: float | None = number_field(nullable=True)
    updated_at: datetime = at_field(index=True)
