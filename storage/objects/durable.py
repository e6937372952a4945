"""Writing files that survive a crash or a power cut: the local store's versions and the
spool's entries are written whole and synced, and a new name in a folder is synced too."""

from __future__ import annotations

import os
from pathlib import Path

FILE_MODE = 0o600


def write_new(path: Path, data: bytes) -> None:
    """Create `path` (it must not exist) with `data`, 0600, synced to disk."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_folder(folder: Path) -> None:
    """Make a rename or a new name in `folder` survive a power cut."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
