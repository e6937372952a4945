"""config_versions, template_versions, decisions, archive_marks: the team's memory (policy
config versions, template versions, the decision log) and how far each is archived to the
object store; templates.version; jobs.template_version and jobs.spec; quotas.carried_hours

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import storage.types

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "config_versions",
        sa.Column("version", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("author", sa.String(length=64), nullable=False),
        sa.Column("at", storage.types.UTCDateTime(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("version", name=op.f("pk_config_versions")),
    )
    op.create_table(
        "template_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("fields", sa.JSON(), nullable=True),
        sa.Column("author", sa.String(length=32), nullable=False),
        sa.Column("at", storage.types.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_template_versions_team_id_teams")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_template_versions")),
        sa.UniqueConstraint("team_id", "name", "version", name="uq_template_versions_team_name"),
    )
    with op.batch_alter_table("template_versions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_template_versions_team_id"), ["team_id"], unique=False)
    op.create_table(
        "decisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", storage.types.UTCDateTime(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_decisions")),
    )
    with op.batch_alter_table("decisions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_decisions_at"), ["at"], unique=False)
        batch_op.create_index("ix_decisions_job_at", ["job_id", "at"], unique=False)
    op.create_table(
        "archive_marks",
        sa.Column("stream", sa.String(length=32), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=True),
        sa.Column("at", storage.types.UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("stream", name=op.f("pk_archive_marks")),
    )
    with op.batch_alter_table("templates", schema=None) as batch_op:
        batch_op.add_column(sa.Column("version", sa.Integer(), server_default="1", nullable=False))
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("template_version", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("spec", sa.JSON(), nullable=True))
    with op.batch_alter_table("quotas", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("carried_hours", sa.Double(), server_default="0", nullable=False)
        )
    _keep_templates_as_version_1()


def _keep_templates_as_version_1() -> None:
    """Every template saved before versions were kept becomes its version 1: its fields, by
    whoever created it, at its last save (templates.version is 1 already, its default)."""
    templates = sa.table(
        "templates",
        sa.column("team_id", sa.Integer()),
        sa.column("name", sa.String()),
        sa.column("fields", sa.JSON()),
        sa.column("created_by", sa.String()),
        sa.column("updated_at", storage.types.UTCDateTime()),
    )
    versions = sa.table(
        "template_versions",
        sa.column("team_id", sa.Integer()),
        sa.column("name", sa.String()),
        sa.column("version", sa.Integer()),
        sa.column("fields", sa.JSON()),
        sa.column("author", sa.String()),
        sa.column("at", storage.types.UTCDateTime()),
    )
    kept = sa.select(
        templates.c.team_id,
        templates.c.name,
        sa.literal(1, sa.Integer()),
        templates.c.fields,
        templates.c.created_by,
        templates.c.updated_at,
    )
    op.execute(
        versions.insert().from_select(
            ["team_id", "name", "version", "fields", "author", "at"], kept
        )
    )


def downgrade() -> None:
    with op.batch_alter_table("quotas", schema=None) as batch_op:
        batch_op.drop_column("carried_hours")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("spec")
        batch_op.drop_column("template_version")
    with op.batch_alter_table("templates", schema=None) as batch_op:
        batch_op.drop_column("version")
    op.drop_table("archive_marks")
    with op.batch_alter_table("decisions", schema=None) as batch_op:
        batch_op.drop_index("ix_decisions_job_at")
        batch_op.drop_index(batch_op.f("ix_decisions_at"))
    op.drop_table("decisions")
    with op.batch_alter_table("template_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_template_versions_team_id"))
    op.drop_table("template_versions")
    op.drop_table("config_versions")
