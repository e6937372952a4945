"""The policy in force in a running paika, following the stored versions without a restart."""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy import Engine
from sqlmodel import Session

from scheduler.config import PolicyConfig, policy_from_text
from scheduler.errors import ConfigError
from storage.queries import config as config_queries

log = logging.getLogger(__name__)

# Commands look for a new version at most this often: they must stay fast, and a change
# made through this process is taken at once anyway (adopt).
COMMAND_REFRESH_S = 2.0


class LivePolicy:
    """Holds the policy in force and its version number.

    `refresh` reads only the newest version number; when it moved, the new version is
    loaded and validated. A version that fails to validate (it was validated before it was
    stored, so only a code change can do this) is logged once and the old policy stays.
    A holder made by `fixed` never reads the database (a simulation, a benchmark).
    """

    def __init__(self, policy: PolicyConfig, version: int | None, *, follows: bool = True) -> None:
        self._state = (policy, version)
        self._follows = follows
        self._bad: int | None = None
        self._checked = 0.0
        self._lock = threading.Lock()

    @classmethod
    def fixed(cls, policy: PolicyConfig) -> LivePolicy:
        """A holder that keeps `policy` and never looks for stored versions."""
        return cls(policy, None, follows=False)

    @property
    def current(self) -> PolicyConfig:
        """The policy in force."""
        return self._state[0]

    @property
    def version(self) -> int | None:
        """Its stored version number (None: not from the store)."""
        return self._state[1]

    def pin(self, policy: PolicyConfig) -> None:
        """Use `policy` in place of the stored version's, until a newer version is stored
        (the demo and tests shorten timings this way)."""
        with self._lock:
            self._state = (policy, self._state[1])

    def adopt(self, policy: PolicyConfig, version: int) -> None:
        """Take a version this process has just stored."""
        with self._lock:
            if self._state[1] is None or version >= self._state[1]:
                self._state = (policy, version)

    def refresh(self, engine: Engine) -> bool:
        """Take the newest stored version if it is not the one in force; True if it changed."""
        if not self._follows:
            return False
        with Session(engine) as session:
            newest = config_queries.newest_number(session=session)
            if newest is None or newest in (self.version, self._bad):
                return False
            row = config_queries.by_number(session=session, version=newest)
            if row is None:  # removed between the two reads
                return False
            content = row.content
        try:
            policy = policy_from_text(content, f"config version {newest}")
        except ConfigError as exc:
            log.error(
                "config version %d does not validate; keeping version %s: %s",
                newest,
                self.version,
                exc,
            )
            self._bad = newest
            return False
        with self._lock:
            self._state = (policy, newest)
        log.info("config version %d is in force now", newest)
        return True

    def refresh_if_due(self, engine: Engine, every: float = COMMAND_REFRESH_S) -> bool:
        """`refresh`, at most once every `every` seconds."""
        now = time.monotonic()
        if now - self._checked < every:
            return False
        self._checked = now
        return self.refresh(engine)
