"""team_reservations: cards booked ahead for a team (how many of which type, from, until,
why, who), cancelled or not

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.types

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "team_reservations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("gpu_type", sa.String(length=64), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("starts_at", storage.types.UTCDateTime(), nullable=False),
        sa.Column("ends_at", storage.types.UTCDateTime(), nullable=False),
        sa.Column("reason", sa.String(length=500), nullable=False),
        sa.Column("created_by", sa.String(length=32), nullable=False),
        sa.Column("created_at", storage.types.UTCDateTime(), nullable=False),
        sa.Column("cancelled_at", storage.types.UTCDateTime(), nullable=True),
        sa.Column("cancelled_by", sa.String(length=32), nullable=True),
        sa.CheckConstraint(
            "starts_at < ends_at", name=op.f("ck_team_reservations_starts_before_it_ends")
        ),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_team_reservations_team_id_teams")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_team_reservations")),
    )
    with op.batch_alter_table("team_reservations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_team_reservations_team_id"), ["team_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_team_reservations_starts_at"), ["starts_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_team_reservations_ends_at"), ["ends_at"], unique=False)


def downgrade() -> None:
    # The indexes go with the table (MariaDB keeps those a foreign key needs while it stands).
    op.drop_table("team_reservations")
