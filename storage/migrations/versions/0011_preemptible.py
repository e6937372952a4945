"""jobs.preemptible, jobs.preempt_grace_s, jobs.preemptions, jobs.checkpoint; ledger_entries.
lost_gpu_hours: jobs that declare they checkpoint and resume may be stopped and requeued
(their own grace, how often so far, where their checkpoint is), and the ledger keeps the
GPU-time a stop lost apart

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        # A plain "0" (false on every backend): SQLite adds such a column in place, where an
        # expression default would make it copy the table, which the rows referring to the
        # jobs forbid.
        batch_op.add_column(
            sa.Column("preemptible", sa.Boolean(), nullable=False, server_default="0")
        )
        batch_op.add_column(sa.Column("preempt_grace_s", sa.Double(), nullable=True))
        batch_op.add_column(
            sa.Column("preemptions", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(sa.Column("checkpoint", sa.String(length=500), nullable=True))
    with op.batch_alter_table("ledger_entries", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("lost_gpu_hours", sa.Double(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("ledger_entries", schema=None) as batch_op:
        batch_op.drop_column("lost_gpu_hours")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("checkpoint")
        batch_op.drop_column("preemptions")
        batch_op.drop_column("preempt_grace_s")
        batch_op.drop_column("preemptible")
