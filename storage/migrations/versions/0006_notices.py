"""notices: the one outbox for every notice (job and host events, approvals, alerts, the
digest), with a sender's lease and a time for the next attempt; the alerts move into it

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.types

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEPT = (
    "key",
    "kind",
    "subject",
    "created_at",
    "sent_at",
    "attempts",
    "answer",
    "answered_by",
    "answered_at",
    "detail",
)


def _copy(source: str, target: str) -> None:
    """Copy the kept columns (built with SQLAlchemy, so `key` is quoted on MySQL too)."""
    source_table = sa.table(source, *[sa.column(name) for name in KEPT])
    target_table = sa.table(target, *[sa.column(name) for name in KEPT])
    rows = sa.select(*[source_table.c[name] for name in KEPT])
    op.execute(sa.insert(target_table).from_select(list(KEPT), rows))


def upgrade() -> None:
    op.create_table(
        "notices",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("subject", sa.String(length=64), nullable=False),
        sa.Column("created_at", storage.types.UTCDateTime(), nullable=False),
        sa.Column("sent_at", storage.types.UTCDateTime(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", storage.types.UTCDateTime(), nullable=True),
        sa.Column("taken_until", storage.types.UTCDateTime(), nullable=True),
        sa.Column("answer", sa.String(length=32), nullable=True),
        sa.Column("answered_by", sa.String(length=32), nullable=True),
        sa.Column("answered_at", storage.types.UTCDateTime(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_notices")),
    )
    with op.batch_alter_table("notices", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_notices_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_notices_kind"), ["kind"], unique=False)
        batch_op.create_index(batch_op.f("ix_notices_sent_at"), ["sent_at"], unique=False)
    # Every alert keeps its key, its answer and whether it was sent.
    _copy("alerts", "notices")
    with op.batch_alter_table("alerts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_alerts_kind"))
        batch_op.drop_index(batch_op.f("ix_alerts_created_at"))
    op.drop_table("alerts")


def downgrade() -> None:
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
    _copy("notices", "alerts")
    with op.batch_alter_table("notices", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_notices_sent_at"))
        batch_op.drop_index(batch_op.f("ix_notices_kind"))
        batch_op.drop_index(batch_op.f("ix_notices_created_at"))
    op.drop_table("notices")
