"""Names people choose are compared byte for byte on MySQL and MariaDB (utf8mb4_bin), so
"équipe" and "equipe", or 𠀀组 and 𠀁组, are two teams there as on SQLite and PostgreSQL

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, column, length, nullable) of every column that holds a name people choose.
NAMES = (
    ("teams", "name", 64, False),
    ("jobs", "name", 64, False),
    ("jobs", "template", 64, True),
    ("jobs", "project", 64, True),
    ("jobs", "round", 32, True),
    ("templates", "name", 64, False),
    ("template_versions", "name", 64, False),
)


def _collate(collation: str) -> None:
    if op.get_bind().dialect.name != "mysql":  # SQLite and PostgreSQL compare bytes already
        return
    for table, column, length, nullable in NAMES:
        null = "NULL" if nullable else "NOT NULL"
        op.execute(
            f"ALTER TABLE {table} MODIFY {column} VARCHAR({length}) "
            f"CHARACTER SET utf8mb4 COLLATE {collation} {null}"
        )


def upgrade() -> None:
    _collate("utf8mb4_bin")


def downgrade() -> None:
    _collate("utf8mb4_general_ci")
