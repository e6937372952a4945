"""Runs one job's command and writes its exit status to a file.

    python -I wrapper.py [--detach FD] --spec FD EXITFILE
    python -I wrapper.py [--detach FD] [--spec FD] EXITFILE -- PROGRAM [ARG …]

With --detach (how the agent starts every job) the wrapper first forks: the parent writes
"<pid> <starttime>\\n" of the child to file descriptor FD and exits at once; the child starts
a new session and carries on. So the job is never the agent's child: it survives the
agent, and a fresh agent and a restarted one watch it the same way (/proc and the exit file).

With --spec the wrapper first reads a JSON launch spec from FD (to its end): the command
itself, its environment, working directory, umask, cgroup, and the uid, gid and groups to
run it as. The agent always passes the command there, never in argv, so no other user of
the host reads it with `ps` (a job's command often holds a token); the spec names it as
"argv" (a program and its arguments, exec'd as they are) or "script" (shell text). A
script runs as `/bin/sh -c '. /proc/self/fd/3'`: the child, once it is the job's account,
writes the text into an anonymous memory file (memfd_create, Linux 3.17 or later) at
descriptor 3 and the shell reads it from there, the first thing it runs closing that
descriptor again; so the shell's argv holds no text of the job's, any length of script
runs (argv caps one argument at 128 KiB), and the script behaves as under
`/bin/sh -c "<text>"`: the same $0, the same exit status, the same signals, with nothing
left open for the programs it starts.
The wrapper itself keeps the agent's user and an empty environment: it forks, and the child
joins the job's cgroup, drops to the job's account (groups, then gid, then uid: never back),
changes into the working directory as that account and execs the command. So nothing of the
job's own (its variables, its files) runs with the agent's rights, and the exit record stays
in a directory the job cannot write. When the command ends, what it left in its cgroup is
killed and the cgroup removed.

The wrapper leads its own process group; the command runs in that group. A SIGTERM (or
SIGINT, SIGHUP) sent to the wrapper is forwarded once to the whole group, so the command and
whatever it started see it exactly once. After such a stop, the command's own process may end
before what it started has (`sh -c "python train.py"`: the shell dies of the SIGTERM at once,
while the training saves its checkpoint): the wrapper then waits for the rest of the job (its
cgroup, else its process group) to end, and the agent kills the group when the stop's grace
period runs out; so a stop's grace is the job's, whatever shell it runs under. When the command ends, the wrapper writes
{"exit_code": N} or {"signal": N} plus "ended_at" to EXITFILE (atomically) and exits with the
same status.

Standard library only: the agent runs this file by path with `python -I`, so nothing in the
job's working directory or environment can shadow what it imports.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import sys
import time
from types import FrameType
from typing import Any

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
USAGE = (
    "usage: wrapper.py [--detach FD] --spec FD EXITFILE, the spec naming argv or script; "
    "or wrapper.py [--detach FD] [--spec FD] EXITFILE -- PROGRAM [ARG …]"
)
CGROUP_EMPTY_WAIT_S = 5.0
# A script job's shell and the descriptor it reads the script from (Linux: /proc, memfd).
SHELL = "/bin/sh"
SCRIPT_FD = 3
SCRIPT_ARGV = [SHELL, "-c", f". /proc/self/fd/{SCRIPT_FD}"]
# Put before the job's text in the memory file: the shell closes the descriptor as it starts
# (it reads the file through one of its own), so the job's programs inherit nothing more
# than under `sh -c`. On the text's first line, so the job's line numbers stay its own.
SCRIPT_PREFIX = f"exec {SCRIPT_FD}<&-;"


def write_exit(path: str, status: dict[str, int | float | None]) -> None:
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with open(fd, "w", encoding="utf-8") as out:
        json.dump(status, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def read_spec(fd: int) -> dict[str, Any]:
    with open(fd, "rb") as source:
        spec = json.loads(source.read() or b"{}")
    if not isinstance(spec, dict):
        raise ValueError("the launch spec is not a JSON object")
    argv, script = spec.get("argv"), spec.get("script")
    if argv is not None and (
        not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv)
    ):
        raise ValueError("the launch spec's argv is not a non-empty list of strings")
    if script is not None and not isinstance(script, str):
        raise ValueError("the launch spec's script is not a string")
    if argv is not None and script is not None:
        raise ValueError("the launch spec names both argv and script; give one")
    return spec


def program_of(spec: dict[str, Any]) -> list[str] | None:
    """The argv the child execs for the spec's command (None: the spec names none)."""
    if spec.get("script") is not None:
        return list(SCRIPT_ARGV)
    argv = spec.get("argv")
    return None if argv is None else list(argv)


def script_descriptor(text: str) -> None:
    """In the child, as the job's account: the script in a memory file at SCRIPT_FD, read
    from its start by the shell (open across exec; the shell closes it, see SCRIPT_PREFIX)."""
    fd = os.memfd_create("paika-job-script", 0)
    try:
        data = (SCRIPT_PREFIX + text).encode("utf-8", "surrogatepass")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        if fd != SCRIPT_FD:
            os.dup2(fd, SCRIPT_FD, inheritable=True)
    finally:
        if fd != SCRIPT_FD:
            os.close(fd)


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


def become(spec: dict[str, Any]) -> None:
    """In the child: join the job's cgroup, then drop to its account for good."""
    cgroup = spec.get("cgroup")
    if cgroup:
        try:
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as procs:
                procs.write(str(os.getpid()))
        except OSError as exc:
            print(f"paika: running without a cgroup: {exc.strerror or exc}", file=sys.stderr)
    if spec.get("uid") is not None:
        uid, gid = int(spec["uid"]), int(spec["gid"])
        os.setgroups([int(g) for g in spec.get("groups") or [gid]])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        if os.getresuid() != (uid, uid, uid) or (uid != 0 and _can_regain_root()):
            raise PermissionError(errno.EPERM, f"could not drop to uid {uid}")
    if spec.get("umask") is not None:
        os.umask(spec["umask"])
    if spec.get("cwd"):
        os.chdir(spec["cwd"])  # as the account: the kernel checks its own rights


def _can_regain_root() -> bool:
    try:
        os.setuid(0)
    except PermissionError:
        return False
    return True


def _close_inherited_fds() -> None:
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2:
            with contextlib.suppress(OSError):
                os.close(int(name))


def exec_job(command: list[str], spec: dict[str, Any]) -> None:
    """In the child: become the job and exec its command; never returns."""
    for signum in FORWARDED:
        signal.signal(signum, signal.SIG_DFL)
    try:
        _close_inherited_fds()
        become(spec)
    except OSError as exc:
        print(f"paika: cannot start the job as its account: {exc.strerror or exc}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(126)
    if spec.get("script") is not None:
        try:
            script_descriptor(spec["script"])
        except OSError as exc:
            print(
                f"paika: cannot hand the job's script to its shell: {exc.strerror or exc} "
                "(the agent needs Linux 3.17 or later: memfd_create)",
                file=sys.stderr,
            )
            sys.stderr.flush()
            os._exit(126)
    env = spec.get("env")
    try:
        if env is None:
            os.execvp(command[0], command)
        os.execvpe(command[0], command, env)
    except OSError as exc:
        print(f"paika: cannot run {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


def _zombie(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return True  # gone
    return raw[raw.rfind(")") + 2 :].startswith("Z")


def job_processes(cgroup: str | None) -> list[int]:
    """The job's live processes other than the wrapper: those in its cgroup, else those in
    the wrapper's process group."""
    me = os.getpid()
    if cgroup:
        try:
            with open(os.path.join(cgroup, "cgroup.procs")) as procs:
                pids = [p for p in procs.read().split() if p.isdigit()]
        except OSError:
            pids = []
        return [int(p) for p in pids if int(p) != me and not _zombie(p)]
    group, found = os.getpgrp(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if os.getpgid(int(name)) == group and not _zombie(name):
                found.append(int(name))
        except OSError:
            continue
    return found


def wait_for_the_rest(cgroup: str | None) -> None:
    """After a stop: wait while anything of the job still runs (it is saving its work; the
    agent kills the group, this wrapper with it, once the grace period is over)."""
    while job_processes(cgroup):
        time.sleep(0.05)


def end_cgroup(cgroup: str | None) -> None:
    """Kill what the job left behind in its cgroup and remove it."""
    if not cgroup:
        return
    with contextlib.suppress(OSError), open(os.path.join(cgroup, "cgroup.kill"), "w") as kill:
        kill.write("1")
    deadline = time.monotonic() + CGROUP_EMPTY_WAIT_S
    while True:
        try:
            os.rmdir(cgroup)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:  # left for the agent to report; never block forever
                print(f"paika: could not remove the job's cgroup {cgroup}", file=sys.stderr)
                return
            time.sleep(0.02)


def run(exit_path: str, command: list[str], spec: dict[str, Any] | None = None) -> int:
    spec = spec or {}
    pending: list[int] = []
    forwarded: list[int] = []
    started = False

    def forward(signum: int, frame: FrameType | None) -> None:
        if not started:
            pending.append(signum)
            return
        forwarded.append(signum)
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
    if spec.get("cgroup"):
        try:
            os.mkdir(spec["cgroup"], 0o755)
        except OSError as exc:
            print(f"paika: running without a cgroup: {exc.strerror or exc}", file=sys.stderr)
            spec = {**spec, "cgroup": None}
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:
        exec_job(command, spec)
    started = True
    for pending_signum in pending:
        forward(pending_signum, None)
    _, status = os.waitpid(child, 0)
    returncode = os.waitstatus_to_exitcode(status)
    if forwarded:  # a stop: what the command started may still be saving its work
        wait_for_the_rest(spec.get("cgroup"))
    end_cgroup(spec.get("cgroup"))
    if returncode < 0:
        write_exit(exit_path, {"exit_code": None, "signal": -returncode, "ended_at": time.time()})
        return 128 - returncode
    write_exit(exit_path, {"exit_code": returncode, "signal": None, "ended_at": time.time()})
    return returncode


def main(args: list[str]) -> int:
    report_fd: int | None = None
    spec: dict[str, Any] | None = None
    if args[:1] == ["--detach"] and len(args) > 1 and args[1].isdigit():
        report_fd, args = int(args[1]), args[2:]
    if args[:1] == ["--spec"] and len(args) > 1 and args[1].isdigit():
        try:
            spec = read_spec(int(args[1]))
        except (OSError, ValueError) as exc:
            print(f"paika: cannot read the job's launch spec: {exc}", file=sys.stderr)
            return 2
        args = args[2:]
    command = program_of(spec) if spec is not None else None
    if command is not None and len(args) == 1:
        pass  # the command came in the spec, out of everyone's sight
    elif len(args) >= 3 and args[1] == "--" and (spec is None or command is None):
        command = args[2:]
    else:
        print(USAGE, file=sys.stderr)
        return 2
    if report_fd is not None:
        detach(report_fd)
    return run(args[0], command, spec)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
