"""slack: user language, where approval messages were posted, deliveries already handled

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.types

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "slack_deliveries",
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("received_at", storage.types.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("event_id", name=op.f("pk_slack_deliveries")),
    )
    with op.batch_alter_table("slack_deliveries", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_slack_deliveries_received_at"), ["received_at"], unique=False
        )

    op.create_table(
        "user_prefs",
        sa.Column("slack_user_id", sa.String(length=32), nullable=False),
        sa.Column("language", sa.String(length=8), nullable=False),
        sa.Column("updated_at", storage.types.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("slack_user_id", name=op.f("pk_user_prefs")),
    )
    with op.batch_alter_table("bump_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("message_channel", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("message_ts", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("bump_requests", schema=None) as batch_op:
        batch_op.drop_column("message_ts")
        batch_op.drop_column("message_channel")

    op.drop_table("user_prefs")
    with op.batch_alter_table("slack_deliveries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_slack_deliveries_received_at"))

    op.drop_table("slack_deliveries")
