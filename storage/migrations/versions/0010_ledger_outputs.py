"""job_outputs; jobs.project, jobs.round, jobs.report_token, jobs.report_lines_taken,
jobs.overrun_warned_at: the output side of the ledger (what each job reported), projects and
rounds for its reports, the per-run secret a job reports with and how far its report file is
stored, and the once-per-estimate overrun notice

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.types

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_outputs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("at", storage.types.UTCDateTime(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("text", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_outputs_job_id_jobs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_outputs")),
    )
    with op.batch_alter_table("job_outputs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_outputs_job_id"), ["job_id"], unique=False)

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("project", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("round", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("report_token", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("report_lines_taken", sa.JSON(), nullable=True))
        batch_op.add_column(
            sa.Column("overrun_warned_at", storage.types.UTCDateTime(), nullable=True)
        )
        batch_op.create_index(batch_op.f("ix_jobs_project"), ["project"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_project"))
        batch_op.drop_column("overrun_warned_at")
        batch_op.drop_column("report_lines_taken")
        batch_op.drop_column("report_token")
        batch_op.drop_column("round")
        batch_op.drop_column("project")

    with op.batch_alter_table("job_outputs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_outputs_job_id"))

    op.drop_table("job_outputs")
