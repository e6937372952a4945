"""Copies one job's output into its log, keeping the log's size and the disk's reserve.

    python -I logpump.py LOG_FD MAX_BYTES KEEP_FREE_BYTES

The job's stdout and stderr are a pipe whose other end this process reads (its stdin); it is
the log's only writer. The log keeps at most MAX_BYTES, its tail: when the next write would
pass the cap, the last half of the cap is copied to the log's start and the file cut there
(one writer, so nothing the job writes meanwhile is lost or overwritten). While the log's
filesystem has less than KEEP_FREE_BYTES free (or a write fails for want of space), output is
dropped, not written: the room left is the agent's, for its job table and the exit records;
when room comes back, one line in the log says how much was dropped.

The pump runs in a session of its own, like the job's wrapper: it outlives the agent, and
ends when the job and everything holding its output have closed the pipe. A job that writes
faster than the disk takes waits on the pipe, as it would on a full terminal.

Standard library only: the agent runs this file by path with `python -I`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import sys
import time

CHUNK = 256 * 1024
PIPE_SIZE = 1024 * 1024
LOOK_EVERY_BYTES = 1024 * 1024  # free space is looked at after this much output …
LOOK_EVERY_S = 0.5  # … or this often, whichever comes first
USAGE = "usage: logpump.py LOG_FD MAX_BYTES KEEP_FREE_BYTES"


class Log:
    """The log file, written at its end and kept under `cap` bytes (its tail)."""

    def __init__(self, fd: int, cap: int, keep_free: int) -> None:
        self.fd, self.cap, self.keep_free = fd, max(cap, 2), keep_free
        self.size = os.lseek(fd, 0, os.SEEK_END)
        self.dropped = 0
        self._since_look = 0
        self._looked_at = 0.0
        self._room = True

    def room(self, coming: int) -> bool:
        """Whether the disk has room for `coming` more bytes above the reserve (looked at
        once a MiB or twice a second, not for every write)."""
        self._since_look += coming
        now = time.monotonic()
        if self._since_look >= LOOK_EVERY_BYTES or now - self._looked_at >= LOOK_EVERY_S:
            self._since_look, self._looked_at = 0, now
            try:
                info = os.fstatvfs(self.fd)
                self._room = info.f_bavail * info.f_frsize >= self.keep_free + coming
            except OSError:
                self._room = True
        return self._room

    def write(self, data: bytes) -> None:
        if not self.room(len(data)):
            self.dropped += len(data)
            return
        if self.dropped:
            note = f"\n[paika: {self.dropped} bytes of output dropped: the disk was full]\n"
            self.dropped = 0
            self._put(note.encode())
        self._put(data)

    def _put(self, data: bytes) -> None:
        if len(data) >= self.cap:
            # One read larger than the cap (the pump fell behind): only its own tail is kept,
            # and nothing of the old log, which no longer joins on to it.
            data = data[-(self.cap // 2) :]
            self._keep_tail(0)
        elif self.size + len(data) > self.cap:
            self._keep_tail(min(self.cap // 2, self.cap - len(data)))
        view = memoryview(data)
        while view:
            try:
                done = os.pwrite(self.fd, view, self.size)
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                self.dropped += len(view)
                self._room = False
                return
            self.size += done
            view = view[done:]

    def _keep_tail(self, keep: int) -> None:
        """Move the last `keep` bytes to the start of the log and cut it there."""
        keep = max(0, min(keep, self.size))
        start = self.size - keep
        pos = 0
        while pos < keep:
            block = os.pread(self.fd, min(CHUNK, keep - pos), start + pos)
            if not block:
                break
            os.pwrite(self.fd, block, pos)
            pos += len(block)
        os.ftruncate(self.fd, pos)
        self.size = pos


def pump(source: int, log: Log) -> None:
    while True:
        try:
            data = os.read(source, CHUNK)
        except InterruptedError:
            continue
        if not data:
            return
        try:
            log.write(data)
        except OSError:
            log.dropped += len(data)  # a broken log must never block the job: keep reading


def main(args: list[str]) -> int:
    if len(args) != 3:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        fd, cap, keep_free = (int(a) for a in args)
    except ValueError:
        print(USAGE, file=sys.stderr)
        return 2
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # it ends with its job's output, not before
    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(0, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    pump(0, Log(fd, cap, keep_free))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
