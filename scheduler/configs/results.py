"""What the /gpu config commands answer: versions and their changes as plain values."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from scheduler.configs.edit import Change

# Where a version came from (config_versions.source): the policy file read at a start, a
# /gpu config set, a rollback, a restore of the state from the object store.
SOURCES = ("file", "set", "rollback", "restore")


@dataclass(frozen=True)
class VersionInfo:
    """One stored version: who made it, when, why, from where, and what it changed."""

    version: int
    author: str
    at: datetime
    reason: str
    source: str  # file, set, rollback, restore
    changes: tuple[Change, ...] = ()
    rolled_back_to: int | None = None


@dataclass(frozen=True)
class ConfigShown:
    """The version in force; with `key`, only that key's value (as JSON)."""

    info: VersionInfo
    content: str
    key: str | None = None
    value: str | None = None


@dataclass(frozen=True)
class ConfigChanged:
    """A new version stored by `/gpu config set` or `rollback`; it is in force now."""

    info: VersionInfo


@dataclass(frozen=True)
class ConfigHistory:
    """Versions, newest first, and how many are stored in all."""

    versions: tuple[VersionInfo, ...]
    total: int


@dataclass(frozen=True)
class ConfigDiff:
    """What changed from version `first` to version `second`, key by key."""

    first: int
    second: int
    changes: tuple[Change, ...]
