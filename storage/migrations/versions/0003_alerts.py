"""alerts: occasions claimed once (quota expiry and use, idle GPUs, the daily digest);
idle GPU-hours in the ledger

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.types

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("subject", sa.String(length=64), nullable=False),
        sa.Column("created_at", storage.types.UTCDateTime(), nullable=False),
        sa.Column("sent_at", storage.types.UTCDateTime(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("answer", sa.String(length=32), nullable=True),
        sa.Column("answered_by", sa.String(length=32), nullable=True),
        sa.Column("answered_at", storage.types.UTCDateTime(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_alerts")),
    )
    with op.batch_alter_table("alerts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_alerts_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_alerts_kind"), ["kind"], unique=False)
    with op.batch_alter_table("ledger_entries", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("idle_gpu_hours", sa.Float(), server_default="0", nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("ledger_entries", schema=None) as batch_op:
        batch_op.drop_column("idle_gpu_hours")
    with op.batch_alter_table("alerts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_alerts_kind"))
        batch_op.drop_index(batch_op.f("ix_alerts_created_at"))
    op.drop_table("alerts")
