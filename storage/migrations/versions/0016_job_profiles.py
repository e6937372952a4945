"""job_profiles: how each run of a job used its cards (samples, mean SM and memory-controller
busy %, mean PCIe MB/s and DRAM bandwidth %, peak memory), one row per run kept up to date by
the poll, so a job's next runs can be judged by its earlier ones

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.types

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_profiles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("sm_pct", sa.Double(), nullable=True),
        sa.Column("memory_busy_pct", sa.Double(), nullable=True),
        sa.Column("memory_peak_mib", sa.Integer(), nullable=True),
        sa.Column("pcie_mbps", sa.Double(), nullable=True),
        sa.Column("dram_bw_pct", sa.Double(), nullable=True),
        sa.Column("updated_at", storage.types.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_profiles_job_id_jobs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_profiles")),
        sa.UniqueConstraint("job_id", "attempt", name="uq_job_profiles_run"),
    )
    with op.batch_alter_table("job_profiles", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_profiles_job_id"), ["job_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_job_profiles_updated_at"), ["updated_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("job_profiles", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_profiles_updated_at"))
        batch_op.drop_index(batch_op.f("ix_job_profiles_job_id"))
    op.drop_table("job_profiles")
