"""start_holds: a host that refuses a job's start for good (its agent's 403) is not sent
that job again until something changes; each refusal is kept, with what released it

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.types

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "start_holds",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=64), nullable=False),
        sa.Column("at", storage.types.UTCDateTime(), nullable=False),
        sa.Column("refusal", sa.String(length=32), nullable=False),
        sa.Column("problem", sa.Text(), nullable=True),
        sa.Column("account", sa.String(length=32), nullable=True),
        sa.Column("host_seen", sa.String(length=100), nullable=True),
        sa.Column("released_at", storage.types.UTCDateTime(), nullable=True),
        sa.Column("released_why", sa.String(length=32), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_start_holds_job_id_jobs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_start_holds")),
    )
    with op.batch_alter_table("start_holds", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_start_holds_job_id"), ["job_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("start_holds", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_start_holds_job_id"))
    op.drop_table("start_holds")
