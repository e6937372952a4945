"""The daily digest: the readiness board posted to the channel every morning.

`build_digest` reads it from the database (`data.py`) into plain data (`model.py`) that
travels as JSON through the outbox; `raise_digest` decides when it is due and claims it
once (`schedule.py`). The bot says and draws it (bot/digest/: Block Kit, text, picture).
"""

from __future__ import annotations

from typing import Protocol

from sqlalchemy import Engine

from scheduler.clock import Clock
from scheduler.config import PolicyConfig
from scheduler.digest.data import build_digest, system_context
from scheduler.digest.model import Digest
from storage.db import session_scope


class Service(Protocol):
    """What the digest reads from the running core (`Paika`, from the floor above)."""

    @property
    def engine(self) -> Engine: ...
    @property
    def policy(self) -> PolicyConfig: ...
    @property
    def clock(self) -> Clock: ...


def digest_now(paika: Service) -> Digest:
    """Today's digest as things stand now, read in one transaction."""
    with session_scope(paika.engine) as session:
        return build_digest(system_context(session, paika.policy, paika.clock.now()))


__all__ = ["Digest", "build_digest", "digest_now", "system_context"]
