"""The jobs an agent runs: start, watch, stop with grace, and remember across restarts.

Every job runs as `python -I wrapper.py --detach FD --spec FD EXITFILE`: the wrapper forks
away from the agent into a new session (so its pid is also the job's process group), reports
its pid and start time through the pipe FD, and runs the command, which it reads with the
rest of the launch spec from the other pipe (never from argv: `ps` shows argv to every user
of the host; see _spec). Jobs are
never the agent's children: they outlive it, and a fresh agent and a restarted one watch
them the same way. Output (stdout and stderr) goes to `<state_dir>/logs/<job_id>.log` (through
the job's log pump, below); the
wrapper writes the command's exit status to `<state_dir>/exits/<job_id>.json`, so an exit is
recorded even while no agent runs.

Jobs cannot reach the agent (see isolation.py for whom a job runs as). The wrapper keeps the
agent's user and starts the command as the job's account, with an environment of its own
(the spec: the job's variables, PATH, HOME, USER, LOGNAME, SHELL, CUDA_VISIBLE_DEVICES,
PAIKA_JOB_ID, PAIKA_REPORT_FILE; never the agent's, so never its token). The state dir and
everything in it is the agent's alone: directories 0700, files 0600; a job's log is its account's, 0600,
written through the descriptor the job inherits. So a job can neither read another's log
nor write an exit record: the exit code reported is the one the wrapper saw. A container
job's variables go to the runtime in an env file in `<state_dir>/envs/` (never in argv,
where `ps` shows them), and its container runs as the account's uid:gid. Older state dirs
are tightened to these modes when a store opens them.

The job table lives in `<state_dir>/jobs.json` (written to a temp file, fsynced, then
os.replace). A start writes it twice: a record without a pid before the launch, and the pid
after, both before the start returns. So a repeated start, even after the agent was killed
and restarted, finds the run and never launches it twice.
A new JobStore on the same state dir reloads it: a job whose wrapper still runs (same pid
and the same start time, field 22 of /proc/<pid>/stat) is re-attached; one that ended is
recorded from its exit file, or as `lost` when there is none (killed from outside, or the
agent died while launching it).
`<state_dir>/agent.lock` (flock) keeps two agents off one state dir.

A stop for a job id the store does not know leaves a tombstone: an ended record (killed,
stop requested, no pid) that refuses a later start with that id (JobConflict). The scheduler
stops a run whose start it gave up on; if that start was still on its way, it must not run.
Ended jobs, tombstones among them, stay in the table until the scheduler acknowledges them
(POST /v1/jobs/ack, sent once their end is committed in its database), and `keep_ended_s`
after that; then the record and its exit file go. Every change of a record takes the next
change number (`seq`), so a poll asks only for what changed since its last answer (`changes`,
a cursor `<epoch>-<seq>`; the epoch names this table, so a cursor of a table made anew reads
as "from the start"), in answers of bounded size.

The disk. A job's output goes into a pipe; a pump of its own (logpump.py, outliving the
agent like the wrapper) writes it to the log, keeping the log's tail under `log_max_bytes`
and writing nothing while the disk has less than `disk_reserve_bytes` free: a job cannot fill
the disk with its output. The agent also holds part of that reserve in a file
(`<state_dir>/reserve`, up to 16 MiB) that it gives up when the disk is full all the same
(a job writing its own files there), so the wrappers' exit records and the job table are
still written; it takes it back once there is room. Under twice the reserve the disk is low:
starts are refused (507, said why), the status says so, and the scheduler sends no job. Logs
of forgotten runs are removed after `logs_max_age_s`, oldest first past `logs_max_total_bytes`,
and oldest first while the disk is low; the log of a forgotten run can still be read until then.

Report files. Each run gets a file of its own to report its outputs in, one report a line
(`metric=loss:0.31 output=s3://… status=succeeded`, or a JSON object), named to the job by
PAIKA_REPORT_FILE. The files live in `<state_dir>-reports/` (a sibling: the state dir itself
is 0700, and the job must reach its file), which is the agent's and 0711: anyone may pass
through, nobody but the agent may list it, and nobody but the agent may add, rename or
replace what is in it. Each run's file has a random name and is its account's, 0600: other
users can neither find nor read it, and the job cannot swap it for a link to something the
agent may read. A container job gets the file bind-mounted at /run/paika-report. The watch
loop reads whole new lines as the file grows, and the rest when the job ends (then the file
goes); the lines are kept in the job table (the last 200, at most 32 KiB; `report_first`
counts the ones dropped) and passed up unread in JobInfo: the scheduler parses them. The file
holds blocks on disk only for what was not read yet (the read part is freed, a hole), and a
job that writes it faster than it is read has its older lines counted and dropped past
8 MiB unread: the agent reads the end.

One background thread polls the running jobs (every `poll_interval_s`): it records exits
and sends SIGKILL to the group of a job whose stop grace period has run out.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import secrets
import select
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from scheduler.agent import isolation
from scheduler.agent.errors import AgentError, BadRequest, JobConflict, JobNotFound
from scheduler.agent.gpus import GpuLoad
from scheduler.agent.isolation import JOB_PATH, JOB_UMASK, Account, RunAs, workdir_for
from scheduler.agent.protocol import (
    JOBS_ANSWER_BYTES,
    MAX_LOG_LINES,
    OVER_MEMORY,
    DiskState,
    GpuInfo,
    JobInfo,
    JobSample,
    JobState,
    ShareSpec,
    StartRequest,
    is_job_id,
)
from scheduler.agent.sampling import JobProcesses

log = logging.getLogger(__name__)

# Advisory caps (police_shares): a shared run past its declared memory by more than this, on a
# card with less than CARD_SHORT_MIB free, is stopped for it (OVER_MEMORY).
OVER_SLACK_MIB = 256
CARD_SHORT_MIB = 1024

STATE_FILE = "jobs.json"
LOCK_FILE = "agent.lock"
STATE_VERSION = 1
WRAPPER = Path(__file__).with_name("wrapper.py")
LOG_PUMP = Path(__file__).with_name("logpump.py")
RESERVE_FILE = "reserve"
# The space `paika agent` holds in a file of its own (at most this, and at most its reserve),
# given up when the disk is full so exit records and the job table can still be written.
RESERVE_FILE_MAX = 16 * 1024 * 1024
# Defaults of the agent's options (paika agent --log-max-mib … ).
LOG_MAX_BYTES = 256 * 1024 * 1024
DISK_RESERVE_BYTES = 512 * 1024 * 1024
KEEP_ENDED_S = 3600.0
LOGS_MAX_AGE_S = 14 * 86400.0
LOGS_MAX_TOTAL_BYTES = 4 * 1024 * 1024 * 1024
TIDY_EVERY_S = 10.0  # acknowledged runs and old logs are looked for this often
TOKEN_ENV = "PAIKA_AGENT_TOKEN"  # never handed on to jobs
# What a container runtime's client may take from the agent's environment (where its daemon is).
RUNTIME_ENV = (
    "DOCKER_HOST",
    "DOCKER_CONFIG",
    "DOCKER_CONTEXT",
    "CONTAINER_HOST",
    "XDG_RUNTIME_DIR",
)
PRIVATE_DIR, PRIVATE_FILE = 0o700, 0o600
SIM_UTILIZATION_ENV = "PAIKA_SIM_UTILIZATION"
SIM_MEMORY_ENV = "PAIKA_SIM_MEMORY_MIB"
SIM_MEMORY_BUSY_ENV = "PAIKA_SIM_GMEM_UTIL"  # the memory controller's busy %, 0-100
SIM_PCIE_ENV = "PAIKA_SIM_PCIE_MBPS"  # PCIe traffic both ways, MB/s
LOG_TAIL_MAX_BYTES = 8 * 1024 * 1024
REPORT_ENV = "PAIKA_REPORT_FILE"
REPORTS_DIR_MODE = 0o711  # passable, not listable: each run reaches only its own file
CONTAINER_REPORT_FILE = "/run/paika-report"
CHECKPOINT_ENV = "PAIKA_CHECKPOINT_DIR"
CONTAINER_CHECKPOINT_DIR = "/run/paika-checkpoint"
REPORT_LINES_KEPT = 200
REPORT_BYTES_KEPT = 32 * 1024
REPORT_LINE_LIMIT = 4096  # characters of one line; a longer one is cut
REPORT_READ_LIMIT = 256 * 1024  # bytes read from one file in one look
# A report file holds on disk only what was not read yet: the blocks of what was read are
# freed (a MiB at a time). Past REPORT_BACKLOG_MAX unread, lines are counted and dropped (at
# most REPORT_SKIP_PER_LOOK a look) so the agent reads the file's end, not its history.
REPORT_FREE_EVERY = 1024 * 1024
REPORT_BACKLOG_MAX = 8 * 1024 * 1024
REPORT_SKIP_PER_LOOK = 64 * 1024 * 1024
FALLOC_KEEP_SIZE, FALLOC_PUNCH_HOLE = 0x01, 0x02
# How often running jobs' report files are looked at: a job that writes without pause
# costs the agent at most one read and one save of its table this often.
REPORT_LOOK_S = 0.5
LAUNCH_TIMEOUT_S = 10.0
MIB = 1024 * 1024
PUMP_LOG_FD = 3  # the log's descriptor in the log pump


def _reaped(pid: int) -> bool:
    """Whether the agent's child `pid` has ended (and is reaped now)."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return True


# ---------------------------------------------------------------- /proc


def proc_start_ticks(pid: int) -> int | None:
    """Field 22 (starttime) of /proc/<pid>/stat; None when the process is gone or a zombie."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes().decode(errors="replace")
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself contain ') '.
    fields = raw[raw.rfind(")") + 2 :].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    try:
        return int(fields[19])
    except ValueError:
        return None


def process_alive(pid: int | None, start_ticks: int | None) -> bool:
    """The process `pid` runs and is the one that started at `start_ticks` (not a reused pid).
    False for None (a record written before its launch reported a pid)."""
    if pid is None:
        return False
    ticks = proc_start_ticks(pid)
    return ticks is not None and (start_ticks is None or ticks == start_ticks)


def _utc(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


# ---------------------------------------------------------------- one job


@dataclass
class _Job:
    """A job's record, as jobs.json holds it. `pid` is None while it is being launched (and
    for tombstones); `tombstone`: a stop came for this id before any start."""

    job_id: str
    gpus: tuple[int, ...]
    command: tuple[str, ...]
    image: str | None
    cwd: str | None
    pid: int | None
    start_ticks: int | None
    started_at: float
    log_path: str
    exit_path: str
    state: JobState = JobState.RUNNING
    ended_at: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    stop_requested: bool = False
    kill_at: float | None = None
    sigkill_sent: bool = False
    sim_utilization: float | None = None
    sim_memory_mib: int | None = None
    sim_memory_busy: float | None = None
    sim_pcie_mbps: float | None = None
    tombstone: bool = False
    account: str | None = None
    cgroup: str | None = None
    env_file: str | None = None
    report_path: str | None = None
    report_offset: int = 0  # bytes of the report file read so far
    report_lines: list[str] = field(default_factory=list)
    report_first: int = 1  # the number of report_lines[0] in the file (from 1)
    seq: int = 0  # the store's change number when this record last changed
    report_freed: int = 0  # bytes at the report file's start whose blocks were freed (not kept)
    acked_at: float | None = None  # when the scheduler said it has recorded the end
    # On a shared card: how it is kept apart ("mps", "advisory") and the memory it
    # declared (MiB). None: it holds its GPUs whole.
    share_mode: str | None = None
    share_mib: int | None = None
    # Why the agent itself stopped it (OVER_MEMORY), and the memory it then used (MiB).
    stopped_for: str | None = None
    used_memory_mib: int | None = None

    @classmethod
    def tombstone_for(cls, job_id: str, now: float) -> _Job:
        """The record of a run stopped before it started: ended as it was stopped."""
        return cls(
            job_id=job_id,
            gpus=(),
            command=(),
            image=None,
            cwd=None,
            pid=None,
            start_ticks=None,
            started_at=now,
            log_path="",
            exit_path="",
            state=JobState.KILLED,
            ended_at=now,
            stop_requested=True,
            tombstone=True,
        )

    def info(self) -> JobInfo:
        return JobInfo(
            job_id=self.job_id,
            state=self.state,
            gpus=self.gpus,
            pid=self.pid,
            command=self.command,
            image=self.image,
            cwd=self.cwd,
            account=self.account,
            started_at=datetime.fromtimestamp(self.started_at, UTC),
            ended_at=_utc(self.ended_at),
            exit_code=self.exit_code,
            signal=self.signal,
            stop_requested=self.stop_requested,
            log_path=self.log_path,
            report_lines=tuple(self.report_lines),
            report_first=self.report_first,
            stopped_for=self.stopped_for,
            used_memory_mib=self.used_memory_mib,
        )

    def to_record(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "gpus": list(self.gpus),
            "command": list(self.command),
            "image": self.image,
            "cwd": self.cwd,
            "pid": self.pid,
            "start_ticks": self.start_ticks,
            "started_at": self.started_at,
            "log_path": self.log_path,
            "exit_path": self.exit_path,
            "state": self.state.value,
            "ended_at": self.ended_at,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "stop_requested": self.stop_requested,
            "kill_at": self.kill_at,
            "sigkill_sent": self.sigkill_sent,
            "sim_utilization": self.sim_utilization,
            "sim_memory_mib": self.sim_memory_mib,
            "sim_memory_busy": self.sim_memory_busy,
            "sim_pcie_mbps": self.sim_pcie_mbps,
            "share_mode": self.share_mode,
            "share_mib": self.share_mib,
            "stopped_for": self.stopped_for,
            "used_memory_mib": self.used_memory_mib,
            "tombstone": self.tombstone,
            "account": self.account,
            "cgroup": self.cgroup,
            "env_file": self.env_file,
            "report_path": self.report_path,
            "report_offset": self.report_offset,
            "report_lines": list(self.report_lines),
            "report_first": self.report_first,
            "seq": self.seq,
            "acked_at": self.acked_at,
        }

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> _Job:
        return cls(
            job_id=str(rec["job_id"]),
            gpus=tuple(int(g) for g in rec["gpus"]),
            command=tuple(str(a) for a in rec["command"]),
            image=rec.get("image"),
            cwd=rec.get("cwd"),
            pid=None if rec.get("pid") is None else int(rec["pid"]),
            start_ticks=rec.get("start_ticks"),
            started_at=float(rec["started_at"]),
            log_path=str(rec["log_path"]),
            exit_path=str(rec["exit_path"]),
            state=JobState(rec["state"]),
            ended_at=rec.get("ended_at"),
            exit_code=rec.get("exit_code"),
            signal=rec.get("signal"),
            stop_requested=bool(rec.get("stop_requested", False)),
            kill_at=rec.get("kill_at"),
            sigkill_sent=bool(rec.get("sigkill_sent", False)),
            sim_utilization=rec.get("sim_utilization"),
            sim_memory_mib=rec.get("sim_memory_mib"),
            sim_memory_busy=rec.get("sim_memory_busy"),
            sim_pcie_mbps=rec.get("sim_pcie_mbps"),
            share_mode=rec.get("share_mode"),
            share_mib=rec.get("share_mib"),
            stopped_for=rec.get("stopped_for"),
            used_memory_mib=rec.get("used_memory_mib"),
            tombstone=bool(rec.get("tombstone", False)),
            account=rec.get("account"),
            cgroup=rec.get("cgroup"),
            env_file=rec.get("env_file"),
            report_path=rec.get("report_path"),
            report_offset=int(rec.get("report_offset") or 0),
            report_lines=[str(line) for line in rec.get("report_lines") or ()],
            report_first=int(rec.get("report_first") or 1),
            seq=int(rec.get("seq") or 0),
            acked_at=rec.get("acked_at"),
        )


def _read_exit_file(path: str) -> dict[str, Any] | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _sim_overrides(env: Mapping[str, str]) -> tuple[float | None, int | None]:
    utilization: float | None = None
    memory: int | None = None
    if SIM_UTILIZATION_ENV in env:
        try:
            utilization = float(env[SIM_UTILIZATION_ENV])
        except ValueError:
            utilization = -1.0
        if not 0.0 <= utilization <= 100.0:
            raise BadRequest(f"env: {SIM_UTILIZATION_ENV} must be a number from 0 to 100")
    if SIM_MEMORY_ENV in env:
        try:
            memory = int(env[SIM_MEMORY_ENV])
        except ValueError:
            memory = -1
        if memory < 0:
            raise BadRequest(f"env: {SIM_MEMORY_ENV} must be a whole number of MiB (>= 0)")
    return utilization, memory


def _sim_bandwidth(env: Mapping[str, str]) -> tuple[float | None, float | None]:
    """A simulated job's memory-controller busy % and PCIe MB/s, from its environment."""
    values: list[float | None] = []
    for name, top in ((SIM_MEMORY_BUSY_ENV, 100.0), (SIM_PCIE_ENV, float("inf"))):
        if name not in env:
            values.append(None)
            continue
        try:
            value = float(env[name])
        except ValueError:
            value = -1.0
        if not 0.0 <= value <= top:
            bound = "from 0 to 100" if top == 100.0 else "of 0 or more"
            raise BadRequest(f"env: {name} must be a number {bound}")
        values.append(value)
    return values[0], values[1]


def tail_lines(path: Path, lines: int) -> list[str]:
    """The last `lines` lines of a file, read from the end. A carriage return rewrites its
    line (progress bars), as on a terminal."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            end = f.tell()
            pos, data = end, b""
            while pos > 0 and data.count(b"\n") <= lines and end - pos < LOG_TAIL_MAX_BYTES:
                step = min(64 * 1024, pos)
                pos -= step
                f.seek(pos)
                data = f.read(step) + data
    except FileNotFoundError:
        return []
    text = data.decode("utf-8", errors="replace")
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    if pos > 0 and parts:
        parts.pop(0)  # a partial first line
    out = []
    for part in parts[-lines:]:
        part = part.rstrip("\r")
        out.append(part.rsplit("\r", 1)[-1])
    return out


# ---------------------------------------------------------------- the store


def cuda_devices(gpus: Iterable[int], mig_uuids: Mapping[int, str] | None = None) -> str:
    """The cards a run sees, as CUDA_VISIBLE_DEVICES and `--gpus device=` name them: a whole
    card by its index, a MIG instance by its UUID ("MIG-…"; CUDA sees no device at an index
    of a card with MIG on)."""
    named = mig_uuids or {}
    return ",".join(named.get(gpu, str(gpu)) for gpu in gpus)


class JobStore:
    """The jobs of one agent, kept in `state_dir`. Thread-safe. Call close() when done; the
    jobs themselves keep running (an agent restart must not kill training runs).

    Jobs run as the account their request names (see isolation.RunAs for the rules);
    `allow_root_jobs` lets an agent running as root run jobs as root. `use_cgroups` False keeps
    jobs out of cgroups of their own even where the host has them.
    """

    def __init__(
        self,
        state_dir: Path | str,
        *,
        container_runtime: str = "docker",
        default_grace_s: float = 30.0,
        poll_interval_s: float = 0.1,
        python: str = sys.executable,
        allow_root_jobs: bool = False,
        run_as: RunAs | None = None,
        use_cgroups: bool = True,
        report_dir: Path | str | None = None,
        checkpoint_dir: Path | str | None = None,
        log_max_bytes: int = LOG_MAX_BYTES,
        disk_reserve_bytes: int = DISK_RESERVE_BYTES,
        keep_ended_s: float = KEEP_ENDED_S,
        logs_max_age_s: float = LOGS_MAX_AGE_S,
        logs_max_total_bytes: int = LOGS_MAX_TOTAL_BYTES,
        tidy_interval_s: float = TIDY_EVERY_S,
        reserve_file_bytes: int = 0,
        simulated_gpus: bool = False,
    ) -> None:
        self.state_dir = Path(state_dir).absolute()
        # Simulated GPUs (`paika agent --simulate`): a run on a shared card with MPS gets its
        # environment, but no MPS daemon is started for it.
        self.simulated_mps = simulated_gpus
        # A running job's log keeps at most this much, its tail (logpump.py writes it).
        self.log_max_bytes = max(4096, int(log_max_bytes))
        # Free space job logs never take: the agent's own records need it. Under twice this
        # the disk is low: the agent takes no new job and says so in its status.
        self.disk_reserve_bytes = max(0, int(disk_reserve_bytes))
        # How long an ended run is kept once the scheduler has recorded its end.
        self.keep_ended_s = max(0.0, float(keep_ended_s))
        # Logs of forgotten runs go after this age, and oldest first past this total.
        self.logs_max_age_s = max(0.0, float(logs_max_age_s))
        self.logs_max_total_bytes = max(0, int(logs_max_total_bytes))
        self.tidy_interval_s = tidy_interval_s
        # Bytes held in <state_dir>/reserve (at most the reserve): `paika agent` holds
        # RESERVE_FILE_MAX; 0 (stores in tests and tools) holds none.
        self.reserve_file_bytes = max(0, min(int(reserve_file_bytes), self.disk_reserve_bytes))
        # Where jobs that checkpoint and resume keep their checkpoints when they have no
        # place of their own: one folder a job, kept across its runs on this host.
        self.checkpoint_dir = (
            Path(checkpoint_dir).absolute()
            if checkpoint_dir is not None
            else self.state_dir.with_name(f"{self.state_dir.name}-checkpoints")
        )
        # Where the runs' report files are (see the module's docstring).
        self.report_dir = (
            Path(report_dir).absolute()
            if report_dir is not None
            else self.state_dir.with_name(f"{self.state_dir.name}-reports")
        )
        self.container_runtime = container_runtime
        self.default_grace_s = default_grace_s
        self.poll_interval_s = poll_interval_s
        self.python = python
        self.run_as = run_as or RunAs.for_this_process(allow_root_jobs=allow_root_jobs)
        self._runtime_env = {k: os.environ[k] for k in RUNTIME_ENV if k in os.environ}
        self._lock = threading.RLock()
        self._jobs: dict[str, _Job] = {}
        self._helpers: list[subprocess.Popen[bytes]] = []  # `<runtime> kill` calls to reap
        self._stop = threading.Event()
        self._closed = False
        self._reports_read_at = 0.0
        self._pumps: list[int] = []  # pids of log pumps to reap (never to wait for)
        self._seq = 0  # change number: every change of a record takes the next one
        self._epoch = secrets.token_hex(6)  # names this table in cursors (kept in jobs.json)
        self._tidied_at = 0.0
        self._disk = DiskState(path=str(self.state_dir), free_bytes=0, reserve_bytes=0)
        self._make_private_dirs()
        self._lockfile = self._acquire_lock()
        try:
            self._load()
        except BaseException:
            self._lockfile.close()
            raise
        with self._lock:  # the reserve is held before any job can write
            self._look_at_disk()
            self._keep_reserve()
        self._cgroup_root = isolation.jobs_cgroup_root(self.state_dir) if use_cgroups else None
        self._thread = threading.Thread(
            target=self._watch, name=f"paika-agent-jobs:{self.state_dir.name}", daemon=True
        )
        self._thread.start()

    def _make_private_dirs(self) -> None:
        """The state dir and its folders, the agent's alone (0700; files 0600), also when an
        older agent left them readable."""
        try:
            self.state_dir.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
            owner = self.state_dir.stat().st_uid
            if owner != os.geteuid():
                raise AgentError(
                    None,
                    f"the agent state dir {self.state_dir} belongs to uid {owner}, not to the "
                    f"agent's user (uid {os.geteuid()}); chown it to the agent's user or pick "
                    "another --state-dir",
                )
            self.state_dir.chmod(PRIVATE_DIR)
            for name in ("logs", "exits", "envs"):
                folder = self.state_dir / name
                folder.mkdir(mode=PRIVATE_DIR, exist_ok=True)
                folder.chmod(PRIVATE_DIR)
                for item in folder.iterdir():
                    if not item.is_symlink():
                        item.chmod(PRIVATE_FILE)
            for item in (self.state_file, self.state_dir / LOCK_FILE):
                if item.exists():
                    item.chmod(PRIVATE_FILE)
            self.report_dir.mkdir(mode=REPORTS_DIR_MODE, parents=True, exist_ok=True)
            if self.report_dir.is_symlink() or self.report_dir.stat().st_uid != os.geteuid():
                raise AgentError(
                    None,
                    f"the report folder {self.report_dir} is not the agent's own folder; "
                    "move it away (the agent makes it again)",
                )
            self.report_dir.chmod(REPORTS_DIR_MODE)
            self.checkpoint_dir.mkdir(mode=REPORTS_DIR_MODE, parents=True, exist_ok=True)
            if (
                self.checkpoint_dir.is_symlink()
                or self.checkpoint_dir.stat().st_uid != os.geteuid()
            ):
                raise AgentError(
                    None,
                    f"the checkpoint folder {self.checkpoint_dir} is not the agent's own "
                    "folder; move it away (the agent makes it again)",
                )
            self.checkpoint_dir.chmod(REPORTS_DIR_MODE)
        except OSError as exc:
            raise AgentError(
                None, f"cannot set up the agent state dir {self.state_dir}: {exc}"
            ) from exc

    # -- lifecycle

    def _acquire_lock(self) -> IO[str]:
        path = self.state_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, PRIVATE_FILE)
        lockfile = open(fd, "a+", encoding="utf-8")  # noqa: SIM115 (held until close())
        try:
            fcntl.flock(lockfile.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lockfile.close()
            raise AgentError(
                None,
                f"another agent is using the state dir {self.state_dir} ({path} is locked); "
                "stop it or give this one another --state-dir",
            ) from None
        lockfile.seek(0)
        lockfile.truncate()
        lockfile.write(f"{os.getpid()}\n")
        lockfile.flush()
        return lockfile

    def close(self) -> None:
        """Stop watching and release the state dir. Running jobs keep running; a new
        JobStore on the same dir re-attaches to them."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        with self._lock:
            self._poll()
            self._save()
            self._lockfile.close()
            helpers, self._helpers = self._helpers, []
        isolation.release_cgroups(self._cgroup_root)
        for helper in helpers:
            try:
                helper.wait(timeout=5)
            except subprocess.TimeoutExpired:
                helper.kill()
                helper.wait()

    def __enter__(self) -> JobStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- persistence

    @property
    def state_file(self) -> Path:
        return self.state_dir / STATE_FILE

    def _load(self) -> None:
        path = self.state_file
        if not path.exists():
            return
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("version") != STATE_VERSION:
                raise ValueError(f"unknown version {data.get('version')!r}")
            jobs = [_Job.from_record(rec) for rec in data["jobs"]]
            self._epoch = str(data.get("epoch") or self._epoch)
            self._seq = max([int(data.get("seq") or 0), *(job.seq for job in jobs)])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise AgentError(
                None,
                f"cannot read the agent's job table {path}: {exc}. Jobs it lists may still be "
                "running; check them, then move the file away to start with no jobs",
            ) from exc
        now = time.time()
        for job in jobs:
            self._jobs[job.job_id] = job
            if job.state is JobState.RUNNING:
                if process_alive(job.pid, job.start_ticks):
                    log.info(
                        "re-attached to job %s (pid %s)",
                        job.job_id,
                        job.pid,
                        extra={"run_id": job.job_id},
                    )
                else:
                    if job.pid is None:
                        log.warning(
                            "job %s: the agent stopped while launching it; it may have run",
                            job.job_id,
                            extra={"run_id": job.job_id},
                        )
                    self._finish(job, now)
        self._save()

    def _save(self) -> None:
        """Write the job table; on a full disk, give up the reserve file and write again."""
        try:
            self._write_table()
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or not self._spend_reserve():
                raise
            self._write_table()

    def _write_table(self) -> None:
        data = {
            "version": STATE_VERSION,
            "epoch": self._epoch,
            "seq": self._seq,
            "jobs": [j.to_record() for j in self._jobs.values()],
        }
        tmp = self.state_file.with_suffix(".json.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
        try:
            with open(fd, "w", encoding="utf-8") as out:
                # dumps, not dump: dump runs the pure-Python encoder (a long table: seconds)
                out.write(json.dumps(data, separators=(",", ":")))
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()  # a half-written table must not hold the space it took
            raise
        os.replace(tmp, self.state_file)

    def _touch(self, job: _Job) -> None:
        """`job` changed: it takes the next change number (a poll with an older cursor gets it)."""
        self._seq += 1
        job.seq = self._seq

    # -- the disk

    @property
    def reserve_file(self) -> Path:
        return self.state_dir / RESERVE_FILE

    def _reserve_size(self) -> int:
        return self.reserve_file_bytes

    def _spend_reserve(self) -> bool:
        """Give up the reserve file (the disk is full): True when there was one to give."""
        with contextlib.suppress(OSError):
            self.reserve_file.with_suffix(".partial").unlink()
        try:
            self.reserve_file.unlink()
        except FileNotFoundError:
            return False
        log.warning(
            "the disk of %s is full: the agent gave up its reserve of %d MiB to write its "
            "records; free space there",
            self.state_dir,
            self._reserve_size() // (1024 * 1024),
        )
        return True

    def _keep_reserve(self) -> None:
        """Hold the reserve file again once the disk has room for it above the reserve."""
        size = self._reserve_size()
        if size <= 0 or self.reserve_file.exists() or self._disk.low:
            return
        if self._disk.free_bytes - size < 2 * self.disk_reserve_bytes:
            return  # taking it now would make the disk low
        partial = self.reserve_file.with_suffix(".partial")  # whole, or not there at all
        try:
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
        except OSError:
            return
        try:
            os.posix_fallocate(fd, 0, size)
            os.replace(partial, self.reserve_file)
        except OSError:
            with contextlib.suppress(OSError):
                partial.unlink()
        finally:
            os.close(fd)

    def _look_at_disk(self) -> DiskState:
        """How much room the state dir's filesystem has; a full one gives up the reserve
        file at once, so the wrappers' exit records still fit."""
        try:
            info = os.statvfs(self.state_dir)
            free = info.f_bavail * info.f_frsize
        except OSError:
            return self._disk
        if free < min(1024 * 1024, self._reserve_size()) and self._spend_reserve():
            with contextlib.suppress(OSError):
                info = os.statvfs(self.state_dir)
                free = info.f_bavail * info.f_frsize
        low = free < 2 * self.disk_reserve_bytes
        if low and not self._disk.low:
            log.warning(
                "the disk of %s is low: %d MiB free, under twice the reserve of %d MiB; no "
                "job starts here until there is room",
                self.state_dir,
                free // (1024 * 1024),
                self.disk_reserve_bytes // (1024 * 1024),
            )
        self._disk = DiskState(
            path=str(self.state_dir),
            free_bytes=free,
            reserve_bytes=self.disk_reserve_bytes,
            low=low,
        )
        return self._disk

    def disk(self) -> DiskState:
        """The state dir's filesystem now."""
        with self._lock:
            return self._look_at_disk()

    def _tidy(self, now: float) -> bool:
        """Forget ended runs the scheduler acknowledged `keep_ended_s` ago (with their exit
        records), then remove logs no run keeps: past their age, oldest first past the total,
        and, while the disk is low, oldest first until it is not. True when records went."""
        forget = [
            job
            for job in self._jobs.values()
            if job.state is not JobState.RUNNING
            and job.acked_at is not None
            and now - job.acked_at >= self.keep_ended_s
        ]
        for job in forget:
            del self._jobs[job.job_id]
            if job.exit_path:
                with contextlib.suppress(OSError):
                    os.unlink(job.exit_path)
        if forget:
            log.info("forgot %d ended runs the scheduler has recorded", len(forget))
        self._remove_old_logs(now)
        return bool(forget)

    def _remove_old_logs(self, now: float) -> None:
        kept = {Path(job.log_path).name for job in self._jobs.values() if job.log_path}
        logs: list[tuple[float, int, Path]] = []
        try:
            with os.scandir(self.state_dir / "logs") as found:
                for entry in found:
                    if entry.name in kept or not entry.is_file(follow_symlinks=False):
                        continue
                    info = entry.stat(follow_symlinks=False)
                    logs.append((info.st_mtime, info.st_blocks * 512, Path(entry.path)))
        except OSError:
            return
        logs.sort()
        total = sum(size for _, size, _ in logs)
        low = self._disk.low
        for mtime, size, path in logs:
            if now - mtime < self.logs_max_age_s and total <= self.logs_max_total_bytes and not low:
                break
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size
            if low:
                low = self._look_at_disk().low

    # -- watching

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_interval_s):
            try:
                with self._lock:
                    if self._closed:
                        return
                    if self._poll():
                        self._save()
            except Exception:  # keep watching; one bad tick must not orphan every job
                log.exception("the agent's job watcher failed; retrying")

    def _poll(self) -> bool:
        """Record exits and enforce stop deadlines. True when something changed."""
        changed = False
        now = time.time()
        look = now - self._reports_read_at >= REPORT_LOOK_S
        if look:
            self._reports_read_at = now
        for job in self._jobs.values():
            if job.state is not JobState.RUNNING:
                continue
            if look and _read_report(job, final=False):
                self._touch(job)
                changed = True
            if not process_alive(job.pid, job.start_ticks):
                self._finish(job, now)
                changed = True
                continue
            if (
                job.stop_requested
                and not job.sigkill_sent
                and job.kill_at is not None
                and now >= job.kill_at
            ):
                self._sigkill(job)
                changed = True
        self._helpers = [h for h in self._helpers if h.poll() is None]
        self._pumps = [pid for pid in self._pumps if not _reaped(pid)]
        disk = self._look_at_disk()
        every = min(1.0, self.tidy_interval_s) if disk.low else self.tidy_interval_s
        if now - self._tidied_at >= every:  # a low disk: old logs go within a second
            self._tidied_at = now
            changed |= self._tidy(now)
            self._keep_reserve()
        return changed

    def _finish(self, job: _Job, now: float) -> None:
        """The wrapper is gone: record how the job ended (its exit file, else what we know)."""
        status = _read_exit_file(job.exit_path)
        if status is not None:
            job.exit_code = status.get("exit_code")
            job.signal = status.get("signal")
            ended = status.get("ended_at")
            job.ended_at = float(ended) if isinstance(ended, int | float) else now
        else:
            job.ended_at = now
            if job.sigkill_sent:
                job.signal = signal.SIGKILL.value
        if job.signal is not None:
            job.state = JobState.KILLED
        elif job.exit_code is not None:
            job.state = JobState.EXITED
        else:
            job.state = JobState.LOST
        self._touch(job)
        if job.env_file:
            with contextlib.suppress(OSError):
                os.unlink(job.env_file)
        for _ in range(16):  # what it wrote last, also without a newline (bounded)
            if not _read_report(job, final=True):
                break
        if job.report_path:
            with contextlib.suppress(OSError):
                os.unlink(job.report_path)
        log.info(
            "job %s %s (exit code %s, signal %s)",
            job.job_id,
            job.state,
            job.exit_code,
            job.signal,
            extra={"run_id": job.job_id},
        )

    def _sigkill(self, job: _Job) -> None:
        job.sigkill_sent = True
        if job.pid is not None and process_alive(job.pid, job.start_ticks):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(job.pid, signal.SIGKILL)
            log.warning(
                "job %s outlived its grace period: sent SIGKILL",
                job.job_id,
                extra={"run_id": job.job_id},
            )
        if job.cgroup:
            isolation.kill_cgroup(job.cgroup)  # also what left the job's process group
        if job.image is not None:
            # Killing the runtime's client does not kill the container; ask the runtime.
            with contextlib.suppress(OSError):
                self._helpers.append(
                    subprocess.Popen(
                        [self.container_runtime, "kill", container_name(job.job_id)],
                        env=self._runtime_client_env(),
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                )

    # -- the API

    def _get(self, job_id: str) -> _Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise JobNotFound(f"no job {job_id!r} on this agent")
        return job

    def get(self, job_id: str) -> JobInfo:
        """The job with this id (tombstones too); JobNotFound when there is none."""
        with self._lock:
            return self._get(job_id).info()

    def known(self, job_id: str) -> JobInfo | None:
        """The job already started under this id, None when there is none; JobConflict when
        a stop for this id came first (a start for it must not launch)."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is not None and job.tombstone:
                raise JobConflict(_stopped_first(job))
            return None if job is None else job.info()

    def all_jobs(self) -> list[JobInfo]:
        with self._lock:
            return [job.info() for job in sorted(self._jobs.values(), key=lambda j: j.started_at)]

    def cursor(self) -> str:
        """Where the table's changes are now: `<epoch>-<change number>`."""
        with self._lock:
            return f"{self._epoch}-{self._seq}"

    def _after(self, since: str) -> int:
        """The change number a cursor names; 0 (from the start) for another table's cursor,
        one from this table's future, or one that does not parse."""
        epoch, _, number = since.rpartition("-")
        if epoch != self._epoch or not number.isdigit() or int(number) > self._seq:
            return 0
        return int(number)

    def changes(
        self, since: str, *, budget: int = JOBS_ANSWER_BYTES
    ) -> tuple[list[JobInfo], str, bool]:
        """(jobs, cursor, more): every running job, then the ended ones changed after
        `since`, oldest change first, until about `budget` bytes of JSON (at least one);
        `more` when changes were left for a next call with the returned cursor."""
        with self._lock:
            after = self._after(since)
            running = [j for j in self._jobs.values() if j.state is JobState.RUNNING]
            ended = sorted(
                (
                    j
                    for j in self._jobs.values()
                    if j.state is not JobState.RUNNING and j.seq > after
                ),
                key=lambda j: j.seq,
            )
            jobs = [job.info() for job in sorted(running, key=lambda j: j.started_at)]
            size, upto, more = 0, self._seq, False
            for i, job in enumerate(ended):
                info = job.info()
                size += len(info.to_json())
                if i and size > budget:
                    upto, more = ended[i - 1].seq, True
                    break
                jobs.append(info)
            return jobs, f"{self._epoch}-{upto}", more

    def acknowledge(self, job_ids: Iterable[str]) -> int:
        """The scheduler has recorded how these runs ended: each is forgotten `keep_ended_s`
        later (its log stays, see _tidy). Returns how many ended runs were newly acknowledged."""
        now = time.time()
        with self._lock:
            fresh = [
                job
                for job in (self._jobs.get(job_id) for job_id in job_ids)
                if job is not None and job.state is not JobState.RUNNING and job.acked_at is None
            ]
            for job in fresh:
                job.acked_at = now
            if fresh:
                self._save()
            return len(fresh)

    def _holders_in_the_way(self, req: StartRequest) -> list[tuple[int, str]]:
        """The running jobs that keep `req` off its GPUs: any job for a run that takes its
        GPUs whole; a job that holds its GPU whole for a run on a shared card (runs with a
        share sit on one card together: the scheduler weighed their memory)."""
        with self._lock:
            return sorted(
                (gpu, job.job_id)
                for job in self._jobs.values()
                if job.state is JobState.RUNNING and (req.share is None or job.share_mib is None)
                for gpu in job.gpus
                if gpu in req.gpus
            )

    def _share_env(self, share: ShareSpec | None) -> dict[str, str]:
        """What a run on a shared card is told: the memory it declared, for any framework
        that caps itself (PAIKA_GPU_MEMORY_MIB; TensorFlow grows its pool instead of taking
        the card); with MPS, the driver's own limits on its memory and SMs and the agent's
        control daemon to connect to."""
        if share is None:
            return {}
        env = {
            "PAIKA_GPU_MEMORY_MIB": str(share.memory_mib),
            "PAIKA_GPU_SHARE": share.mode,
            "TF_FORCE_GPU_ALLOW_GROWTH": "true",
        }
        if share.mode == "mps":
            env["CUDA_MPS_PIPE_DIRECTORY"] = str(self._mps_daemon())
            # The run sees its one card as device 0.
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={share.memory_mib}M"
            if share.active_thread_pct is not None:
                env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(share.active_thread_pct)
        return env

    def _mps_daemon(self) -> Path:
        """The pipe directory of the agent's MPS control daemon, started the first time a run
        asks for it (only shared runs connect to it: whole-card runs never see its pipe).
        Simulated GPUs need none; a host without NVIDIA's MPS refuses such a run."""
        pipes = self.state_dir / "mps" / "pipe"
        if self.simulated_mps:
            return pipes
        control = shutil.which("nvidia-cuda-mps-control")
        if control is None:
            raise AgentError(
                409,
                "this host has no nvidia-cuda-mps-control (NVIDIA's Multi-Process Service), "
                "so it cannot keep jobs on one card apart with MPS: install the driver's MPS "
                "tools, or name this host `advisory` under sharing.hosts in the policy",
            )
        if (pipes / "control").exists():
            return pipes
        logs = self.state_dir / "mps" / "log"
        for folder in (pipes, logs):
            folder.mkdir(parents=True, exist_ok=True)
        # Every job's account connects through the pipes (MPS's own default is /tmp).
        os.chmod(pipes, 0o1777)
        env = {
            **os.environ,
            "CUDA_MPS_PIPE_DIRECTORY": str(pipes),
            "CUDA_MPS_LOG_DIRECTORY": str(logs),
        }
        env.pop("CUDA_VISIBLE_DEVICES", None)
        done = subprocess.run(
            [control, "-d"], env=env, capture_output=True, text=True, timeout=30, check=False
        )
        if done.returncode != 0:
            raise AgentError(
                503,
                f"the MPS control daemon did not start ({done.stderr.strip() or done.returncode});"
                f" see {logs}",
            )
        return pipes

    def police_shares(self, samples: Sequence[JobSample], gpus: Sequence[GpuInfo]) -> list[str]:
        """Advisory caps, enforced: a run on a shared card (mode advisory) that uses more
        memory than it declared while its card runs short (under CARD_SHORT_MIB free) and
        another run is on that card is stopped, with the default grace, and says why
        (OVER_MEMORY); its neighbours never are. With MPS the driver enforces the limit
        itself. Returns the runs it stopped."""
        cards = {card.index: card for card in gpus}
        over: list[tuple[str, int]] = []
        with self._lock:
            running = [
                j for j in self._jobs.values() if j.state is JobState.RUNNING and j.pid is not None
            ]
            by_id = {j.job_id: j for j in running}
            for sample in samples:
                job = by_id.get(sample.job_id)
                if job is None or job.stop_requested or job.share_mode != "advisory":
                    continue
                used = sample.memory_mib
                if job.share_mib is None or used is None or used <= job.share_mib + OVER_SLACK_MIB:
                    continue
                card = cards.get(sample.gpu)
                if card is None or card.memory_total_mib is None or card.memory_used_mib is None:
                    continue
                if card.memory_total_mib - card.memory_used_mib >= CARD_SHORT_MIB:
                    continue  # room enough: nobody is short of it yet
                if not any(o is not job and sample.gpu in o.gpus for o in running):
                    continue
                job.stopped_for, job.used_memory_mib = OVER_MEMORY, used
                over.append((job.job_id, used))
        for job_id, used in over:
            log.warning(
                "job %s uses %s MiB on a shared card, past what it declared, while the card "
                "runs short: stopped",
                job_id,
                used,
                extra={"run_id": job_id},
            )
            self.stop(job_id)
        return [job_id for job_id, _ in over]

    def gpu_holders(self) -> dict[int, str]:
        """GPU index → id of the running job that holds it."""
        with self._lock:
            return {
                gpu: job.job_id
                for job in self._jobs.values()
                if job.state is JobState.RUNNING
                for gpu in job.gpus
            }

    def gpu_loads(self) -> list[GpuLoad]:
        """What runs on which GPU, for simulated GPUs (LoadSource)."""
        with self._lock:
            return [
                GpuLoad(
                    gpu=gpu,
                    pid=job.pid,
                    job_id=job.job_id,
                    utilization_pct=job.sim_utilization,
                    memory_mib=job.sim_memory_mib,
                    memory_busy_pct=job.sim_memory_busy,
                    pcie_mbps=job.sim_pcie_mbps,
                )
                for job in self._jobs.values()
                if job.state is JobState.RUNNING and job.pid is not None
                for gpu in job.gpus
            ]

    def running_processes(self) -> list[JobProcesses]:
        """How to find each running job's processes, for sampling what it does to its cards."""
        with self._lock:
            return [
                JobProcesses(job.job_id, job.pid, job.gpus, job.cgroup, job.image is not None)
                for job in self._jobs.values()
                if job.state is JobState.RUNNING and job.pid is not None
            ]

    def build_command(
        self,
        req: StartRequest,
        account: Account,
        env_file: Path | None = None,
        report_file: Path | None = None,
        checkpoint_dir: Path | None = None,
        mig_uuids: Mapping[int, str] | None = None,
    ) -> list[str]:
        """The job's command as the agent runs it: the request's argv, `/bin/sh -c shell`, or
        a container run as the account's uid:gid with the job's variables read from
        `env_file`, no new privileges and no capabilities but those the agent's site adds
        back (RunAs.container_caps). The shell's text is kept here as `-c`'s argument; it
        reaches the wrapper in the launch spec, never in argv (see _spec)."""
        inner = list(req.argv) if req.argv is not None else [*SHELL_C, str(req.shell)]
        if req.image is None:
            return inner
        if req.shell is not None:
            size = len(req.shell.encode("utf-8", "surrogatepass"))
            if size > CONTAINER_SCRIPT_MAX:
                raise BadRequest(
                    f"shell: the command of a container job is {size} bytes; at most "
                    f"{CONTAINER_SCRIPT_MAX} (it reaches the container in a variable, which "
                    "Linux caps at 128 KiB). Put the script in a file in the image or in a "
                    "mounted folder and run that file"
                )
        devices = cuda_devices(req.gpus, mig_uuids)
        command = [
            self.container_runtime,
            "run",
            "--rm",
            "--init",
            "--name",
            container_name(req.job_id),
            "--label",
            f"paika.job_id={req.job_id}",
            "--user",
            f"{account.uid}:{account.gid}",
        ]
        for group in account.groups:
            if group != account.gid:
                command += ["--group-add", str(group)]
        # No set-uid program, file capability or sudo in the image lifts the job above its
        # account; and the container keeps no capability the site did not add back.
        command += ["--security-opt", "no-new-privileges", "--cap-drop", "ALL"]
        for capability in self.run_as.container_caps:
            command += ["--cap-add", capability]
        # The quotes are part of the value: docker reads --gpus as CSV, and a bare
        # device=0,1 would split at the comma.
        command += ["--gpus", f'"device={devices}"']
        if env_file is not None:
            # Values travel in a file only the agent can read: argv would show them in ps.
            command += ["--env-file", str(env_file)]
        if report_file is not None:
            # The run's report file, the only thing of the agent's the container sees.
            command += [
                "--mount",
                f"type=bind,source={report_file},target={CONTAINER_REPORT_FILE}",
            ]
        if checkpoint_dir is not None:
            command += [
                "--mount",
                f"type=bind,source={checkpoint_dir},target={CONTAINER_CHECKPOINT_DIR}",
            ]
        if req.container is not None:
            command += req.container.run_options()
        return [*command, str(req.image), *inner]

    def start(
        self, req: StartRequest, *, mig_uuids: Mapping[int, str] | None = None
    ) -> tuple[JobInfo, bool]:
        """Start a job; (job, True). A job id the agent already knows: (that job, False),
        launching nothing; a tombstoned one: JobConflict; an account this agent does not run
        jobs as: AccountRefused. The job is in the state file before this returns.
        `mig_uuids`: the MIG instances among the host's cards, by index (see cuda_devices)."""
        with self._lock:
            if self._closed:
                raise AgentError(503, "the agent is shutting down")
            existing = self.known(req.job_id)
            if existing is not None:
                return existing, False
            disk = self._look_at_disk()
            if disk.low:
                raise AgentError(
                    507,
                    f"this host's disk is nearly full: {disk.free_bytes // MIB} MiB free for "
                    f"{disk.path}, under twice the agent's reserve ({disk.reserve_bytes // MIB} "
                    f"MiB); job {req.job_id} was not started. Free space there (job logs are "
                    f"in {self.state_dir / 'logs'}) or start the agent with a smaller "
                    "--disk-reserve-mib",
                )
            holders = self._holders_in_the_way(req)
            if holders:
                owners = ", ".join(f"GPU {g} by job {job}" for g, job in holders)
                raise JobConflict(f"gpus: {owners} (still running)")
            account = self.run_as.account_for(req.account)
            cwd = workdir_for(account, req.cwd)
            sim_utilization, sim_memory = _sim_overrides(req.env)
            if req.share is not None and sim_memory is None:
                # A simulated run on a shared card keeps within what it declared.
                sim_memory = req.share.memory_mib * 4 // 5
            sim_memory_busy, sim_pcie = _sim_bandwidth(req.env)
            paika_env = {
                "CUDA_VISIBLE_DEVICES": cuda_devices(req.gpus, mig_uuids),
                "PAIKA_JOB_ID": req.job_id,
                **self._share_env(req.share),
            }
            env_file = self.state_dir / "envs" / f"{req.job_id}.env"
            report_file = self.report_dir / secrets.token_urlsafe(18)
            checkpoints = (
                self._checkpoint_folder(req.checkpoints, account) if req.checkpoints else None
            )
            command = self.build_command(
                req, account, env_file if req.image else None, report_file, checkpoints, mig_uuids
            )
            log_path = self.state_dir / "logs" / f"{req.job_id}.log"
            exit_path = self.state_dir / "exits" / f"{req.job_id}.json"
            with contextlib.suppress(FileNotFoundError):
                exit_path.unlink()
            job = _Job(
                job_id=req.job_id,
                gpus=tuple(req.gpus),
                command=tuple(command),
                image=req.image,
                cwd=cwd,
                pid=None,
                start_ticks=None,
                started_at=time.time(),
                log_path=str(log_path),
                exit_path=str(exit_path),
                sim_utilization=sim_utilization,
                sim_memory_mib=sim_memory,
                sim_memory_busy=sim_memory_busy,
                sim_pcie_mbps=sim_pcie,
                account=account.name,
                cgroup=None if self._cgroup_root is None else str(self._cgroup_root / req.job_id),
                env_file=str(env_file) if req.image else None,
                report_path=str(report_file),
                share_mode=req.share.mode if req.share else None,
                share_mib=req.share.memory_mib if req.share else None,
            )
            self._make_report_file(report_file, account)
            if req.image:
                # Not CUDA_VISIBLE_DEVICES: the runtime numbers the container's GPUs from 0.
                inside = {"PAIKA_JOB_ID": req.job_id, REPORT_ENV: CONTAINER_REPORT_FILE}
                if checkpoints is not None:
                    inside[CHECKPOINT_ENV] = CONTAINER_CHECKPOINT_DIR
                _write_private(env_file, _env_file_text({**req.env, **inside}))
                spec = self._spec(job, None, {**self._runtime_client_env(), **paika_env})
            else:
                reports = {REPORT_ENV: str(report_file)}
                if checkpoints is not None:
                    reports[CHECKPOINT_ENV] = str(checkpoints)
                env = {**account.login_env(), **req.env, **paika_env, **reports}
                spec = self._spec(job, account, env)
            # On disk before the launch: an agent that dies mid-launch comes back knowing
            # the run (as lost), so a repeated start does not launch it a second time.
            self._touch(job)
            self._jobs[job.job_id] = job
            try:
                self._save()
                job.pid, job.start_ticks = self._launch(job, account, spec)
            except BaseException:
                del self._jobs[job.job_id]  # the launch failed: a retry may try again
                with contextlib.suppress(OSError):
                    report_file.unlink()
                with contextlib.suppress(OSError):
                    self._save()
                raise
            self._save()  # before the answer: a restarted agent re-attaches to this pid
            log.info(
                "started job %s as %s on GPUs %s: pid %s",
                job.job_id,
                account.name,
                job.gpus,
                job.pid,
                extra={"run_id": job.job_id},
            )
            return job.info(), True

    def _checkpoint_folder(self, name: str, account: Account) -> Path:
        """The job's checkpoint folder: its account's, 0700, made on its first run here and
        kept for the next (a requeued run on this host finds its checkpoint there)."""
        folder = self.checkpoint_dir / name
        try:
            folder.mkdir(mode=PRIVATE_DIR, exist_ok=True)
            if folder.is_symlink() or not folder.is_dir():
                raise AgentError(500, f"the checkpoint folder {folder} is not a folder")
            if self.run_as.privileged:
                os.chown(folder, account.uid, account.gid, follow_symlinks=False)
            os.chmod(folder, PRIVATE_DIR, follow_symlinks=False)
        except OSError as exc:
            raise AgentError(500, f"cannot make the checkpoint folder {folder}: {exc}") from exc
        return folder

    def _make_report_file(self, path: Path, account: Account) -> None:
        """The run's empty report file: its account's, 0600, in the agent's folder."""
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE
        )
        try:
            if self.run_as.privileged:
                os.fchown(fd, account.uid, account.gid)
            os.fchmod(fd, PRIVATE_FILE)
        finally:
            os.close(fd)

    def _runtime_client_env(self) -> dict[str, str]:
        """The container runtime's client runs as the agent's user: only its own PATH, HOME
        and where its daemon is; nothing a job chose."""
        agent = self.run_as.agent
        return {"PATH": JOB_PATH, "HOME": agent.home, **self._runtime_env}

    def _spec(self, job: _Job, account: Account | None, env: dict[str, str]) -> dict[str, Any]:
        """What the wrapper needs to start the job: as `account` (None: as the agent), and
        the command, which travels here and never in the wrapper's argv (`ps` shows argv to
        every user of the host). A shell's text goes as "script", which the wrapper hands to
        /bin/sh through a descriptor; in a container, the runtime's client passes it on in a
        variable of its own environment (`--env NAME` carries the name, not the value), and
        the container's shell takes it out of its environment before running it."""
        command = list(job.command)
        program: dict[str, Any] = {"argv": command}
        if job.image is None and len(command) == 3 and command[:2] == SHELL_C:
            program = {"script": command[2]}
        elif job.image is not None and len(command) >= 4 and command[-3:-1] == SHELL_C:
            at = len(command) - 4
            if command[at] == job.image:
                env = {**env, CONTAINER_SCRIPT_ENV: command[-1]}
                program = {
                    "argv": [
                        *command[:at],
                        "--env",
                        CONTAINER_SCRIPT_ENV,
                        job.image,
                        *CONTAINER_SHELL,
                    ]
                }
        spec: dict[str, Any] = {
            **program,
            "env": env,
            "cwd": job.cwd,
            "umask": JOB_UMASK,
            "cgroup": job.cgroup,
        }
        if account is not None and self.run_as.privileged and account.uid != 0:
            spec.update(uid=account.uid, gid=account.gid, groups=list(account.groups))
        return spec

    def _open_log(self, path: Path, account: Account) -> int:
        """The job's output: a pipe (the descriptor returned) into the job's log, which a
        pump of its own writes (logpump.py), keeping its tail under `log_max_bytes` and off
        the disk's reserve. The log is its account's, 0600. The pump leads a session of its
        own: it outlives the agent, and ends when the job's output is closed."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)
        if fd == PUMP_LOG_FD:  # dup2 onto itself would keep close-on-exec: move it
            moved = os.dup(fd)
            os.close(fd)
            fd = moved
        try:
            if self.run_as.privileged:
                os.fchown(fd, account.uid, account.gid)
            os.fchmod(fd, PRIVATE_FILE)
            read_end, write_end = os.pipe()
        except OSError:
            os.close(fd)
            raise
        try:
            self._pumps.append(
                os.posix_spawn(
                    self.python,
                    [
                        self.python,
                        "-I",
                        str(LOG_PUMP),
                        str(PUMP_LOG_FD),
                        str(self.log_max_bytes),
                        str(self.disk_reserve_bytes),
                    ],
                    {},
                    file_actions=[
                        (os.POSIX_SPAWN_DUP2, read_end, 0),
                        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                        (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                        (os.POSIX_SPAWN_DUP2, fd, PUMP_LOG_FD),
                    ],
                    setsid=True,
                )
            )
        except OSError:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
            os.close(fd)
        return write_end

    def _launch(self, job: _Job, account: Account, spec: dict[str, Any]) -> tuple[int, int]:
        """Start the wrapper detached; return its pid and start time (from its report)."""
        log_path = Path(job.log_path)
        read_fd, write_fd = os.pipe()
        spec_read, spec_write = os.pipe()
        argv = [
            self.python,
            "-I",
            str(WRAPPER),
            "--detach",
            str(write_fd),
            "--spec",
            str(spec_read),
            job.exit_path,
        ]
        try:
            out = self._open_log(log_path, account)
            try:
                launcher = subprocess.Popen(
                    argv,  # the command is in the spec: argv is for everyone's eyes (ps)
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd="/",
                    env={},  # the wrapper keeps the agent's rights: nothing of the job's
                    pass_fds=(write_fd, spec_read),
                    start_new_session=True,
                )
            finally:
                os.close(out)
        except OSError as exc:
            for fd in (read_fd, spec_write):
                os.close(fd)
            raise AgentError(500, f"cannot start the job: {exc}") from exc
        finally:
            os.close(write_fd)
            os.close(spec_read)
        _send_spec(spec_write, spec)
        with os.fdopen(read_fd, "rb") as report:
            ready, _, _ = select.select([report], [], [], LAUNCH_TIMEOUT_S)
            line = report.readline().decode(errors="replace") if ready else ""
        try:
            returncode = launcher.wait(timeout=LAUNCH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            launcher.kill()
            returncode = launcher.wait()
        try:
            pid_text, ticks_text = line.split()
            return int(pid_text), int(ticks_text)
        except ValueError:
            raise AgentError(
                500,
                f"cannot start the job: the launcher exited with status {returncode} "
                f"without reporting a pid (see {log_path})",
            ) from None

    def stop(self, job_id: str, grace_s: float | None = None) -> JobInfo:
        """SIGTERM to the job now (the wrapper hands it to the whole group), SIGKILL to the
        group after `grace_s` if it still runs. Returns at once; stopping an ended job is a
        no-op, and a second stop can only shorten the grace period."""
        grace = self.default_grace_s if grace_s is None else grace_s
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return self._bury(job_id).info()
            if job.state is not JobState.RUNNING:
                return job.info()
            kill_at = time.time() + max(0.0, grace)
            if job.stop_requested:
                job.kill_at = kill_at if job.kill_at is None else min(job.kill_at, kill_at)
            else:
                job.stop_requested = True
                job.kill_at = kill_at
                if job.pid is not None and process_alive(job.pid, job.start_ticks):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(job.pid, signal.SIGTERM)
                self._touch(job)
                log.info(
                    "stopping job %s (grace %.1f s)",
                    job.job_id,
                    grace,
                    extra={"run_id": job.job_id},
                )
            self._save()
            return job.info()

    def _bury(self, job_id: str) -> _Job:
        """Record a tombstone for a run stopped before this agent saw its start."""
        if not is_job_id(job_id):
            raise BadRequest(
                f"job_id: {job_id!r} is not 1-64 characters of letters, digits, '.', '_', '-'"
            )
        if self._closed:
            raise AgentError(503, "the agent is shutting down")
        job = _Job.tombstone_for(job_id, time.time())
        self._touch(job)
        self._jobs[job_id] = job
        try:
            self._save()
        except BaseException:
            del self._jobs[job_id]  # unsaved, it would not survive a restart: say so
            raise
        log.info(
            "job %s: stopped before it started; a start for it will be refused",
            job_id,
            extra={"run_id": job_id},
        )
        return job

    def log_tail(self, job_id: str, lines: int = 100) -> list[str]:
        """The last `lines` lines of the job's output ([] for a tombstone: it has none)."""
        if not 1 <= lines <= MAX_LOG_LINES:
            raise BadRequest(f"lines: {lines} is not between 1 and {MAX_LOG_LINES}")
        with self._lock:
            job = self._jobs.get(job_id)
            if job is not None:
                log_path = job.log_path
            elif is_job_id(job_id) and (self.state_dir / "logs" / f"{job_id}.log").is_file():
                log_path = str(self.state_dir / "logs" / f"{job_id}.log")  # a forgotten run's
            else:
                raise JobNotFound(f"no job {job_id!r} on this agent")
        return tail_lines(Path(log_path), lines) if log_path else []


def _read_report(job: _Job, *, final: bool) -> bool:
    """Take the whole lines the job added to its report file (at its end, the rest too);
    True when there were any. The file must still be a plain file: never a link."""
    if not job.report_path:
        return False
    flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(job.report_path, os.O_RDWR | flags)  # RDWR: to free what was read
    except PermissionError:
        fd = os.open(job.report_path, os.O_RDONLY | flags)
    except OSError:
        return False  # not made yet, or gone (read to its end already)
    skipped = 0
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return False
        if info.st_size < job.report_offset:  # the job emptied it: read it afresh
            job.report_offset = 0
        if info.st_size == job.report_offset:
            return False
        if info.st_size - job.report_offset > REPORT_BACKLOG_MAX:
            skipped = _skip_backlog(fd, job, info.st_size - REPORT_READ_LIMIT)
        data = os.pread(
            fd, min(info.st_size - job.report_offset, REPORT_READ_LIMIT), job.report_offset
        )
    except OSError:
        return False
    finally:
        try:
            _free_read_part(fd, job)
        finally:
            os.close(fd)
    parts = data.split(b"\n")
    rest = parts.pop()  # after the last newline: a line still being written
    if rest and (final or len(rest) >= REPORT_LINE_LIMIT):
        parts.append(rest)
        rest = b""
    job.report_offset += len(data) - len(rest)
    if not parts:
        return bool(skipped)
    for part in parts:
        line = part.decode("utf-8", errors="replace").rstrip("\r")
        job.report_lines.append(line[:REPORT_LINE_LIMIT])
    while len(job.report_lines) > REPORT_LINES_KEPT or (
        len(job.report_lines) > 1
        and sum(len(line) for line in job.report_lines) > REPORT_BYTES_KEPT
    ):
        job.report_lines.pop(0)
        job.report_first += 1
    return True


def _skip_backlog(fd: int, job: _Job, upto: int) -> int:
    """The job writes its report file faster than it is read: count (not keep) its lines up
    to `upto` (at most REPORT_SKIP_PER_LOOK a look), so the numbers of the lines after them
    stay right; the lines kept so far go too (the numbers of kept lines are consecutive).
    Returns how many lines were dropped."""
    end = min(upto, job.report_offset + REPORT_SKIP_PER_LOOK)
    pos, counted, last_line_end = job.report_offset, 0, job.report_offset
    while pos < end:
        block = os.pread(fd, min(1024 * 1024, end - pos), pos)
        if not block:
            break
        newlines = block.count(b"\n")
        if newlines:
            counted += newlines
            last_line_end = pos + block.rindex(b"\n") + 1
        pos += len(block)
    if not counted:
        return 0
    dropped = counted + len(job.report_lines)
    job.report_first += dropped
    job.report_lines = []
    job.report_offset = last_line_end
    log.warning(
        "job %s writes its report file faster than the agent reads it: %d lines dropped",
        job.job_id,
        counted,
        extra={"run_id": job.job_id},
    )
    return dropped


def _free_read_part(fd: int, job: _Job) -> None:
    """Give the disk back the blocks of what was read of the report file (a hole: the file
    keeps its size and the job its offset), once a MiB more was read; where the filesystem
    cannot punch holes, nothing."""
    upto = job.report_offset // REPORT_FREE_EVERY * REPORT_FREE_EVERY
    if upto <= job.report_freed:
        return
    job.report_freed = upto
    with contextlib.suppress(OSError, AttributeError):
        punch_hole(fd, upto)


_FALLOCATE: Any = None


def punch_hole(fd: int, length: int) -> None:
    """Free the blocks of the first `length` bytes of the file `fd` (Linux fallocate with
    PUNCH_HOLE | KEEP_SIZE); OSError where the filesystem cannot. ctypes is loaded at the
    first use: agents whose jobs write small reports never load it."""
    global _FALLOCATE
    if _FALLOCATE is None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.fallocate
        call.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
        call.restype = ctypes.c_int
        _FALLOCATE = (call, ctypes.get_errno)
    call, get_errno = _FALLOCATE
    if call(fd, FALLOC_PUNCH_HOLE | FALLOC_KEEP_SIZE, 0, length) != 0:
        code = get_errno()
        raise OSError(code, os.strerror(code))


def _stopped_first(job: _Job) -> str:
    stopped = datetime.fromtimestamp(job.started_at, UTC).isoformat()
    return (
        f"job_id: run {job.job_id!r} was stopped before it started (the stop arrived at "
        f"{stopped}); it will not be launched"
    )


def container_name(job_id: str) -> str:
    return f"paika-{job_id}"


# How a shell job's command is kept in its record (and shown in JobInfo.command); the
# wrapper runs the text from a descriptor instead (wrapper.py: SCRIPT_ARGV).
SHELL_C = ["/bin/sh", "-c"]
# A container job's shell text: in this variable of the runtime client's environment, taken
# out of the container shell's own environment before the text runs (so nothing the job
# starts inherits it), and shifted off $1 the same way: the text runs as under `sh -c`.
CONTAINER_SCRIPT_ENV = "PAIKA_SCRIPT"
CONTAINER_SHELL = [
    "/bin/sh",
    "-c",
    f'set -- "${CONTAINER_SCRIPT_ENV}"; unset {CONTAINER_SCRIPT_ENV}; eval "shift;$1"',
]
# Linux caps one argv or environment string at 128 KiB (MAX_ARG_STRLEN), "NAME=" included.
CONTAINER_SCRIPT_MAX = 128 * 1024 - len(CONTAINER_SCRIPT_ENV) - 2


def _send_spec(fd: int, spec: dict[str, Any]) -> None:
    """Hand the launch spec (the command in it) to the wrapper through a pipe; a wrapper
    that died first shows as no report. The wrapper reads it to its end before it forks,
    so a spec of any size goes through."""
    with os.fdopen(fd, "wb") as out, contextlib.suppress(BrokenPipeError):
        out.write(json.dumps(spec).encode())


def _env_file_text(env: Mapping[str, str]) -> str:
    """Variables as the runtime's --env-file reads them: NAME=VALUE, one a line."""
    return "".join(f"{name}={value}\n" for name, value in env.items())


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, PRIVATE_FILE)
    with open(fd, "w", encoding="utf-8") as out:
        out.write(text)
