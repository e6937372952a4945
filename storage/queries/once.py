"""Insert a row that must exist once: the primary key decides between racing writers."""

from __future__ import annotations

from sqlalchemy import Insert
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session


def insert_once(session: Session, statement: Insert) -> bool:
    """Run `statement`; True if it inserted, False if the key was already there.

    The insert is part of the caller's transaction: if the caller rolls back, the key
    is free again.
    """
    try:
        if session.get_bind().dialect.name == "sqlite":
            # SQLite undoes only the failed statement, so no savepoint is needed; and
            # pysqlite would commit at once a savepoint that opens the transaction.
            session.execute(statement)
        else:
            # PostgreSQL aborts the whole transaction on an error; the savepoint keeps it.
            with session.begin_nested():
                session.execute(statement)
    except IntegrityError:
        return False
    return True
