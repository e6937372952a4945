"""Writes waiting for the object store, on local disk, in order, within a bound.

Everything paika stores goes through the spool, so the store is never on the scheduling path:
`add` returns as soon as the entry is on disk, and the shipper (shipper.py) sends entries in
the order they were added. Layout (default folder `<data_dir>/spool`, 0700):

    <folder>/<seq>.<kind>     one entry: a JSON header line {"key", "meta"}, then the bytes
    <folder>/.tmp-<random>    an entry being written (renamed into place; left-overs removed)
    <folder>/.owner           locked while a Spool has the folder open: one process at a time
                              (a second gets SpoolBusy; a dead owner's lock goes with it)

`<seq>` (12 digits) grows by one per entry and orders the pending ones (a restart goes on after
the highest left on disk); `<kind>` is
one of KINDS. Files are 0600 and written whole (temp file, fsync, rename, fsync the folder).

Every entry's meta carries `paika-idem`, a hash of its key, meta and bytes: the shipper skips
an entry whose key's newest version already carries it, so an entry sent but not yet marked
done when paika stopped is not stored twice.

The bound (`PAIKA_SPOOL_MAX_MB`, 256): when an entry would not fit, the oldest snapshot entries
are dropped first, then the oldest digest entries; a snapshot or digest that still does not fit
is itself dropped. Config, template, spec, decision and audit entries are never dropped: if
they alone pass the bound they are kept, with a warning. Each drop is logged, counted by kind
(`dropped`) and returned by `add`, so the caller can tell the admins.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import threading
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from storage.objects.base import checked_key, checked_meta
from storage.objects.durable import sync_folder, write_new

Kind = Literal["snapshot", "config", "template", "spec", "decisions", "digest", "audit"]
KINDS: tuple[Kind, ...] = get_args(Kind)
# What may go when the spool is full, in the order it goes.
DROPPABLE: tuple[Kind, ...] = ("snapshot", "digest")
IDEM = "paika-idem"
ENTRY_NAME = re.compile(r"([0-9]{12,})\.([a-z]+)")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SpoolEntry:
    """One pending write: `meta` already carries its `paika-idem`."""

    seq: int
    kind: Kind
    key: str
    data: bytes
    meta: Mapping[str, str] = field(default_factory=dict)

    @property
    def idem(self) -> str:
        return self.meta[IDEM]


@dataclass(frozen=True)
class Dropped:
    """An entry the bound pushed out before the store took it."""

    seq: int
    kind: Kind
    key: str
    size: int


@dataclass(frozen=True)
class _Item:
    seq: int
    kind: Kind
    size: int
    path: Path


def idem_of(key: str, data: bytes, meta: Mapping[str, str]) -> str:
    """The content hash that makes sending an entry twice harmless."""
    digest = hashlib.sha256()
    header = json.dumps([key, sorted(meta.items())], ensure_ascii=False)
    digest.update(header.encode())
    digest.update(b"\0")
    digest.update(data)
    return digest.hexdigest()


class Spool:
    """A bounded, ordered queue of pending object writes in `folder` (see the module docstring)."""

    def __init__(self, folder: Path, max_bytes: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.dropped: Counter[str] = Counter()
        self._lock = threading.Lock()
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        self._owner = _own(folder)
        self._items = self._scan()
        self._bytes = sum(item.size for item in self._items)
        self._next = self._items[-1].seq + 1 if self._items else 1

    def add(
        self, key: str, data: bytes, meta: Mapping[str, str] | None = None, *, kind: Kind
    ) -> tuple[Dropped, ...]:
        """Queue a write; returns what the bound pushed out to make room (often nothing)."""
        if kind not in KINDS:
            raise ValueError(f"spool entry kind {kind!r} is not one of {', '.join(KINDS)}")
        meta = checked_meta(meta)
        meta.pop(IDEM, None)
        meta[IDEM] = idem_of(checked_key(key), data, meta)
        checked_meta(meta)  # with its idem it must still fit the store's budget when sent
        header = json.dumps({"key": key, "meta": meta}, ensure_ascii=False).encode()
        payload = header + b"\n" + data
        with self._lock:
            seq, self._next = self._next, self._next + 1
            dropped = self._make_room(len(payload))
            if kind in DROPPABLE and self._over(len(payload)):
                return (*dropped, self._count(Dropped(seq, kind, key, len(payload))))
            path = self.folder / f"{seq:012d}.{kind}"
            _write_atomically(self.folder, path, payload)
            self._items.append(_Item(seq, kind, len(payload), path))
            self._bytes += len(payload)
            if self._over(0):
                log.warning(
                    "the object spool holds %d bytes, over its bound of %d, in entries it never "
                    "drops (config, templates, specs, decisions, audit); they wait for the store",
                    self.bytes,
                    self.max_bytes,
                )
            return dropped

    def peek(self) -> SpoolEntry | None:
        """The oldest pending entry, or None when the spool is empty."""
        with self._lock:
            while self._items:
                item = self._items[0]
                entry = self._read(item)
                if entry is not None:
                    return entry
                self._forget(0)
            return None

    def done(self, entry: SpoolEntry) -> None:
        """The store took `entry`: forget it (a no-op when the bound already dropped it)."""
        with self._lock:
            for index, item in enumerate(self._items):
                if item.seq == entry.seq:
                    self._forget(index)
                    _unlink(self.folder, item.path)
                    return

    def close(self) -> None:
        """Let another Spool (this process's or another's) open the folder."""
        if self._owner is not None:
            os.close(self._owner)
            self._owner = None

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    @property
    def bytes(self) -> int:
        """The pending entries' size on disk."""
        return self._bytes

    def _forget(self, index: int) -> None:
        self._bytes -= self._items.pop(index).size

    # -- the bound -------------------------------------------------------------------------

    def _over(self, extra: int) -> bool:
        return self.bytes + extra > self.max_bytes

    def _make_room(self, size: int) -> tuple[Dropped, ...]:
        dropped: list[Dropped] = []
        for kind in DROPPABLE:
            for item in [item for item in self._items if item.kind == kind]:
                if not self._over(size):
                    return tuple(dropped)
                key = self._key_of(item)
                self._forget(self._items.index(item))
                _unlink(self.folder, item.path)
                dropped.append(self._count(Dropped(item.seq, item.kind, key, item.size)))
        return tuple(dropped)

    def _count(self, gone: Dropped) -> Dropped:
        self.dropped[gone.kind] += 1
        log.warning(
            "the object spool is full (%d bytes): dropped the %s entry for %s (%d bytes), "
            "which will not reach the store",
            self.max_bytes,
            gone.kind,
            gone.key,
            gone.size,
        )
        return gone

    # -- files -----------------------------------------------------------------------------

    def _scan(self) -> list[_Item]:
        items = []
        for path in self.folder.iterdir():
            match = ENTRY_NAME.fullmatch(path.name)
            if path.name.startswith(".tmp-"):
                path.unlink(missing_ok=True)  # a write cut short: never added
            elif match and match.group(2) in KINDS:
                kind: Kind = match.group(2)  # type: ignore[assignment]
                items.append(_Item(int(match.group(1)), kind, path.stat().st_size, path))
        return sorted(items, key=lambda item: item.seq)

    def _read(self, item: _Item) -> SpoolEntry | None:
        try:
            raw = item.path.read_bytes()
            header, _, data = raw.partition(b"\n")
            fields = json.loads(header)
            return SpoolEntry(item.seq, item.kind, fields["key"], data, fields["meta"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            # Written whole or not at all, so only a damaged disk gets here: keep the bytes
            # for a person to look at, and let the entries behind it go on.
            log.error("the object spool entry %s is unreadable; moved aside as .bad", item.path)
            item.path.rename(item.path.with_name(item.path.name + ".bad"))
            return None

    def _key_of(self, item: _Item) -> str:
        """The entry's key, from its header line alone (a snapshot's bytes are not read)."""
        try:
            with item.path.open("rb") as file:
                return str(json.loads(file.readline())["key"])
        except (OSError, ValueError, KeyError, TypeError):
            return item.path.name


class SpoolBusy(RuntimeError):
    """Another Spool holds the folder: two writers would give two entries one number."""


def _own(folder: Path) -> int | None:
    """Hold `folder` for this Spool until it closes (the lock goes with a dead process)."""
    fd = os.open(folder / ".owner", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise SpoolBusy(
            f"the object spool {folder} is in use by another paika process; give this one a "
            "spool folder of its own"
        ) from None
    return fd


def _write_atomically(folder: Path, path: Path, payload: bytes) -> None:
    staged = folder / f".tmp-{uuid.uuid4().hex}"
    write_new(staged, payload)
    os.rename(staged, path)
    sync_folder(folder)


def _unlink(folder: Path, path: Path) -> None:
    path.unlink(missing_ok=True)
    sync_folder(folder)
