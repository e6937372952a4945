"""Only one paika instance schedules at a time.

PostgreSQL: a session advisory lock held on a dedicated connection (released by the server
if the process dies); advisory locks belong to one database. MySQL/MariaDB: GET_LOCK on a
dedicated connection, same semantics; its locks are global to the server, so the lock's name
carries the database's (hashed: names are at most 64 characters), and two paikas on two
databases of one server each schedule their own.
SQLite: a lease row renewed every cycle; a holder that stops renewing loses it after `ttl`.

paika up asks from several threads (the cycle, alerts, pruning): a database connection is
not safe to share between threads, so one thread at a time uses the lock's connection. A
check that finds the connection dead closes it (the server then drops the lock) and tries
to take the lock again at once, so a dropped connection costs no cycle its leader.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, Engine, text, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlmodel import Session, col

from storage.models import Lease

LOCK_NAME = "paika-scheduler"
ADVISORY_KEY = 0x7061696B61  # "paika"
# MySQL's lock names are server-wide: scope ours to the connection's database.
_MYSQL_NAME = "CONCAT(:name, ':', MD5(DATABASE()))"
# Whether this session holds the lock (a bigint advisory key is classid:objid, objsubid 1).
_HELD = {
    "postgresql": "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'"
    " AND pid = pg_backend_pid() AND granted AND objsubid = 1"
    " AND ((classid::bigint << 32) | objid::bigint) = :key)",
    "mysql": f"SELECT COALESCE(IS_USED_LOCK({_MYSQL_NAME}) = CONNECTION_ID(), 0)",
}


class LeaderLock:
    """Try to become the scheduling instance; keep it; let it go."""

    def __init__(self, engine: Engine, *, ttl: timedelta = timedelta(seconds=60)) -> None:
        self.engine = engine
        self.ttl = ttl
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._connection: Connection | None = None
        self._guard = threading.Lock()  # the connection is used by one thread at a time

    def acquire(self, now: datetime) -> bool:
        """True if this instance holds the lock now (acquired or renewed)."""
        if self.engine.dialect.name == "sqlite":
            return self._lease(now)
        with self._guard:
            if self._connection is not None and self._still_connected():
                return True
            return self._take()

    def _take(self) -> bool:
        backend = self.engine.dialect.name
        connection = self.engine.connect()
        if backend == "postgresql":
            got = connection.execute(
                text("SELECT pg_try_advisory_lock(:key)"), {"key": ADVISORY_KEY}
            ).scalar()
        else:
            got = (
                connection.execute(
                    text(f"SELECT GET_LOCK({_MYSQL_NAME}, 0)"), {"name": LOCK_NAME}
                ).scalar()
                == 1
            )
        connection.commit()
        if got:
            self._connection = connection
        else:
            connection.close()
        return bool(got)

    def release(self) -> None:
        """Give the lock up (also happens when the process or its connection dies)."""
        if self.engine.dialect.name == "sqlite":
            with Session(self.engine) as session:
                session.execute(
                    update(Lease)
                    .where(col(Lease.name) == LOCK_NAME, col(Lease.holder) == self.holder)
                    .values(expires_at=datetime.fromtimestamp(0, UTC))
                )
                session.commit()
            return
        with self._guard:
            self._let_go()

    def _let_go(self) -> None:
        if self._connection is not None:
            # Unlock before the connection goes back to the pool, which keeps the session open.
            unlock = (
                "SELECT pg_advisory_unlock(:key)"
                if self.engine.dialect.name == "postgresql"
                else f"SELECT RELEASE_LOCK({_MYSQL_NAME})"
            )
            try:
                self._connection.execute(text(unlock), {"key": ADVISORY_KEY, "name": LOCK_NAME})
                self._connection.commit()
            except DBAPIError:
                self._connection.invalidate()  # a dead session holds no lock
            self._connection.close()
            self._connection = None

    def _still_connected(self) -> bool:
        """Whether the lock's session still holds the lock. Not just "the connection answers":
        SQLAlchemy silently reconnects a connection that was invalidated, and a new session
        holds nothing."""
        assert self._connection is not None
        try:
            held = self._connection.execute(
                text(_HELD[self.engine.dialect.name]), {"key": ADVISORY_KEY, "name": LOCK_NAME}
            ).scalar()
            self._connection.commit()
        except DBAPIError:  # a dead connection means the lock is gone
            held = False
        if not held:
            self._drop()
        return bool(held)

    def _drop(self) -> None:
        """Close a connection that failed, so the server lets its lock go."""
        assert self._connection is not None
        with contextlib.suppress(DBAPIError):
            self._connection.invalidate()
        with contextlib.suppress(DBAPIError):
            self._connection.close()
        self._connection = None

    def _lease(self, now: datetime) -> bool:
        until = now + self.ttl
        with Session(self.engine) as session:
            taken = session.execute(
                update(Lease)
                .where(col(Lease.name) == LOCK_NAME)
                .where((col(Lease.holder) == self.holder) | (col(Lease.expires_at) < now))
                .values(holder=self.holder, expires_at=until)
            ).rowcount  # type: ignore[attr-defined]
            if not taken and session.get(Lease, LOCK_NAME) is None:
                session.add(Lease(name=LOCK_NAME, holder=self.holder, expires_at=until))
                try:
                    session.commit()
                    return True
                except IntegrityError:  # another instance inserted it first
                    session.rollback()
                    return False
            session.commit()
            return bool(taken)
