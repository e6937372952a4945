"""unix_accounts: the Unix account a person's or a team's jobs run as on GPU hosts; jobs.account:
the account a job was submitted to run as; hosts.token_revocation_sent_at: when the host's
agent was told to refuse its revoked token

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.types

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "unix_accounts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("subject_kind", sa.String(length=8), nullable=False),
        sa.Column("subject", sa.String(length=64), nullable=False),
        sa.Column("account", sa.String(length=32), nullable=False),
        sa.Column("set_by", sa.String(length=32), nullable=False),
        sa.Column("set_at", storage.types.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("subject_kind", "subject"),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("account", sa.String(length=32), nullable=True))
    with op.batch_alter_table("hosts", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("token_revocation_sent_at", storage.types.UTCDateTime(), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("hosts", schema=None) as batch_op:
        batch_op.drop_column("token_revocation_sent_at")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("account")
    op.drop_table("unix_accounts")
