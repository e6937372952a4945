"""The one token this agent accepts, from its environment or from a file it watches.

A token file (`PAIKA_AGENT_TOKEN_FILE`) is read again whenever it changes (its size, time or
inode) and at least once a second anyway (a rewrite within one tick of the file system's
clock keeps all three), so installing a rotated token on the host takes effect within a
second, with no restart. A file that goes missing or empty locks the agent: every request needing the token
is refused until a token is installed again.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

REREAD_S = 1.0


class TokenUnavailable(Exception):
    """The token file cannot be read or holds no token; `reason` says what to do."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class FixedToken:
    """A token given once (the environment variable): it never changes."""

    def __init__(self, token: str) -> None:
        if not token.strip():
            raise ValueError("the agent token must not be empty")
        self._token = token.strip().encode()

    def current(self) -> bytes:
        return self._token


class TokenFile:
    """The token in a file, read again when the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._token = b""
        self._read_at = 0.0

    def check(self) -> None:
        """Raise TokenUnavailable when the file is unusable now (missing, empty, or readable
        by others than its owner): for the agent's start, where a bad file is a setup error."""
        self.current()
        mode = os.stat(self.path).st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise TokenUnavailable(
                f"{self.path} can be read by others (mode {stat.S_IMODE(mode):o}); "
                f"run: chmod 600 {self.path}"
            )

    def current(self) -> bytes:
        """The token now in the file; TokenUnavailable when there is none."""
        try:
            info = os.stat(self.path)
        except OSError as exc:
            raise TokenUnavailable(
                f"the agent's token file {self.path} is missing: {exc.strerror}"
            ) from exc
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        now = time.monotonic()
        with self._lock:
            if stamp != self._stamp or now - self._read_at >= REREAD_S:
                self._token = self._read()
                self._stamp, self._read_at = stamp, now
            token = self._token
        if not token:
            raise TokenUnavailable(f"the agent's token file {self.path} is empty")
        return token

    def _read(self) -> bytes:
        try:
            return self.path.read_bytes().strip()
        except OSError as exc:
            raise TokenUnavailable(
                f"the agent's token file {self.path} cannot be read: {exc.strerror}"
            ) from exc


TokenSource = FixedToken | TokenFile
