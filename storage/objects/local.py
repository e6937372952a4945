"""The embedded object store: a local folder that keeps every version (the default).

Settings: `PAIKA_OBJECT_STORE` unset means `<PAIKA_DATA_DIR>/objects` (./paika-data/objects);
any value that does not start with `s3://` is taken as a folder path.

Layout under the root, one folder per key and one folder per version:

    <root>/<key>.versions/<seq>-<stamp>/data        the bytes, as put
    <root>/<key>.versions/<seq>-<stamp>/meta.json   paika's meta, as put (JSON object)

`<seq>` (8 digits, then more if ever needed) counts the key's versions from 1 and orders them;
`<stamp>` (`YYYYmmddTHHMMSSffffffZ`, UTC) is when the version was taken, and `<seq>-<stamp>` is
its version id. A version is written into a hidden temporary folder beside it (`.tmp-<random>`:
data and meta, each fsync'ed) and renamed into place in one step, so a reader sees all of it or
none of it; one a crash left behind is removed by a later put after an hour. Writers of one key
take turns on a lock file (`.lock` in the key's folder) to pick `<seq>`.

Key segments that end in `.versions`, are empty, `.` or `..`, or keys that start with '/', are
refused (BadKey): a key never names a path outside the root. The folders are 0700 and the files
0600: the store holds the team's config and its audit.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from storage.objects.base import (
    BadKey,
    NoSuchObject,
    ObjectVersion,
    StoreUnavailable,
    checked_key,
    checked_meta,
)
from storage.objects.durable import sync_folder, write_new
from storage.objects.keys import STAMP

SUFFIX = ".versions"
VERSION_ID = re.compile(r"([0-9]{8,})-([0-9]{8}T[0-9]{12}Z)")
DIR_MODE = 0o700
FILE_MODE = 0o600
ABANDONED_AFTER_S = 3600


class LocalStore:
    """Versioned objects in a folder on this machine."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.where = str(root.resolve())

    def put(self, key: str, data: bytes, meta: Mapping[str, str] | None = None) -> ObjectVersion:
        folder = self._folder(key)
        meta = checked_meta(meta)
        try:
            self._mkdirs(folder)
            return self._publish(key, folder, data, meta)
        except OSError as exc:
            raise StoreUnavailable(f"cannot write {key} under {self.where}: {exc}") from exc

    def get(self, key: str, version_id: str | None = None) -> bytes:
        version = self._version_dir(key, version_id)
        try:
            return (version / "data").read_bytes()
        except FileNotFoundError as exc:
            raise NoSuchObject(key) from exc
        except OSError as exc:
            raise StoreUnavailable(f"cannot read {key} under {self.where}: {exc}") from exc

    def head(self, key: str, version_id: str | None = None) -> ObjectVersion | None:
        try:
            return self._describe(key, self._version_dir(key, version_id))
        except NoSuchObject:
            return None

    def versions(self, key: str) -> list[ObjectVersion]:
        folder = self._folder(key)
        return [self._describe(key, folder / name) for name in self._version_names(folder)]

    def keys(self, prefix: str) -> list[str]:
        start = self.root
        if "/" in prefix:
            start = self._path(prefix.rsplit("/", 1)[0])
        found: list[str] = []
        for dirpath, dirnames, _ in os.walk(start):
            here = Path(dirpath)
            for name in list(dirnames):
                if not name.endswith(SUFFIX):
                    continue
                dirnames.remove(name)  # a key's versions are not walked into
                key = (here / name).relative_to(self.root).as_posix().removesuffix(SUFFIX)
                if key.startswith(prefix) and self._version_names(here / name):
                    found.append(key)
        return sorted(found)

    def check(self) -> None:
        probe = self.root / f".check-{uuid.uuid4().hex}"
        try:
            self._mkdirs(self.root)
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            os.close(fd)
            probe.unlink()
        except OSError as exc:
            raise StoreUnavailable(f"cannot write under {self.where}: {exc}") from exc

    # -- paths -----------------------------------------------------------------------------

    def _path(self, key: str) -> Path:
        checked_key(key)
        if any(part.endswith(SUFFIX) for part in key.split("/")):
            raise BadKey(f"object key {key!r} has a segment ending in {SUFFIX}")
        return self.root.joinpath(*key.split("/"))

    def _folder(self, key: str) -> Path:
        path = self._path(key)
        return path.with_name(path.name + SUFFIX)

    def _version_dir(self, key: str, version_id: str | None) -> Path:
        folder = self._folder(key)
        if version_id is None:
            names = self._version_names(folder)
            if not names:
                raise NoSuchObject(key)
            return folder / names[0]
        if not VERSION_ID.fullmatch(version_id):
            raise NoSuchObject(f"{key} version {version_id}")
        return folder / version_id

    def _version_names(self, folder: Path) -> list[str]:
        """The version folders' names, newest (highest sequence) first."""
        try:
            names = [name for name in os.listdir(folder) if VERSION_ID.fullmatch(name)]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreUnavailable(f"cannot list {folder}: {exc}") from exc
        return sorted(names, key=lambda name: int(name.split("-", 1)[0]), reverse=True)

    # -- writing ---------------------------------------------------------------------------

    def _publish(self, key: str, folder: Path, data: bytes, meta: dict[str, str]) -> ObjectVersion:
        staged = folder / f".tmp-{uuid.uuid4().hex}"
        os.mkdir(staged, DIR_MODE)
        try:
            write_new(staged / "data", data)
            write_new(staged / "meta.json", json.dumps(meta, ensure_ascii=False).encode())
            sync_folder(staged)
            # One writer at a time per key picks the next sequence number (a lock file beside
            # the versions; the lock goes with the process if it dies).
            with _locked(folder / ".lock"):
                names = self._version_names(folder)
                seq = int(names[0].split("-", 1)[0]) + 1 if names else 1
                at = datetime.now(UTC)
                version_id = f"{seq:08d}-{at.strftime(STAMP)}"
                os.rename(staged, folder / version_id)
                sync_folder(folder)
                _remove_abandoned(folder, staged)
        except BaseException:
            _remove_staged(staged)
            raise
        return ObjectVersion(key=key, version_id=version_id, at=at, size=len(data), meta=meta)

    def _mkdirs(self, folder: Path) -> None:
        """`folder` and its parents under the root, each 0700 whatever the umask."""
        missing = []
        path = folder
        while not path.exists():
            missing.append(path)
            path = path.parent
        for path in reversed(missing):
            try:
                os.mkdir(path, DIR_MODE)
            except FileExistsError:
                continue
            os.chmod(path, DIR_MODE)

    # -- reading ---------------------------------------------------------------------------

    def _describe(self, key: str, version: Path) -> ObjectVersion:
        match = VERSION_ID.fullmatch(version.name)
        if match is None:
            raise NoSuchObject(key)
        try:
            size = (version / "data").stat().st_size
            meta = json.loads((version / "meta.json").read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise NoSuchObject(f"{key} version {version.name}") from exc
        except OSError as exc:
            raise StoreUnavailable(f"cannot read {key} under {self.where}: {exc}") from exc
        at = datetime.strptime(match.group(2), STAMP).replace(tzinfo=UTC)
        return ObjectVersion(key=key, version_id=version.name, at=at, size=size, meta=meta)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _remove_abandoned(folder: Path, mine: Path) -> None:
    """Temporary folders a crashed writer left: an hour old is long past any live write."""
    cutoff = time.time() - ABANDONED_AFTER_S
    for staged in folder.glob(".tmp-*"):
        with contextlib.suppress(OSError):  # another writer got there first
            if staged != mine and staged.stat().st_mtime < cutoff:
                _remove_staged(staged)


def _remove_staged(staged: Path) -> None:
    for name in ("data", "meta.json"):
        (staged / name).unlink(missing_ok=True)
    if staged.exists():
        staged.rmdir()
