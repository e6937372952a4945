"""maintenance_windows: a host's planned maintenance (from, until, why, who), cancelled or
not, and when paika stopped what still ran there at its start

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.types

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "maintenance_windows",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=64), nullable=False),
        sa.Column("starts_at", storage.types.UTCDateTime(), nullable=False),
        sa.Column("ends_at", storage.types.UTCDateTime(), nullable=False),
        sa.Column("reason", sa.String(length=500), nullable=False),
        sa.Column("created_by", sa.String(length=32), nullable=False),
        sa.Column("created_at", storage.types.UTCDateTime(), nullable=False),
        sa.Column("cancelled_at", storage.types.UTCDateTime(), nullable=True),
        sa.Column("cancelled_by", sa.String(length=32), nullable=True),
        sa.Column("stopped_at", storage.types.UTCDateTime(), nullable=True),
        sa.CheckConstraint(
            "starts_at < ends_at", name=op.f("ck_maintenance_windows_starts_before_it_ends")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_maintenance_windows")),
    )
    with op.batch_alter_table("maintenance_windows", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_maintenance_windows_host"), ["host"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_maintenance_windows_starts_at"), ["starts_at"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_maintenance_windows_ends_at"), ["ends_at"], unique=False
        )


def downgrade() -> None:
    op.drop_table("maintenance_windows")
