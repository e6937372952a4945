"""trust: a version on every job (conditional updates), when a run was confirmed by its
host, and double-precision numbers on every backend

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.types

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, column, nullable): every number column; MySQL's FLOAT keeps only about 7 digits.
NUMBERS = [
    ("gpus", "memory_gib", False),
    ("gpus", "foreign_memory_gib", False),
    ("gpus", "utilization_pct", True),
    ("gpus", "memory_used_gib", False),
    ("gpu_samples", "utilization_pct", True),
    ("gpu_samples", "memory_used_gib", False),
    ("jobs", "min_memory_gib", True),
    ("jobs", "min_speed", True),
    ("jobs", "est_gpu_hours", False),
    ("quotas", "gpu_hours", False),
    ("ledger_entries", "gpu_hours", False),
    ("ledger_entries", "idle_gpu_hours", False),
    ("ledger_entries", "cost", False),
]


def _retype(to: sa.types.TypeEngine[float], from_: sa.types.TypeEngine[float]) -> None:
    tables: dict[str, list[tuple[str, bool]]] = {}
    for table, column, nullable in NUMBERS:
        tables.setdefault(table, []).append((column, nullable))
    for table, columns in tables.items():
        with op.batch_alter_table(table) as batch:
            for column, nullable in columns:
                batch.alter_column(
                    column, type_=to, existing_type=from_, existing_nullable=nullable
                )


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("version", sa.Integer(), server_default="0", nullable=False))
        batch.add_column(sa.Column("confirmed_at", storage.types.UTCDateTime(), nullable=True))
    # Runs started before this revision were taken by their hosts (a start that failed was
    # undone), so they count as confirmed.
    op.execute("UPDATE jobs SET confirmed_at = started_at WHERE state = 'running'")
    _retype(sa.Double(), sa.Float())


def downgrade() -> None:
    _retype(sa.Float(), sa.Double())
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("confirmed_at")
        batch.drop_column("version")
