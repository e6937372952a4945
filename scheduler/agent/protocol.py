"""What travels between the agent and its client: frozen pydantic models and their JSON form.

Both sides use these models, so a field is named, typed and validated in one place. Building
a model, or reading one with `from_json`, raises `BadRequest` naming the first bad field
(`env.A: expected a string, got a number`); the server answers 400 with it, the client reports
a malformed response. Scalars are strict: a number is never read from a string, an integer
never from a boolean or from 1.0; lists are kept as tuples, answers' lists of GPUs and jobs as
lists. A request with a field the agent does not know is refused; an answer's unknown fields
are ignored, so an agent may add some.

Wire format (API version 1), all under /v1/:

    GET  /health                 Health
    GET  /gpus                   GpuList {"host": str, "gpus": [GpuInfo]}  (GpuInfo.job_id: holder)
    GET  /status[?since=CURSOR]  Status {"health": Health, "host": str, "gpus": [GpuInfo],
                                 "jobs": [JobInfo], "cursor": str, "more": bool,
                                 "disk": DiskState, "samples": [JobSample]}: one poll's
                                 worth in one request; with `since`, the running jobs and
                                 the ended ones changed since; `samples`: what each running
                                 job does to each of its cards (memory, SM, bandwidth)
    POST /jobs/ack               JobAck {"job_ids": [str]} -> Acked: runs whose end the
                                 scheduler has recorded; the agent forgets them later
    GET  /jobs                   JobList {"jobs": [JobInfo]}
    GET  /jobs/{id}              JobInfo
    POST /jobs                   StartRequest -> JobInfo (201 started, 200 already known:
                                 a repeat never launches twice; 409 for an id stopped first)
    POST /jobs/{id}/stop         StopRequest {"grace_s": float?} -> JobInfo (202). For an id
                                 the agent does not know: a tombstone (see JobInfo), so a start
                                 that arrives after its stop is refused and never launched
    GET  /jobs/{id}/log?lines=N  LogTail
    errors                       {"error": str} with the status of the AgentError
                                 (bodies: 413 over 1 MiB, 400 nested deeper than 32)

Times are ISO 8601 with their offset. A start is on the agent's disk before it is answered,
so an agent restarted after answering still knows the run.

Reading a status answer (8 GPUs, 64 jobs) takes about a third of the time the hand-written
readers took, JSON parsing included: see bench/agent_wire.py.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Strict,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from scheduler.agent.errors import BadRequest

API_VERSION = 1
# Where an agent listens by default, and the loopback address that an agent without a
# token is confined to (`paika agent --insecure-no-token`).
DEFAULT_PORT = 8470
LOOPBACK = "127.0.0.1"
JOB_ID_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# An image reference; never starts with '-', so it cannot be read as a runtime option.
IMAGE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")
# A POSIX portable user name (letters, digits, '.', '_', '-'; not starting with '-'), at most
# 32 characters, and not all digits (that would read as a uid): no path or shell characters.
ACCOUNT_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,31}")
# A host path to mount: absolute, made of characters that cannot end the runtime's
# `SOURCE:TARGET:ro` value early (no ':' or ',') nor start an option.
MOUNT_PATH_RE = re.compile(r"/[A-Za-z0-9._/@+=-]*")
SHM_SIZE_RE = re.compile(r"[1-9][0-9]{0,12}[bkmgBKMG]?")
MAX_MOUNTS = 32
MAX_LOG_LINES = 10_000
MAX_GRACE_S = 24 * 3600.0
MAX_ACK = 4096
# A status answer carries ended jobs up to about this many bytes of JSON (and at least one),
# so an answer always fits the scheduler's cap on answers, however long the agent's history.
JOBS_ANSWER_BYTES = 4 * 1024 * 1024

# A time on the wire is an ISO 8601 string, in Python a datetime: never a number of seconds.
Time = Annotated[datetime, Strict()]


def is_job_id(value: object) -> bool:
    """1-64 letters, digits, '.', '_', '-', and not '.' or '..' (it names files and URLs)."""
    return isinstance(value, str) and bool(JOB_ID_RE.fullmatch(value)) and value not in (".", "..")


def is_account_name(value: object) -> bool:
    """A POSIX portable user name of at most 32 characters, not all digits."""
    return (
        isinstance(value, str)
        and bool(ACCOUNT_RE.fullmatch(value))
        and not value.isdigit()
        and value not in (".", "..")
    )


# ---------------------------------------------------------------- errors


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string"}.get(
        type(value), "a list" if isinstance(value, list | tuple) else "an object"
    )


_EXPECTED = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a JSON object",
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
    "datetime_type": "an ISO 8601 time",
}


def _problem(error: ErrorDetails, model: type[WireModel]) -> str:
    """What is wrong, in the words the agent has always used."""
    kind, value = error["type"], error.get("input")
    context = error.get("ctx") or {}
    if kind == "value_error":  # our own validators: the message is the problem
        return str(context.get("error", error["msg"]))
    if kind == "missing":
        return "missing"
    if kind == "extra_forbidden":
        return f"unknown field (known: {', '.join(sorted(model.model_fields))})"
    if kind == "json_invalid":
        return f"not JSON ({context.get('error', error['msg'])})"
    if kind == "enum":
        return f"expected one of {context.get('expected', '?')}, got {value!r}"
    if kind.startswith("datetime"):
        return f"expected an ISO 8601 time, got {value!r}"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, got {_kind(value)}"
    return error["msg"]


def bad_request(exc: ValidationError, model: type[WireModel]) -> BadRequest:
    """The first problem pydantic found, as BadRequest: `field.position: problem`."""
    error = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in error["loc"])
    problem = _problem(error, model)
    if not where:
        # A check across fields names its fields itself; else the whole text is at fault.
        return BadRequest(problem if error["type"] == "value_error" else f"{model.WHAT}: {problem}")
    return BadRequest(f"{where}: {problem}")


class WireModel(BaseModel):
    """A model of the wire format: frozen, and BadRequest (not pydantic's ValidationError)
    for a bad value, whether it was built in Python or read from JSON."""

    model_config = ConfigDict(frozen=True)
    WHAT: ClassVar[str] = "answer"  # names the whole text in errors that are not a field's

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise bad_request(exc, type(self)) from None

    # Reading JSON must not go through __init__ (pydantic would, for a model with an __init__
    # of its own: Python-mode validation of the parsed dict, twice the work, and strict times
    # and states would refuse their JSON strings). pydantic's RootModel marks its own the same.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def from_json(cls, text: str | bytes) -> Self:
        """Parse and validate in one pass (pydantic-core reads the JSON itself)."""
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise bad_request(exc, cls) from None

    def to_json(self) -> bytes:
        return self.model_dump_json().encode()


# ---------------------------------------------------------------- health


class Health(WireModel):
    """GET /v1/health: the agent is up; no token needed."""

    WHAT = "health"

    status: StrictStr
    agent_version: StrictStr
    api_version: StrictInt
    host: StrictStr
    simulated: StrictBool = False
    tls: StrictBool = False  # whether the agent serves TLS (older agents: absent, so False)
    # Whether it only reports its GPUs and refuses every start (older agents: absent, so False).
    report_only: StrictBool = False
    # Whether it runs as root, and so runs each job as its owner's mapped Unix account (a job
    # with no account is refused there); older agents: absent, so False.
    root: StrictBool = False


# ---------------------------------------------------------------- GPUs


class GpuProcess(WireModel):
    """A process that holds memory on a GPU. `used_memory_mib` is None where NVML cannot say;
    `sm_pct` is its own share of the card's SM time (nvmlDeviceGetProcessUtilization), None
    where the card keeps no per-process samples (older agents: absent, so None)."""

    WHAT = "process"

    pid: StrictInt
    used_memory_mib: StrictInt | None = None
    sm_pct: StrictInt | None = None


# A MIG instance is a card of its own, numbered apart from whole cards: NVML numbers whole
# cards from 0 (a host has a few dozen at most), and card P's instance in MIG slot S is
# 1000 + 100 * P + S ("GPU 1302" is card 3's slot 2). The number is stable as long as the
# card's partition is (paika never changes it), and a reader sees where an instance lives.
MIG_INDEX_BASE = 1000
MIG_SLOTS_PER_CARD = 100


def mig_index(parent: int, slot: int) -> int:
    """The index a MIG instance is reported under: card `parent`'s instance in `slot`."""
    return MIG_INDEX_BASE + MIG_SLOTS_PER_CARD * parent + slot


class GpuInfo(WireModel):
    """One GPU as the agent sees it. Measurements NVML does not support are None.

    `job_id` is the paika job that the agent started on this GPU and that still runs
    (None: free as far as paika knows; other processes may still be in `processes`).

    A MIG instance is reported as a card of its own (see mig_index), with NVML's name for it
    ("NVIDIA A100-SXM4-80GB MIG 3g.40gb"), its own memory, `mig_uuid` (its UUID, "MIG-…",
    which is what a job is bound to) and `mig_parent_index`, the card it is part of; a card
    with MIG mode on is not reported itself. Older agents: both absent, so None.
    """

    WHAT = "gpu"

    index: StrictInt
    uuid: StrictStr
    name: StrictStr
    memory_total_mib: StrictInt | None = None
    memory_used_mib: StrictInt | None = None
    utilization_pct: StrictInt | None = None
    temperature_c: StrictInt | None = None
    power_w: StrictFloat | None = None
    processes: tuple[GpuProcess, ...] = ()
    job_id: StrictStr | None = None
    # How hard the card's memory is pressed, for deciding who may share it (older agents:
    # absent, so None): the memory controller's busy % (NVML's utilization.memory), PCIe
    # traffic both ways in MB/s, and on cards with GPM (Hopper on) DRAM bandwidth in % of peak.
    memory_busy_pct: StrictInt | None = None
    pcie_mbps: StrictFloat | None = None
    dram_bw_pct: StrictFloat | None = None
    mig_uuid: StrictStr | None = None
    mig_parent_index: StrictInt | None = None

    @field_validator("processes", mode="before")
    @classmethod
    def _null_is_none(cls, value: object) -> object:
        return () if value is None else value

    @property
    def memory_free_mib(self) -> int | None:
        if self.memory_total_mib is None or self.memory_used_mib is None:
            return None
        return max(0, self.memory_total_mib - self.memory_used_mib)


class GpuList(WireModel):
    """GET /v1/gpus."""

    host: StrictStr = ""
    gpus: list[GpuInfo]


# ---------------------------------------------------------------- jobs


def _mount_path(value: str) -> str:
    if not MOUNT_PATH_RE.fullmatch(value) or any(
        part in (".", "..") for part in value.split("/")[1:]
    ):
        raise ValueError(
            f"{value!r} is not an absolute path of letters, digits and . _ / @ + = - "
            "(no '..', ':' or ',')"
        )
    return value.rstrip("/") or "/"


class Mount(WireModel):
    """A host directory bound into a job's container (read-only unless `read_only` is false)."""

    model_config = ConfigDict(extra="forbid")
    WHAT = "mount"

    source: StrictStr
    target: StrictStr
    read_only: StrictBool = True

    @field_validator("source", "target")
    @classmethod
    def _path(cls, value: str) -> str:
        return _mount_path(value)

    def volume(self) -> str:
        """The value of the runtime's --volume option."""
        return f"{self.source}:{self.target}" + (":ro" if self.read_only else "")


class ContainerOptions(WireModel):
    """The site's options for every container job (the policy file's `containers:` key).
    Each value becomes its own argv element of `<runtime> run`; none can start an option."""

    model_config = ConfigDict(extra="forbid")
    WHAT = "container"

    mounts: tuple[Mount, ...] = ()
    ipc: Literal["host"] | None = None
    shm_size: StrictStr | None = None
    network: Literal["host", "none"] | None = None

    @field_validator("mounts")
    @classmethod
    def _mounts(cls, value: tuple[Mount, ...]) -> tuple[Mount, ...]:
        if len(value) > MAX_MOUNTS:
            raise ValueError(f"{len(value)} mounts; at most {MAX_MOUNTS}")
        targets = [m.target for m in value]
        if len(set(targets)) != len(targets):
            raise ValueError(f"{targets} mounts two directories at the same target")
        return value

    @field_validator("shm_size")
    @classmethod
    def _shm_size(cls, value: str | None) -> str | None:
        if value is not None and not SHM_SIZE_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not a size such as 16g, 512m or 1073741824")
        return value

    def run_options(self) -> list[str]:
        """The options for `<runtime> run`, one argv element per value."""
        options: list[str] = []
        for mount in self.mounts:
            options += ["--volume", mount.volume()]
        if self.ipc is not None:
            options += ["--ipc", self.ipc]
        if self.shm_size is not None:
            options += ["--shm-size", self.shm_size]
        if self.network is not None:
            options += ["--network", self.network]
        return options


SHARE_MODES = ("mps", "advisory")
# `JobInfo.stopped_for` of a run on a shared card the agent stopped for taking more memory
# than it declared while the card ran short (advisory caps).
OVER_MEMORY = "over_memory"


class ShareSpec(WireModel):
    """A run on a shared card: how the host keeps it apart from the card's other runs
    (`mode`: "mps" or "advisory"), the memory it declared (MiB) and, with MPS, the
    share of the card's SMs it may use (percent; None: all). Runs with a share may sit on one
    card together; a run without one holds its cards whole."""

    model_config = ConfigDict(extra="forbid")
    WHAT = "share"

    mode: StrictStr
    memory_mib: StrictInt
    active_thread_pct: StrictInt | None = None

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        if value not in SHARE_MODES:
            raise ValueError(f"{value!r} is not a way to share a card ({', '.join(SHARE_MODES)})")
        return value

    @field_validator("memory_mib")
    @classmethod
    def _memory(cls, value: int) -> int:
        if not 1 <= value <= 16 * 1024 * 1024:
            raise ValueError(f"{value} MiB is not a card's memory (1 MiB to 16 TiB)")
        return value

    @field_validator("active_thread_pct")
    @classmethod
    def _threads(cls, value: int | None) -> int | None:
        if value is not None and not 1 <= value <= 100:
            raise ValueError(f"{value} is not a percentage of the card's SMs (1 to 100)")
        return value


class StartRequest(WireModel):
    """POST /v1/jobs: start `argv` (a list, run as is) or `shell` (run with /bin/sh -c on the host).

    The job runs as `account` (a Unix user of the host; None: the agent's own user, which an
    agent running as root refuses unless started with --allow-root-jobs), in `cwd` (else the
    account's home). Its environment is `env` plus PATH, HOME, USER, LOGNAME, SHELL, and the
    agent's CUDA_VISIBLE_DEVICES (the indices in `gpus`, comma-joined; a MIG instance's UUID in
    place of its index) and PAIKA_JOB_ID; never the agent's own. With `image` the command runs
    in a container as the account's uid:gid:
    `<runtime> run --rm --user UID:GID --gpus "device=<gpus>" --env-file FILE <container
    options> <image> <argv…>`. Invalid values raise BadRequest naming the field, on either
    side of the wire. Lists and dicts may be given for `gpus`, `argv` and `env`; they are kept
    as tuples and a copy.
    """

    model_config = ConfigDict(extra="forbid")
    WHAT = "body"

    job_id: StrictStr
    gpus: tuple[StrictInt, ...]
    argv: tuple[StrictStr, ...] | None = None
    shell: StrictStr | None = None
    env: dict[StrictStr, StrictStr] = {}
    cwd: StrictStr | None = None
    image: StrictStr | None = None
    account: StrictStr | None = None
    container: ContainerOptions | None = None
    # A job that checkpoints and resumes with no place of its own for its checkpoint: the
    # name of the folder the agent keeps for it beside its state dir (`job-<id>`, the same
    # for every run of that job on this host), told to the run as PAIKA_CHECKPOINT_DIR.
    checkpoints: StrictStr | None = None
    # On a shared card (None: the run holds its GPUs whole).
    share: ShareSpec | None = None

    @field_validator("checkpoints")
    @classmethod
    def _checkpoints(cls, value: str | None) -> str | None:
        if value is not None and (not is_job_id(value) or value.startswith(".")):
            raise ValueError(
                f"{value!r} is not a folder name of 1-64 letters, digits, '.', '_', '-' "
                "(not starting with '.')"
            )
        return value

    @field_validator("account")
    @classmethod
    def _account(cls, value: str | None) -> str | None:
        if value is not None and not is_account_name(value):
            raise ValueError(
                f"{value!r} is not a Unix user name (1-32 letters, digits, '.', '_', '-', "
                "not starting with '-' and not all digits)"
            )
        return value

    @field_validator("job_id")
    @classmethod
    def _job_id(cls, value: str) -> str:
        if not is_job_id(value):
            raise ValueError(f"{value!r} is not 1-64 characters of letters, digits, '.', '_', '-'")
        return value

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value:
            raise ValueError("at least one GPU index is required")
        for index in value:
            if index < 0:
                raise ValueError(f"{index!r} is not a GPU index (an integer >= 0)")
        if len(set(value)) != len(value):
            raise ValueError(f"{list(value)} names a GPU twice")
        return value

    @field_validator("argv")
    @classmethod
    def _argv(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("expected a non-empty list of strings")
        for arg in value:
            if "\0" in arg:
                raise ValueError(f"{arg!r} is not a string without NUL bytes")
        if not value[0]:
            raise ValueError("the program (argv[0]) is empty")
        return value

    @field_validator("shell")
    @classmethod
    def _shell(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or "\0" in value):
            raise ValueError("expected a non-empty command string")
        return value

    @field_validator("env", mode="before")
    @classmethod
    def _null_env_is_empty(cls, value: object) -> object:
        return {} if value is None else value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            if not ENV_NAME_RE.fullmatch(key):
                raise ValueError(f"{key!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)")
            if "\0" in text:
                raise ValueError(f"the value of {key} is not a string without NUL bytes")
        return value

    @field_validator("cwd")
    @classmethod
    def _cwd(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"{value!r} is not an absolute directory path")
        if value is not None and "\0" in value:
            raise ValueError("expected a directory path without NUL bytes")
        return value

    @field_validator("image")
    @classmethod
    def _image(cls, value: str | None) -> str | None:
        if value is not None and not IMAGE_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not a container image reference")
        return value

    @model_validator(mode="after")
    def _argv_or_shell(self) -> Self:
        if (self.argv is None) == (self.shell is None):
            raise ValueError("argv, shell: give exactly one of argv (a list) or shell (a string)")
        if self.image is not None:
            # A container's variables travel in an env file: one NAME=VALUE a line.
            for key, text in self.env.items():
                if "\n" in text or "\r" in text:
                    raise ValueError(
                        f"env.{key}: a container job's variable cannot hold a line break"
                    )
        return self


class JobState(StrEnum):
    """running; exited (exit_code); killed (signal); lost (gone while the agent was away,
    with no recorded exit)."""

    RUNNING = "running"
    EXITED = "exited"
    KILLED = "killed"
    LOST = "lost"


class JobInfo(WireModel):
    """A job the agent started. `command` is what the agent ran (after the container and
    shell wrapping), `account` the Unix user it runs as (None in records of older agents);
    `log_path` is on the agent's host. `stop_requested` is true once a stop
    was asked for, also while the job is still running out its grace period.

    A stop for an id the agent did not know leaves a tombstone: state `killed`,
    `stop_requested` true, no pid, no GPUs, empty command, `exit_code` null, and
    `started_at` = `ended_at` = when the stop arrived. A later start with that id is 409.

    `report_lines` are the job's own words (see scheduler/outputs.py): the agent passes them
    on unread, numbered from `report_first`, so the scheduler takes each line once."""

    WHAT = "job"

    job_id: StrictStr
    state: Annotated[JobState, Strict()]
    gpus: tuple[StrictInt, ...]
    pid: StrictInt | None = None
    command: tuple[StrictStr, ...]
    image: StrictStr | None = None
    cwd: StrictStr | None = None
    account: StrictStr | None = None
    started_at: Time
    ended_at: Time | None = None
    exit_code: StrictInt | None = None
    signal: StrictInt | None = None
    stop_requested: StrictBool = False
    log_path: StrictStr = ""
    # What the job wrote to its report file (PAIKA_REPORT_FILE), one report a line, as
    # written: the last lines the agent keeps. `report_first` is the number (from 1) of the
    # first of them; lines before it were dropped. Older agents send neither.
    report_lines: tuple[StrictStr, ...] = ()
    report_first: StrictInt = 1
    # Why the agent itself stopped the run (None: it did not): "over_memory", a run on a
    # shared card past the memory it declared while the card ran short, with the memory it
    # used (MiB). Older agents send neither.
    stopped_for: StrictStr | None = None
    used_memory_mib: StrictInt | None = None

    @field_validator("log_path", mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        return "" if value is None else value

    @property
    def running(self) -> bool:
        return self.state is JobState.RUNNING


class JobList(WireModel):
    """GET /v1/jobs."""

    jobs: list[JobInfo]


class DiskState(WireModel):
    """The filesystem of the agent's state dir (its job table, logs and exit records).
    `low`: less than twice `reserve_bytes` free: the agent takes no new job, and job logs
    stop growing at the reserve itself, which stays for the agent's own records."""

    WHAT = "disk"

    path: StrictStr
    free_bytes: StrictInt
    reserve_bytes: StrictInt
    low: StrictBool = False


class JobSample(WireModel):
    """What one running job does to one of its cards, read with this status answer.

    `memory_mib` is summed over the job's own processes on the card (its process group, its
    cgroup, or for a container job the card's processes no other job owns); `memory_peak_mib`
    the most seen since the agent began watching the run. `sm_pct` is the job's processes'
    SM busy % where the card samples per process (`sm_own` true), else the whole card's.
    `memory_busy_pct`, `pcie_mbps` and `dram_bw_pct` are the card's: a card cannot tell them
    per process. Whatever the card does not support is None."""

    WHAT = "sample"

    job_id: StrictStr
    gpu: StrictInt
    memory_mib: StrictInt | None = None
    memory_peak_mib: StrictInt | None = None
    sm_pct: StrictInt | None = None
    sm_own: StrictBool = False
    memory_busy_pct: StrictInt | None = None
    pcie_mbps: StrictFloat | None = None
    dram_bw_pct: StrictFloat | None = None


class Status(WireModel):
    """GET /v1/status: one poll's worth, the agent's health, its GPUs and its jobs.

    Asked with `?since=CURSOR` (the `cursor` of the last answer; `0` the first time), `jobs`
    holds every running job and the ended ones that changed after that cursor, oldest change
    first, as many as fit one answer (JOBS_ANSWER_BYTES); `more` says that more changes wait
    (ask again with this answer's `cursor`). A cursor of another state dir (the agent's
    table was made anew) reads as `0`. Asked without `since` (schedulers before cursors),
    every job the agent keeps. Older agents send no `cursor`: their answers hold every job."""

    WHAT = "status"

    health: Health
    host: StrictStr = ""
    gpus: list[GpuInfo]
    jobs: list[JobInfo]
    cursor: StrictStr | None = None
    more: StrictBool = False
    disk: DiskState | None = None
    # One per running job and card it holds (older agents: absent, so none).
    samples: list[JobSample] = []

    @field_validator("samples", mode="before")
    @classmethod
    def _no_samples(cls, value: object) -> object:
        return [] if value is None else value


class JobAck(WireModel):
    """POST /v1/jobs/ack: the scheduler has recorded how these runs ended (committed): the
    agent may forget them (after its `--keep-ended-s`). Running or unknown ids are skipped."""

    model_config = ConfigDict(extra="forbid")
    WHAT = "body"

    job_ids: tuple[StrictStr, ...]

    @field_validator("job_ids")
    @classmethod
    def _ids(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) > MAX_ACK:
            raise ValueError(f"{len(value)} job ids; at most {MAX_ACK} in one acknowledgement")
        for job_id in value:
            if not is_job_id(job_id):
                raise ValueError(f"{job_id!r} is not a job id")
        return value


class Acked(WireModel):
    """The answer to POST /v1/jobs/ack: how many of the runs were ended and now acknowledged."""

    WHAT = "acknowledgement"

    acked: StrictInt


class StopRequest(WireModel):
    """POST /v1/jobs/{id}/stop: SIGTERM now, SIGKILL after `grace_s` (None: the agent's default)."""

    model_config = ConfigDict(extra="forbid")
    WHAT = "body"

    grace_s: StrictFloat | None = None

    @field_validator("grace_s")
    @classmethod
    def _grace(cls, value: float | None) -> float | None:
        if value is not None and not 0 <= value <= MAX_GRACE_S:
            raise ValueError(f"{value} is not between 0 and {MAX_GRACE_S:.0f}")
        return value

    def to_json(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()  # {} for the default


class LogTail(WireModel):
    """GET /v1/jobs/{id}/log: the last lines of the job's output (stdout and stderr)."""

    WHAT = "log"

    job_id: StrictStr
    lines: tuple[StrictStr, ...]

    @property
    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


class TokenRevoked(WireModel):
    """POST /v1/token/revoke: the token this request was sent with is refused from now on
    (until the host's token file holds another one)."""

    WHAT = "revocation"

    revoked: bool
