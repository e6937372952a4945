"""Column types that behave the same on SQLite, PostgreSQL and MySQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, String
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

# Names people choose (teams, jobs, templates, projects, rounds) in any script are compared
# byte for byte on MySQL and MariaDB. Their default utf8mb4 collation (utf8mb4_general_ci)
# takes "equipe" for "équipe" and every character beyond the BMP (𠀀, 𠀁) for every other,
# so two teams would be one. paika compares names without case itself (lower() on both sides).
NAME_COLLATION = "utf8mb4_bin"


def name_string(length: int) -> TypeEngine[str]:
    """A name's column: VARCHAR(length), binary-collated on MySQL and MariaDB."""
    binary = mysql.VARCHAR(length, charset="utf8mb4", collation=NAME_COLLATION)
    return String(length).with_variant(binary, "mysql", "mariadb")


class UTCDateTime(TypeDecorator[datetime]):
    """Stores naive UTC, returns timezone-aware UTC, on every backend.

    SQLite keeps no zone and MySQL's DATETIME keeps whole seconds unless told otherwise,
    so the zone is normalised here and MySQL gets microseconds.
    """

    impl = DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> Any:
        if dialect.name == "mysql":
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(DateTime())

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column; pass an aware datetime")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)
