"""jobs.array_*: one job of an array (count=, sweep=): the array's number, its place in it,
how many there are and may run at once, its sweep values, and when the whole array's end was
told

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.types

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("array_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("array_index", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("array_size", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("array_max_running", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("array_values", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("array_told_at", storage.types.UTCDateTime(), nullable=True))
        batch_op.create_index(batch_op.f("ix_jobs_array_id"), ["array_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_array_id"))
        batch_op.drop_column("array_told_at")
        batch_op.drop_column("array_values")
        batch_op.drop_column("array_max_running")
        batch_op.drop_column("array_size")
        batch_op.drop_column("array_index")
        batch_op.drop_column("array_id")
