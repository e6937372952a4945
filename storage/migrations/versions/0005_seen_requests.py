"""seen_requests: signed Slack requests already taken on, so a replay does nothing

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.types

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "seen_requests",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("seen_at", storage.types.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_seen_requests")),
    )
    with op.batch_alter_table("seen_requests", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_seen_requests_seen_at"), ["seen_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("seen_requests", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_seen_requests_seen_at"))
    op.drop_table("seen_requests")
