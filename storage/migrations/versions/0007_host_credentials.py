"""hosts: each host's own agent token (its generation and SHA-256, when it was issued,
rotated or revoked and by whom), why its last poll failed, and whether it failed on trust

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-10
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.types

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("hosts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("last_error", sa.String(length=300), nullable=True))
        batch_op.add_column(
            sa.Column("untrusted", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(
            sa.Column("token_generation", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(sa.Column("token_salt", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("token_sha256", sa.String(length=64), nullable=True))
        batch_op.add_column(
            sa.Column("token_issued_at", storage.types.UTCDateTime(), nullable=True)
        )
        batch_op.add_column(
            sa.Column("token_rotated_at", storage.types.UTCDateTime(), nullable=True)
        )
        batch_op.add_column(
            sa.Column("token_revoked_at", storage.types.UTCDateTime(), nullable=True)
        )
        batch_op.add_column(sa.Column("token_changed_by", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hosts", schema=None) as batch_op:
        for name in (
            "token_changed_by",
            "token_revoked_at",
            "token_rotated_at",
            "token_issued_at",
            "token_sha256",
            "token_salt",
            "token_generation",
            "untrusted",
            "last_error",
        ):
            batch_op.drop_column(name)
