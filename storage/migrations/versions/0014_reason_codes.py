"""jobs.state_reason_code / state_reason_values, job_events.reason_code / reason_values,
matches.reason_code / reason_values, bump_requests.decision_reason_code /
decision_reason_values: each reason paika gives a reader is also kept as a code and the values
it names, so every face says it in its reader's language (the English text stays beside it;
rows from before have none and are shown as stored)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, prefix of its two new columns)
REASONS = (
    ("jobs", "state_reason"),
    ("job_events", "reason"),
    ("matches", "reason"),
    ("bump_requests", "decision_reason"),
)


def upgrade() -> None:
    for table, prefix in REASONS:
        # Nullable, no default: SQLite adds each in place, and old rows read as "no code".
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column(f"{prefix}_code", sa.String(length=48), nullable=True))
            batch_op.add_column(sa.Column(f"{prefix}_values", sa.JSON(), nullable=True))


def downgrade() -> None:
    for table, prefix in reversed(REASONS):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column(f"{prefix}_values")
            batch_op.drop_column(f"{prefix}_code")
