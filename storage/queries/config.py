"""The policy config's versions (config_versions): the truth every running paika reads."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert
from sqlalchemy.orm.exc import StaleDataError
from sqlmodel import Session, col, select

from storage.models import ConfigVersion
from storage.queries.once import insert_once


class VersionTaken(StaleDataError):
    """Another writer stored the version number this one meant to use: what it read is out of
    date. Like a conditional update that matched no row, the unit of work is run again on
    the fresh state (storage.db.lost_race says so)."""


def newest_number(*, session: Session) -> int | None:
    """The highest version number, or None when no version is stored (one cheap read)."""
    return session.exec(select(func.max(ConfigVersion.version))).one()


def newest(*, session: Session) -> ConfigVersion | None:
    """The newest version: the one in force."""
    return session.exec(
        select(ConfigVersion).order_by(col(ConfigVersion.version).desc()).limit(1)
    ).first()


def newest_from_file(*, session: Session) -> ConfigVersion | None:
    """The newest version recorded from the policy file at a start."""
    return session.exec(
        select(ConfigVersion)
        .where(ConfigVersion.source == "file")
        .order_by(col(ConfigVersion.version).desc())
        .limit(1)
    ).first()


def by_number(*, session: Session, version: int) -> ConfigVersion | None:
    """One version, or None."""
    return session.get(ConfigVersion, version)


def history(*, session: Session, limit: int) -> Sequence[ConfigVersion]:
    """The newest `limit` versions, newest first."""
    return session.exec(
        select(ConfigVersion).order_by(col(ConfigVersion.version).desc()).limit(limit)
    ).all()


def count(*, session: Session) -> int:
    """How many versions are stored."""
    return session.exec(select(func.count()).select_from(ConfigVersion)).one()


def add_version(
    *,
    session: Session,
    version: int,
    content: str,
    sha256: str,
    author: str,
    at: datetime,
    reason: str,
    source: str,
    detail: dict[str, Any] | None,
) -> None:
    """Store `version`, which the caller read as free (newest + 1); VersionTaken when another
    writer stored it first."""
    statement = insert(ConfigVersion).values(
        version=version,
        content=content,
        sha256=sha256,
        author=author,
        at=at,
        reason=reason,
        source=source,
        detail=detail,
    )
    if not insert_once(session, statement):
        raise VersionTaken(f"config version {version} was stored by another writer")
