"""The object store as paika uses it: versioned objects under keys (storage/objects/keys.py).

Two backends speak this interface: S3 through boto3 (s3.py), and a local folder that keeps
versions too (local.py). Nothing outside storage/ calls boto3 or names an object key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol
from urllib.parse import quote


class StoreUnavailable(Exception):
    """The store did not answer, or refused to (network, credentials, a 5xx): the write is
    kept in the spool and tried again; nothing is lost."""


class NoSuchObject(KeyError):
    """No object (or no such version of it) under that key."""


class BadKey(ValueError):
    """A key or meta name no backend may store (empty segments, '..', an absolute path, a
    meta name S3 would mangle): a bug in the caller, never worth retrying."""


META_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


def checked_key(key: str) -> str:
    """`key` when every backend can hold it the same way: '/'-separated, relative, no empty,
    '.' or '..' segments, no control characters (so a local folder can never be escaped)."""
    parts = key.split("/")
    if (
        not key
        or any(part in ("", ".", "..") for part in parts)
        or "\\" in key
        or any(ord(ch) < 32 or ord(ch) == 127 for ch in key)
    ):
        raise BadKey(f"object key {key!r} is not a relative '/'-separated path")
    return key


def checked_meta(meta: Mapping[str, str] | None) -> dict[str, str]:
    """`meta` as a plain dict when every backend can hold it: lower-case ASCII names (S3
    lower-cases them) and, all told, no more than S3's 2 KB of user metadata as sent."""
    out = dict(meta or {})
    for name, value in out.items():
        if not META_NAME.fullmatch(name) or not isinstance(value, str):
            raise BadKey(f"object meta {name!r} needs a lower-case name and a text value")
    if meta_size(out) > META_BUDGET:
        raise BadKey(
            f"object meta takes {meta_size(out)} bytes as sent, over S3's {META_BUDGET}: "
            "keep long texts in the object itself"
        )
    return out


# S3 refuses a put whose user metadata (names and values, as sent) passes 2 KB; the local
# folder holds the same budget, so what works on one backend works on the other.
META_BUDGET = 2048


def meta_wire(value: str) -> str:
    """A meta value as S3 carries it: ASCII, percent-encoded UTF-8 (a Chinese character is 9)."""
    return quote(value, safe="")


def meta_size(meta: Mapping[str, str]) -> int:
    return sum(len(name) + len(meta_wire(value)) for name, value in meta.items())


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
