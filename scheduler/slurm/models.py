"""The parts of Slurm's JSON output (`squeue --json`, `sinfo --json`, `sacct --json`,
OpenAPI v0.0.38 in Slurm 22.05) that paika reads; every other field is ignored.

The envelope's `errors` matter: `squeue --json` and `sinfo --json` exit 0 with an empty list
and an error entry when slurmctld cannot be reached, so a reply is only believed when they
are empty (`scheduler/slurm/commands.py`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

# Job states in which a job holds, or will hold, its node and GPUs.
STILL_ON = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING",
     "SIGNALING", "STAGE_OUT"}
)  # fmt: skip


class _Read(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class QueuedJob(_Read):
    """One job as squeue shows it (running, pending, and ended ones still in slurmctld's
    memory for MinJobAge)."""

    job_id: int
    name: str
    comment: str = ""
    job_state: str  # PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL …
    state_reason: str = "None"
    nodes: str = ""
    user_name: str = ""
    # The wait status as the batch shell ended (exit code × 256, or the signal number).
    exit_code: int | None = None
    gres_detail: tuple[str, ...] = ()  # e.g. "gpu:t4:2(IDX:2-3)" per node
    submit_time: int | None = None  # Unix seconds
    # While PENDING: when the backfill scheduler expects it to start (0: not worked out).
    start_time: int | None = None
    end_time: int | None = None
    time_limit: int | None = None  # minutes
    container: str | None = None  # what sbatch's --container named (Slurm's OCI); "" without

    @property
    def ended(self) -> bool:
        """Whether it is over (COMPLETING still has processes to clean up)."""
        return self.job_state not in STILL_ON

    @property
    def never_ran(self) -> bool:
        """Ended without ever being given a node (cancelled while PENDING: Slurm 22.05 keeps
        its last pending reason, no node, and start_time = end_time, the cancel)."""
        return self.ended and not self.nodes

    @property
    def pending_seconds(self) -> int | None:
        """How long Slurm held it before it ended without running (from its submission)."""
        if self.submit_time and self.end_time and self.end_time >= self.submit_time:
            return self.end_time - self.submit_time
        return None

    @property
    def refused(self) -> bool:
        """A submission slurmctld numbered and refused at once (a GRES no node has): it
        never ran, and is no run of its name."""
        return (self.job_state, self.state_reason) == ("FAILED", "BadConstraints")

    @property
    def exit_status(self) -> int | None:
        """The batch shell's exit code (None while it runs, or when a signal ended it)."""
        if self.exit_code is None or self.exit_code & 0x7F:
            return None
        return self.exit_code >> 8

    @property
    def signal(self) -> int | None:
        """The signal that ended the batch shell, if one did."""
        if self.exit_code is None:
            return None
        return (self.exit_code & 0x7F) or None


class Node(_Read):
    """One node as sinfo shows it."""

    name: str
    state: str  # idle, mixed, allocated, down, drained, draining, …
    state_flags: tuple[str, ...] = ()  # DRAIN, NOT_RESPONDING, …
    gres: str = ""  # e.g. "gpu:a100:2,gpu:t4:2"
    gres_used: str = ""
    partitions: tuple[str, ...] = ()
    reason: str = ""


class _AccountedState(_Read):
    current: str
    reason: str = "None"


class _AccountedTime(_Read):
    start: int | None = None  # Unix seconds; 0 when it never started
    end: int | None = None
    elapsed: int = 0  # seconds
    limit: int | None = None  # minutes


class _Comment(_Read):
    job: str | None = None


class _Tres(_Read):
    type: str
    name: str | None = None
    count: int | None = None


class _TresUse(_Read):
    allocated: tuple[_Tres, ...] = ()


class AccountedJob(_Read):
    """One job as slurmdbd recorded it (`sacct --json`). Its exit code is not read here:
    Slurm 22.05's JSON gives 0 for a job whose shell exited non-zero (plain sacct shows it)."""

    job_id: int
    name: str
    comment: _Comment = _Comment()
    state: _AccountedState
    time: _AccountedTime
    tres: _TresUse = _TresUse()
    nodes: str | None = None  # None until it ran
    user: str | None = None  # None in the record slurmdbd keeps before the job starts

    def gpus(self) -> int:
        """The GPUs it was given (the `gres/gpu` TRES)."""
        return next(
            (t.count or 0 for t in self.tres.allocated if t.type == "gres" and t.name == "gpu"), 0
        )

    @property
    def gpu_hours(self) -> float:
        """GPUs × elapsed wall time, in hours (what Slurm charges for GPUs)."""
        return self.gpus() * self.time.elapsed / 3600


class EndedRun(_Read):
    """A job as plain `sacct --parsable2` shows it: the exit code as Slurm's "<code>:<signal>"
    (its JSON says 0 for a shell that failed)."""

    job_id: int
    name: str
    state: str  # "CANCELLED by 0" is read as CANCELLED
    exit_code: str  # "3:0"
    elapsed_seconds: int
    nodes: str  # "None assigned" for a job that never ran
    submitted: int | None = None  # Unix seconds
    ended_at: int | None = None  # None while it is on

    @property
    def ended(self) -> bool:
        return self.state not in STILL_ON

    @property
    def never_ran(self) -> bool:
        """Ended without ever being given a node (cancelled while PENDING)."""
        return self.ended and self.nodes in ("", "None assigned")

    @property
    def pending_seconds(self) -> int | None:
        """How long Slurm held it before it ended without running (from its submission)."""
        if self.submitted and self.ended_at and self.ended_at >= self.submitted:
            return self.ended_at - self.submitted
        return None

    @property
    def exit_status(self) -> int | None:
        """The batch shell's exit code (None when a signal ended it)."""
        code, _, signal = self.exit_code.partition(":")
        if not code.isdigit() or (signal.isdigit() and int(signal)):
            return None
        return int(code)


class _Envelope(_Read):
    errors: tuple[dict[str, Any], ...] = ()


class QueueReply(_Envelope):
    """`squeue --json`."""

    jobs: tuple[QueuedJob, ...] = ()


class NodeReply(_Envelope):
    """`sinfo --json`."""

    nodes: tuple[Node, ...] = ()


class AccountingReply(_Envelope):
    """`sacct --json`."""

    jobs: tuple[AccountedJob, ...] = ()
