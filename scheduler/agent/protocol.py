"""What travels between the agent and its client: frozen dataclasses and their JSON form.

Both sides use these classes, so a field is named, typed and validated in one place.
`from_dict` raises `BadRequest` naming the first bad field; the server answers 400 with it,
the client reports a malformed response.

Wire format (API version 1), all under /v1/:

    GET  /health                 Health
    GET  /gpus                   {"host": str, "gpus": [GpuInfo]}   (GpuInfo.job_id: holder)
    GET  /jobs                   {"jobs": [JobInfo]}
    GET  /jobs/{id}              JobInfo
    POST /jobs                   StartRequest -> JobInfo (201 started, 200 already known:
                                 a repeat never launches twice; 409 for an id stopped first)
    POST /jobs/{id}/stop         {"grace_s": float?} -> JobInfo (202). For an id the agent
                                 does not know: a tombstone (see JobInfo), so a start that
                                 arrives after its stop is refused and never launched
    GET  /jobs/{id}/log?lines=N  LogTail
    errors                       {"error": str} with the status of the AgentError
                                 (bodies: 413 over 1 MiB, 400 nested deeper than 32)

A start is on the agent's disk before it is answered, so an agent restarted after answering
still knows the run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from scheduler.agent.errors import BadRequest

API_VERSION = 1
JOB_ID_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# An image reference; never starts with '-', so it cannot be read as a runtime option.
IMAGE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")
MAX_LOG_LINES = 10_000
MAX_GRACE_S = 24 * 3600.0

Json = dict[str, Any]


# ---------------------------------------------------------------- field readers


def _mapping(data: object, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise BadRequest(f"{what}: expected a JSON object, got {_kind(data)}")
    return data


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string"}.get(
        type(value), "a list" if isinstance(value, list) else "an object"
    )


def _str(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise BadRequest(f"{key}: expected a string, got {_kind(value)}")
    return value


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    return None if data.get(key) is None else _str(data, key)


def _int(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadRequest(f"{key}: expected an integer, got {_kind(value)}")
    return value


def _opt_int(data: Mapping[str, Any], key: str) -> int | None:
    return None if data.get(key) is None else _int(data, key)


def _opt_float(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise BadRequest(f"{key}: expected a number, got {_kind(value)}")
    return float(value)


def _bool(data: Mapping[str, Any], key: str, default: bool = False) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise BadRequest(f"{key}: expected true or false, got {_kind(value)}")
    return value


def _list(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    if not isinstance(value, list):
        raise BadRequest(f"{key}: expected a list, got {_kind(value)}")
    return value


def _time(data: Mapping[str, Any], key: str) -> datetime | None:
    text = _opt_str(data, key)
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise BadRequest(f"{key}: expected an ISO 8601 time, got {text!r}") from None


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


def is_job_id(value: object) -> bool:
    """1-64 letters, digits, '.', '_', '-', and not '.' or '..' (it names files and URLs)."""
    return isinstance(value, str) and bool(JOB_ID_RE.fullmatch(value)) and value not in (".", "..")


# ---------------------------------------------------------------- health


@dataclass(frozen=True)
class Health:
    """GET /v1/health: the agent is up; no token needed."""

    status: str
    agent_version: str
    api_version: int
    host: str
    simulated: bool

    def to_dict(self) -> Json:
        return {
            "status": self.status,
            "agent_version": self.agent_version,
            "api_version": self.api_version,
            "host": self.host,
            "simulated": self.simulated,
        }

    @classmethod
    def from_dict(cls, data: object) -> Health:
        d = _mapping(data, "health")
        return cls(
            status=_str(d, "status"),
            agent_version=_str(d, "agent_version"),
            api_version=_int(d, "api_version"),
            host=_str(d, "host"),
            simulated=_bool(d, "simulated"),
        )


# ---------------------------------------------------------------- GPUs


@dataclass(frozen=True)
class GpuProcess:
    """A process that holds memory on a GPU. `used_memory_mib` is None where NVML cannot say."""

    pid: int
    used_memory_mib: int | None

    def to_dict(self) -> Json:
        return {"pid": self.pid, "used_memory_mib": self.used_memory_mib}

    @classmethod
    def from_dict(cls, data: object) -> GpuProcess:
        d = _mapping(data, "process")
        return cls(pid=_int(d, "pid"), used_memory_mib=_opt_int(d, "used_memory_mib"))


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as the agent sees it. Measurements NVML does not support are None.

    `job_id` is the paika job that the agent started on this GPU and that still runs
    (None: free as far as paika knows; other processes may still be in `processes`).
    """

    index: int
    uuid: str
    name: str
    memory_total_mib: int | None
    memory_used_mib: int | None
    utilization_pct: int | None
    temperature_c: int | None
    power_w: float | None
    processes: tuple[GpuProcess, ...] = ()
    job_id: str | None = None

    @property
    def memory_free_mib(self) -> int | None:
        if self.memory_total_mib is None or self.memory_used_mib is None:
            return None
        return max(0, self.memory_total_mib - self.memory_used_mib)

    def to_dict(self) -> Json:
        return {
            "index": self.index,
            "uuid": self.uuid,
            "name": self.name,
            "memory_total_mib": self.memory_total_mib,
            "memory_used_mib": self.memory_used_mib,
            "utilization_pct": self.utilization_pct,
            "temperature_c": self.temperature_c,
            "power_w": self.power_w,
            "processes": [p.to_dict() for p in self.processes],
            "job_id": self.job_id,
        }

    @classmethod
    def from_dict(cls, data: object) -> GpuInfo:
        d = _mapping(data, "gpu")
        return cls(
            index=_int(d, "index"),
            uuid=_str(d, "uuid"),
            name=_str(d, "name"),
            memory_total_mib=_opt_int(d, "memory_total_mib"),
            memory_used_mib=_opt_int(d, "memory_used_mib"),
            utilization_pct=_opt_int(d, "utilization_pct"),
            temperature_c=_opt_int(d, "temperature_c"),
            power_w=_opt_float(d, "power_w"),
            processes=tuple(GpuProcess.from_dict(p) for p in d.get("processes") or []),
            job_id=_opt_str(d, "job_id"),
        )


# ---------------------------------------------------------------- jobs


@dataclass(frozen=True)
class StartRequest:
    """POST /v1/jobs: start `argv` (a list, run as is) or `shell` (run with /bin/sh -c on the host).

    `env` is merged over the agent's environment; the agent adds CUDA_VISIBLE_DEVICES (the
    indices in `gpus`, comma-joined) and PAIKA_JOB_ID. With `image` the command runs in a
    container: `<runtime> run --rm --gpus "device=<gpus>" -e NAME … <image> <argv…>`.
    Invalid values raise BadRequest naming the field, on either side of the wire.
    """

    job_id: str
    gpus: Sequence[int]
    argv: Sequence[str] | None = None
    shell: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    image: str | None = None

    def __post_init__(self) -> None:
        # Normalise to immutable containers (callers may pass lists and dicts).
        object.__setattr__(self, "gpus", tuple(self.gpus))
        if self.argv is not None and not isinstance(self.argv, str):
            object.__setattr__(self, "argv", tuple(self.argv))
        object.__setattr__(self, "env", dict(self.env))
        self._validate()

    def _validate(self) -> None:
        if not is_job_id(self.job_id):
            raise BadRequest(
                f"job_id: {self.job_id!r} is not 1-64 characters of letters, digits, '.', '_', '-'"
            )
        if not self.gpus:
            raise BadRequest("gpus: at least one GPU index is required")
        for index in self.gpus:
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                raise BadRequest(f"gpus: {index!r} is not a GPU index (an integer >= 0)")
        if len(set(self.gpus)) != len(self.gpus):
            raise BadRequest(f"gpus: {list(self.gpus)} names a GPU twice")
        if (self.argv is None) == (self.shell is None):
            raise BadRequest("argv, shell: give exactly one of argv (a list) or shell (a string)")
        if self.argv is not None:
            if isinstance(self.argv, str) or not self.argv:
                raise BadRequest("argv: expected a non-empty list of strings")
            for arg in self.argv:
                if not isinstance(arg, str) or "\0" in arg:
                    raise BadRequest(f"argv: {arg!r} is not a string without NUL bytes")
            if not self.argv[0]:
                raise BadRequest("argv: the program (argv[0]) is empty")
        if self.shell is not None and (
            not isinstance(self.shell, str) or not self.shell.strip() or "\0" in self.shell
        ):
            raise BadRequest("shell: expected a non-empty command string")
        for key, value in self.env.items():
            if not isinstance(key, str) or not ENV_NAME_RE.fullmatch(key):
                raise BadRequest(f"env: {key!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)")
            if not isinstance(value, str) or "\0" in value:
                raise BadRequest(f"env: the value of {key} is not a string without NUL bytes")
        if self.cwd is not None and (not isinstance(self.cwd, str) or not self.cwd):
            raise BadRequest("cwd: expected a directory path")
        if self.image is not None and (
            not isinstance(self.image, str) or not IMAGE_RE.fullmatch(self.image)
        ):
            raise BadRequest(f"image: {self.image!r} is not a container image reference")

    def to_dict(self) -> Json:
        return {
            "job_id": self.job_id,
            "gpus": list(self.gpus),
            "argv": None if self.argv is None else list(self.argv),
            "shell": self.shell,
            "env": dict(self.env),
            "cwd": self.cwd,
            "image": self.image,
        }

    @classmethod
    def from_dict(cls, data: object) -> StartRequest:
        d = _mapping(data, "body")
        known = {"job_id", "gpus", "argv", "shell", "env", "cwd", "image"}
        unknown = sorted(set(d) - known)
        if unknown:
            raise BadRequest(f"{unknown[0]}: unknown field (known: {', '.join(sorted(known))})")
        env = d.get("env")
        if env is None:
            env = {}
        if not isinstance(env, Mapping):
            raise BadRequest(f"env: expected an object of strings, got {_kind(env)}")
        argv = None if d.get("argv") is None else _list(d, "argv")
        return cls(
            job_id=_str(d, "job_id"),
            gpus=_list(d, "gpus"),
            argv=argv,
            shell=_opt_str(d, "shell"),
            env=env,
            cwd=_opt_str(d, "cwd"),
            image=_opt_str(d, "image"),
        )


class JobState(StrEnum):
    """running; exited (exit_code); killed (signal); lost (gone while the agent was away,
    with no recorded exit)."""

    RUNNING = "running"
    EXITED = "exited"
    KILLED = "killed"
    LOST = "lost"


@dataclass(frozen=True)
class JobInfo:
    """A job the agent started. `command` is what the agent ran (after the container and
    shell wrapping); `log_path` is on the agent's host. `stop_requested` is true once a stop
    was asked for, also while the job is still running out its grace period.

    A stop for an id the agent did not know leaves a tombstone: state `killed`,
    `stop_requested` true, no pid, no GPUs, empty command, `exit_code` null, and
    `started_at` = `ended_at` = when the stop arrived. A later start with that id is 409."""

    job_id: str
    state: JobState
    gpus: tuple[int, ...]
    pid: int | None
    command: tuple[str, ...]
    image: str | None
    cwd: str | None
    started_at: datetime
    ended_at: datetime | None = None
    exit_code: int | None = None
    signal: int | None = None
    stop_requested: bool = False
    log_path: str = ""

    @property
    def running(self) -> bool:
        return self.state is JobState.RUNNING

    def to_dict(self) -> Json:
        return {
            "job_id": self.job_id,
            "state": self.state.value,
            "gpus": list(self.gpus),
            "pid": self.pid,
            "command": list(self.command),
            "image": self.image,
            "cwd": self.cwd,
            "started_at": _iso(self.started_at),
            "ended_at": _iso(self.ended_at),
            "exit_code": self.exit_code,
            "signal": self.signal,
            "stop_requested": self.stop_requested,
            "log_path": self.log_path,
        }

    @classmethod
    def from_dict(cls, data: object) -> JobInfo:
        d = _mapping(data, "job")
        state = _str(d, "state")
        try:
            job_state = JobState(state)
        except ValueError:
            raise BadRequest(f"state: unknown job state {state!r}") from None
        started = _time(d, "started_at")
        if started is None:
            raise BadRequest("started_at: missing")
        gpus = _list(d, "gpus")
        command = _list(d, "command")
        if not all(isinstance(g, int) and not isinstance(g, bool) for g in gpus):
            raise BadRequest("gpus: expected a list of integers")
        if not all(isinstance(a, str) for a in command):
            raise BadRequest("command: expected a list of strings")
        return cls(
            job_id=_str(d, "job_id"),
            state=job_state,
            gpus=tuple(gpus),
            pid=_opt_int(d, "pid"),
            command=tuple(command),
            image=_opt_str(d, "image"),
            cwd=_opt_str(d, "cwd"),
            started_at=started,
            ended_at=_time(d, "ended_at"),
            exit_code=_opt_int(d, "exit_code"),
            signal=_opt_int(d, "signal"),
            stop_requested=_bool(d, "stop_requested"),
            log_path=_opt_str(d, "log_path") or "",
        )


@dataclass(frozen=True)
class StopRequest:
    """POST /v1/jobs/{id}/stop: SIGTERM now, SIGKILL after `grace_s` (None: the agent's default)."""

    grace_s: float | None = None

    def __post_init__(self) -> None:
        if self.grace_s is not None and not 0 <= self.grace_s <= MAX_GRACE_S:
            raise BadRequest(f"grace_s: {self.grace_s} is not between 0 and {MAX_GRACE_S:.0f}")

    def to_dict(self) -> Json:
        return {} if self.grace_s is None else {"grace_s": self.grace_s}

    @classmethod
    def from_dict(cls, data: object) -> StopRequest:
        d = _mapping(data, "body")
        unknown = sorted(set(d) - {"grace_s"})
        if unknown:
            raise BadRequest(f"{unknown[0]}: unknown field (known: grace_s)")
        return cls(grace_s=_opt_float(d, "grace_s"))


@dataclass(frozen=True)
class LogTail:
    """GET /v1/jobs/{id}/log: the last lines of the job's output (stdout and stderr)."""

    job_id: str
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)

    def to_dict(self) -> Json:
        return {"job_id": self.job_id, "lines": list(self.lines)}

    @classmethod
    def from_dict(cls, data: object) -> LogTail:
        d = _mapping(data, "log")
        lines = _list(d, "lines")
        if not all(isinstance(line, str) for line in lines):
            raise BadRequest("lines: expected a list of strings")
        return cls(job_id=_str(d, "job_id"), lines=tuple(lines))
