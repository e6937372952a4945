"""job_dependencies: jobs that wait for other jobs (after=, afterany=, data=after:), each
row's state (waiting, met, broken, released) and when the dependant's owner was told

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.types

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_dependencies",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("upstream_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("state", sa.String(length=8), nullable=False),
        sa.Column("settled_at", storage.types.UTCDateTime(), nullable=True),
        sa.Column("settled_by", sa.String(length=32), nullable=True),
        sa.Column("told_at", storage.types.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_dependencies_job_id_jobs")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_dependencies")),
        sa.UniqueConstraint("job_id", "upstream_id", name="uq_job_dependencies_pair"),
    )
    with op.batch_alter_table("job_dependencies", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_dependencies_job_id"), ["job_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_job_dependencies_upstream_id"), ["upstream_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_job_dependencies_state"), ["state"], unique=False)


def downgrade() -> None:
    # The indexes go with the table (MariaDB keeps those a foreign key needs while it stands).
    op.drop_table("job_dependencies")
