"""Runs one job's command and writes its exit status to a file.

    python -I wrapper.py [--detach FD] EXITFILE -- PROGRAM [ARG …]

With --detach (how the agent starts every job) the wrapper first forks: the parent writes
"<pid> <starttime>\\n" of the child to file descriptor FD and exits at once; the child starts
a new session and carries on. So the job is never the agent's child: it survives the
agent, and a fresh agent and a restarted one watch it the same way (/proc and the exit file).

The wrapper leads its own process group; the command runs in that group. A SIGTERM (or
SIGINT, SIGHUP) sent to the wrapper is forwarded once to the whole group, so the command and
whatever it started see it exactly once. When the command ends, the wrapper writes
{"exit_code": N} or {"signal": N} plus "ended_at" to EXITFILE (atomically) and exits with the
same status.

Standard library only: the agent runs this file by path with `python -I`, so nothing in the
job's working directory or environment can shadow what it imports.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from types import FrameType

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
USAGE = "usage: wrapper.py [--detach FD] EXITFILE -- PROGRAM [ARG …]"


def write_exit(path: str, status: dict[str, int | float | None]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        json.dump(status, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def start_ticks(pid: int) -> int:
    """Field 22 (starttime) of /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read().decode(errors="replace")
    return int(raw[raw.rfind(")") + 2 :].split()[19])


def detach(report_fd: int) -> None:
    """Fork; the parent exits, the child (a new session leader) reports itself and goes on."""
    if os.fork() > 0:
        os._exit(0)  # the agent reads the report from the child, then reaps us
    os.setsid()
    pid = os.getpid()
    os.write(report_fd, f"{pid} {start_ticks(pid)}\n".encode())
    os.close(report_fd)


def run(exit_path: str, command: list[str]) -> int:
    pending: list[int] = []
    started = False

    def forward(signum: int, frame: FrameType | None) -> None:
        if not started:
            pending.append(signum)
            return
        # Send it to the group once, ignoring our own copy, then listen again.
        signal.signal(signum, signal.SIG_IGN)
        try:
            os.killpg(os.getpgrp(), signum)
        except ProcessLookupError:
            pass
        finally:
            signal.signal(signum, forward)

    for signum in FORWARDED:
        signal.signal(signum, forward)
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        print(f"paika: cannot run {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        write_exit(exit_path, {"exit_code": code, "signal": None, "ended_at": time.time()})
        return code
    started = True
    for pending_signum in pending:
        forward(pending_signum, None)
    returncode = child.wait()
    if returncode < 0:
        write_exit(exit_path, {"exit_code": None, "signal": -returncode, "ended_at": time.time()})
        return 128 - returncode
    write_exit(exit_path, {"exit_code": returncode, "signal": None, "ended_at": time.time()})
    return returncode


def main(args: list[str]) -> int:
    report_fd: int | None = None
    if args[:1] == ["--detach"] and len(args) > 1 and args[1].isdigit():
        report_fd, args = int(args[1]), args[2:]
    if len(args) < 3 or args[1] != "--":
        print(USAGE, file=sys.stderr)
        return 2
    if report_fd is not None:
        detach(report_fd)
    return run(args[0], args[2:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
