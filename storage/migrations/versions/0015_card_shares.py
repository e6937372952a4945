"""A card may be shared: allocations.share_milli (the part of the card an allocation holds, in
thousandths; 1000 = the whole card), gpus.booked_milli (the sum of its open allocations' parts,
which the database keeps between 0 and 1000: it refuses to over-book a card as the unique index
on allocations.active_gpu_id refused a second holder), jobs.share (the job accepts a shared card).
The unique index goes: two shares of one card are two open allocations of it.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WHOLE = 1000
LEDGER_FK = "fk_ledger_entries_allocation_id_allocations"
BOOKED = "ck_gpus_booked_milli"
BOOKED_CHECK = "booked_milli >= 0 AND booked_milli <= 1000"
SHARE_CHECK = "share_milli >= 1 AND share_milli <= 1000"


def _rebuilding(bind: sa.engine.Connection) -> bool:
    """SQLite changes a table's constraints by copying it, and refuses to drop a table other
    rows refer to while foreign keys are on (they are, in a transaction that cannot turn them
    off): the ledger's reference to allocations is taken off for the copy and put back."""
    return bind.dialect.name == "sqlite"


def upgrade() -> None:
    bind = op.get_bind()
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("share", sa.Boolean(), nullable=False, server_default="0"))
    rebuilding = _rebuilding(bind)
    # In place on every backend (gpus is referred to by allocations and samples): SQLite takes
    # the check with the column (and checks it), the servers as a constraint of the table.
    booked = "booked_milli INTEGER DEFAULT 0 NOT NULL"
    if rebuilding:
        op.execute(
            f"ALTER TABLE gpus ADD COLUMN {booked} CONSTRAINT {BOOKED} CHECK ({BOOKED_CHECK})"
        )
    else:
        op.execute(f"ALTER TABLE gpus ADD COLUMN {booked}")
        op.create_check_constraint(BOOKED, "gpus", BOOKED_CHECK)
    if rebuilding:
        with op.batch_alter_table("ledger_entries", recreate="always") as batch_op:
            batch_op.drop_constraint(LEDGER_FK, type_="foreignkey")
    with op.batch_alter_table("allocations", recreate="always" if rebuilding else "auto") as batch:
        batch.drop_constraint("uq_allocations_active_gpu_id", type_="unique")
        batch.add_column(
            sa.Column("share_milli", sa.Integer(), nullable=False, server_default=str(WHOLE))
        )
        batch.create_check_constraint("ck_allocations_share_milli", SHARE_CHECK)
    if rebuilding:
        with op.batch_alter_table("ledger_entries", recreate="always") as batch_op:
            batch_op.create_foreign_key(LEDGER_FK, "allocations", ["allocation_id"], ["id"])
    # Every card held now is held whole.
    op.execute(
        "UPDATE gpus SET booked_milli = 1000 WHERE id IN"
        " (SELECT gpu_id FROM allocations WHERE ended_at IS NULL)"
    )


def downgrade() -> None:
    bind = op.get_bind()
    rebuilding = _rebuilding(bind)
    if rebuilding:
        with op.batch_alter_table("ledger_entries", recreate="always") as batch_op:
            batch_op.drop_constraint(LEDGER_FK, type_="foreignkey")
    with op.batch_alter_table("allocations", recreate="always" if rebuilding else "auto") as batch:
        batch.drop_constraint("ck_allocations_share_milli", type_="check")
        batch.drop_column("share_milli")
        batch.create_unique_constraint("uq_allocations_active_gpu_id", ["active_gpu_id"])
    if rebuilding:
        with op.batch_alter_table("ledger_entries", recreate="always") as batch_op:
            batch_op.create_foreign_key(LEDGER_FK, "allocations", ["allocation_id"], ["id"])
    # SQLite cannot drop a column its check names, nor copy gpus (other rows refer to it): the
    # column stays there, unread by the older code, always 0 once no allocation is open.
    if not rebuilding:
        op.drop_constraint(BOOKED, "gpus", type_="check")
        op.drop_column("gpus", "booked_milli")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("share")
