"""The policy config's history as the object store keeps it (config/policy.yml, a version
per config version, with its number, author, time, reason and source in its meta): read
back by a take-over, so the new install has the same versions, the same one in force, and
the same history to roll back to."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from scheduler.configs.edit import sha256
from storage.objects import keys
from storage.objects.base import ObjectStore


@dataclass(frozen=True)
class StoredConfig:
    """One config version as it was archived."""

    version: int
    content: str
    sha256: str
    author: str
    at: datetime
    reason: str
    source: str


def config_history(store: ObjectStore) -> list[StoredConfig]:
    """Every archived config version, oldest first, each number once (the first kept)."""
    found: dict[int, StoredConfig] = {}
    for stored in reversed(store.versions(keys.CONFIG)):
        meta = stored.meta
        number = int(meta.get("paika-version") or 0)
        if number <= 0 or number in found:
            continue
        content = store.get(keys.CONFIG, stored.version_id).decode()
        found[number] = StoredConfig(
            version=number,
            content=content,
            sha256=sha256(content),
            author=meta.get("paika-author") or "?",
            at=datetime.fromisoformat(meta["paika-at"]) if meta.get("paika-at") else stored.at,
            reason=meta.get("paika-reason") or "",
            source=meta.get("paika-source") or "file",
        )
    return [found[number] for number in sorted(found)]
