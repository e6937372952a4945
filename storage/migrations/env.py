"""Alembic environment: runs on the connection handed in by `storage.db.upgrade`."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

import storage.models  # noqa: F401  (registers every table on the metadata)
from storage.models.base import metadata

config = context.config


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        # Only reached from the alembic command line, e.g. to write a new revision.
        with create_engine(config.get_main_option("sqlalchemy.url") or "").connect() as conn:
            _migrate(conn)
            conn.commit()
        return
    _migrate(connection)


def _migrate(connection: object) -> None:
    context.configure(
        connection=connection,  # type: ignore[arg-type]
        target_metadata=metadata,
        render_as_batch=True,  # SQLite alters tables by copying them
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run()
