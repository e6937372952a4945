"""share_apart: pairs of jobs never to share a card again, because on one one of them ran too
slowly beside the other (the lower job id first; why as a reason's code and its values)

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.types

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "share_apart",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_a", sa.Integer(), nullable=False),
        sa.Column("job_b", sa.Integer(), nullable=False),
        sa.Column("at", storage.types.UTCDateTime(), nullable=False),
        sa.Column("reason_code", sa.String(length=48), nullable=False),
        sa.Column("reason_values", sa.JSON(), nullable=True),
        sa.CheckConstraint("job_a < job_b", name=op.f("ck_share_apart_pair_ordered")),
        sa.ForeignKeyConstraint(["job_a"], ["jobs.id"], name=op.f("fk_share_apart_job_a_jobs")),
        sa.ForeignKeyConstraint(["job_b"], ["jobs.id"], name=op.f("fk_share_apart_job_b_jobs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_share_apart")),
        sa.UniqueConstraint("job_a", "job_b", name="uq_share_apart_pair"),
    )
    with op.batch_alter_table("share_apart", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_share_apart_job_a"), ["job_a"], unique=False)
        batch_op.create_index(batch_op.f("ix_share_apart_job_b"), ["job_b"], unique=False)


def downgrade() -> None:
    # The table's indexes go with it: MariaDB refuses to drop one a foreign key needs
    # (job_b's) while the table stands.
    op.drop_table("share_apart")
