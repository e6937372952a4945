"""The object store as paika uses it: versioned objects under keys (storage/objects/keys.py).

Two backends speak this interface: S3 through boto3 (s3.py), and a local folder that keeps
versions too (local.py). Nothing outside storage/ calls boto3 or names an object key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol


class StoreUnavailable(Exception):
    """The store did not answer, or refused to (network, credentials, a 5xx): the write is
    kept in the spool and tried again; nothing is lost."""


class NoSuchObject(KeyError):
    """No object (or no such version of it) under that key."""


@dataclass(frozen=True)
class ObjectVersion:
    """One stored version of one key. `meta` are paika's own small strings (who, why, which
    version); `at` is when the store took it."""

    key: str
    version_id: str
    at: datetime
    size: int
    meta: Mapping[str, str] = field(default_factory=dict)


class ObjectStore(Protocol):
    """Every version of every key is kept; `put` never overwrites one."""

    # Where it writes, for people (a folder, or s3://bucket/prefix at an endpoint); no secrets.
    where: str

    def put(self, key: str, data: bytes, meta: Mapping[str, str] | None = None) -> ObjectVersion:
        """Store `data` as the newest version of `key`."""
        ...

    def get(self, key: str, version_id: str | None = None) -> bytes:
        """The newest version's bytes, or the given version's (NoSuchObject when absent)."""
        ...

    def head(self, key: str, version_id: str | None = None) -> ObjectVersion | None:
        """The newest (or given) version's description, None when there is none."""
        ...

    def versions(self, key: str) -> list[ObjectVersion]:
        """Every version of `key`, newest first ([] when none)."""
        ...

    def keys(self, prefix: str) -> list[str]:
        """The keys under `prefix` (each once, however many versions), sorted."""
        ...

    def check(self) -> None:
        """Raise StoreUnavailable unless the store answers."""
        ...
