"""Names found whatever their case, in any script.

A team, host or template is found by its name regardless of case, as people type them.
SQL's lower() cannot be trusted with that: SQLite's folds only ASCII letters, and so does
PostgreSQL's under the C locale, so `lower(name) = 'équipe'` misses a team stored as
"Équipe" — even when it is typed exactly so, since Python's lower() folds the É. Names are
compared here instead, NFC-normalised and case-folded: an exact match is looked up first (by
the index), and only a miss reads the few candidate names and compares them in Python.
"""

from __future__ import annotations

import unicodedata
from typing import Any, TypeVar

from sqlalchemy import inspect
from sqlalchemy.orm import Mapped
from sqlmodel import Session, select
from sqlmodel.sql.expression import SelectOfScalar

Row = TypeVar("Row")


def folded(name: str) -> str:
    """The form two names that differ only by case compare equal in."""
    return unicodedata.normalize("NFC", name).casefold()


def first_named(
    session: Session, query: SelectOfScalar[Row], column: Mapped[str], name: str
) -> Row | None:
    """The first row of `query` whose `column` is `name`, whatever its case."""
    exact = session.exec(query.where(column == name)).first()
    if exact is not None:
        return exact
    wanted, key = folded(name), inspect(column).key
    for row in session.exec(query).all():
        if folded(getattr(row, key)) == wanted:
            return row
    return None


def spellings(session: Session, column: Mapped[str], name: str, *where: Any) -> list[str]:
    """Every spelling of `name` stored in `column` among the rows `where` selects (a
    template's versions may have been saved as "Sft" and as "sft")."""
    wanted = folded(name)
    stored = session.exec(select(column).where(*where).distinct()).all()
    return [spelled for spelled in stored if folded(spelled) == wanted]
