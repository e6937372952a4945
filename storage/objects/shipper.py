"""Sends the spool's entries to the object store, in order, once each, whatever the store does.

One thread per process. It takes the oldest entry, stores it, and only then removes it from
the spool; the next entry waits until the one before it is stored, so the versions of
config/policy.yml and the decision log's objects reach the store in the order they were made.
Before each put it reads the key's newest version: if that already carries the entry's
`paika-idem`, the entry was stored before a crash or a lost answer, and is not stored again.

When the store fails (StoreUnavailable) the shipper keeps the entry, waits (1 s, doubling to
60 s; `wake()` cuts a wait short, e.g. after a new entry or a `paika state` command), and tries
again. `down_since` says since when the store has failed (None while it answers) and
`last_error` why; `on_state(down_since, error)` hears each change, from down to up
(`None, None`) and up to down, so the caller can tell the admins after its threshold.

An entry no store can hold (BadKey: a bug, not an outage) is logged, counted in `refused` and
taken off the spool, so it never blocks the entries behind it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from storage.objects.base import BadKey, ObjectStore, StoreUnavailable
from storage.objects.spool import IDEM, Spool, SpoolEntry

FIRST_WAIT_S = 1.0
LONGEST_WAIT_S = 60.0
# With nothing pending, look again this often even without a wake(), so an entry added without
# one still goes within seconds.
IDLE_WAIT_S = 5.0

log = logging.getLogger(__name__)

OnState = Callable[[datetime | None, str | None], None]


class Shipper:
    """The thread that empties the spool into the store (see the module docstring)."""

    def __init__(
        self,
        store: ObjectStore,
        spool: Spool,
        clock: Callable[[], datetime],
        on_state: OnState | None = None,
    ) -> None:
        self.store = store
        self.spool = spool
        self.clock = clock
        self.on_state = on_state
        self.down_since: datetime | None = None
        self.last_error: str | None = None
        self.sent = 0
        self.skipped = 0
        self.refused = 0
        self._sending = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="paika-object-shipper", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """End the thread (what is not sent stays in the spool for the next start)."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def wake(self) -> None:
        """Try now instead of at the end of the current wait."""
        self._wake.set()

    def flush(self) -> int:
        """Send what can be sent now, in order; how many entries left the spool. Stops at the
        first failure (`down_since` and `last_error` say why)."""
        return self._drain(lambda: False)

    # -- the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        wait = FIRST_WAIT_S
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                self._drain(self._stopping.is_set)
                failed = self.down_since is not None
            except Exception:
                # A fault in paika's own code must not end the thread: the entry stays, and
                # the next round tries it again.
                log.exception("sending the object spool failed")
                failed = True
            if failed:
                self._wake.wait(wait)
                wait = min(wait * 2, LONGEST_WAIT_S)
            else:
                wait = FIRST_WAIT_S
                self._wake.wait(IDLE_WAIT_S)

    def _drain(self, stopping: Callable[[], bool]) -> int:
        taken = 0
        with self._sending:
            while not stopping() and (entry := self.spool.peek()) is not None:
                try:
                    self._ship(entry)
                except StoreUnavailable as exc:
                    self._down(exc)
                    return taken
                except BadKey as exc:
                    log.error("the object store cannot hold %s, dropped: %s", entry.key, exc)
                    self.refused += 1
                self.spool.done(entry)
                taken += 1
                self._up()
            if self.down_since is not None and not stopping():
                self._probe()  # nothing to send: ask the store itself whether it is back
        return taken

    def _probe(self) -> None:
        try:
            self.store.check()
        except StoreUnavailable as exc:
            self._down(exc)
        else:
            self._up()

    def _ship(self, entry: SpoolEntry) -> None:
        newest = self.store.head(entry.key)
        if newest is not None and newest.meta.get(IDEM) == entry.idem:
            self.skipped += 1  # stored before a crash or a lost answer
            return
        self.store.put(entry.key, entry.data, entry.meta)
        self.sent += 1

    # -- the state -------------------------------------------------------------------------

    def _down(self, exc: StoreUnavailable) -> None:
        self.last_error = str(exc)
        if self.down_since is None:
            self.down_since = self.clock()
            log.warning("the object store is unreachable; writes wait in the spool: %s", exc)
            self._tell()

    def _up(self) -> None:
        self.last_error = None
        if self.down_since is not None:
            self.down_since = None
            log.info("the object store answers again; sending the spool")
            self._tell()

    def _tell(self) -> None:
        if self.on_state is None:
            return
        try:
            self.on_state(self.down_since, self.last_error)
        except Exception:
            log.exception("the object store's state change could not be reported")
