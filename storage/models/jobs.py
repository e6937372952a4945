"""Jobs, their state history, their GPU-type matches, bump requests and templates."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Column, Integer, String, UniqueConstraint
from sqlmodel import Field, SQLModel

from storage.limits import (
    CHECKPOINT,
    HOST_NAME,
    OUTPUT_NAME,
    OUTPUT_SOURCE,
    PROJECT,
    ROUND,
    UNIX_ACCOUNT,
)
from storage.models.base import (
    REASON_CODE,
    SLACK_ID,
    at_field,
    json_field,
    number_field,
    text_field,
)
from storage.types import name_string


class JobState(StrEnum):
    """Where a job is in its life; `scheduler.lifecycle` says which moves are legal."""

    WAITING_DATA = "waiting_data"
    QUEUED = "queued"
    RUNNING = "running"
    # Running as far as paika knows, but its host has not answered for a while: it keeps its
    # GPUs until the host answers again (paika then takes the agent's word) or paika gives up.
    UNKNOWN = "unknown"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PREEMPTED = "preempted"


ACTIVE_STATES = frozenset(
    {JobState.WAITING_DATA, JobState.QUEUED, JobState.RUNNING, JobState.UNKNOWN, JobState.PREEMPTED}
)
# States in which a job holds GPUs on a host (its run may be alive there).
ON_HOST_STATES = frozenset({JobState.RUNNING, JobState.UNKNOWN})

# Every ORM update of a job is conditional on the version it read (optimistic locking): of
# two writers racing on one job (a cancel and a start, a done and a reconcile), exactly one
# wins and the other gets StaleDataError and starts over from the fresh row.
_VERSION = Column("version", Integer, nullable=False, server_default="0")
TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})


class Job(SQLModel, table=True):
    """A training job: what it needs, how ready it is, and where it is in its life."""

    __tablename__ = "jobs"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_type=name_string(64), index=True)
    owner: str = Field(sa_type=String(SLACK_ID), index=True)
    team_id: int = Field(foreign_key="teams.id", index=True)
    # Its priority class by name: the classes are the scheduler's policy's
    # (scheduler.policy.priority_classes), and storage, which imports nothing of it, holds the
    # name. A row made without one is normal (tests/test_one_value.py keeps this the name of
    # PriorityClass.NORMAL).
    priority: str = Field(sa_type=String(8), default="normal")
    gpus: int = 1
    # Either allowed types (None = any) and/or a floor on memory and speed per GPU.
    gpu_types: list[str] | None = json_field()
    min_memory_gib: float | None = number_field(nullable=True)
    min_speed: float | None = number_field(nullable=True)
    est_gpu_hours: float = number_field()
    data_ready: bool = True
    data_location: str | None = Field(default=None, sa_type=String(500))
    data_ready_at: datetime | None = at_field(nullable=True)
    command: str = text_field(nullable=False)
    image: str | None = Field(default=None, sa_type=String(300))
    # The Unix account its owner's mapping named when it was submitted (None: none mapped;
    # the host's agent then runs it as its own user, or refuses it when that is root).
    account: str | None = Field(default=None, sa_type=String(UNIX_ACCOUNT))
    template: str | None = Field(default=None, sa_type=name_string(64))
    # The template's version the job was submitted from, and the submission as given (the
    # parsed keys after the template's were filled in): never changed, so it can be repeated.
    template_version: int | None = None
    spec: dict[str, Any] | None = json_field()
    # What the job is part of, for the ledger's reports: a project and its round (issue 15).
    project: str | None = Field(default=None, sa_type=name_string(PROJECT), index=True)
    round: str | None = Field(default=None, sa_type=name_string(ROUND))
    state: str = Field(sa_type=String(16), index=True)
    state_reason: str | None = text_field()
    # The same reason as a code and its values (scheduler.policy.reasons), said in each
    # reader's language; None where a person typed it, or for rows written before codes.
    state_reason_code: str | None = Field(default=None, sa_type=String(REASON_CODE))
    state_reason_values: dict[str, Any] | None = json_field()
    submitted_at: datetime = at_field(index=True)
    started_at: datetime | None = at_field(nullable=True)
    ended_at: datetime | None = at_field(nullable=True)
    output: str | None = text_field()
    metrics: dict[str, Any] | None = json_field()
    # Set when paika asked the job's host to stop it (preemption, cancel): the why and the deadline.
    stop_requested_at: datetime | None = at_field(nullable=True)
    stop_reason: str | None = Field(default=None, sa_type=String(32))
    # When the job's host stopped reporting it; lost after the grace period.
    missing_since: datetime | None = at_field(nullable=True)
    exit_code: int | None = None
    attempts: int = 0  # how many times it was started
    # When the host acknowledged the current run (its start answered, or a report showed it);
    # None while a start's outcome is unknown (it timed out): then the start is sent again
    # under the same run id, never elsewhere.
    confirmed_at: datetime | None = at_field(nullable=True)
    # The secret the current run reports its outputs with (`paika report` inside the job, as
    # PAIKA_JOB_TOKEN): minted when the run starts, for that run only; never an agent's token.
    report_token: str | None = Field(default=None, sa_type=String(64))
    # How far the current run's report file is stored, per host: {"attempt": n, "hosts":
    # {host: number of the last line stored}} (a new run starts from nothing).
    report_lines_taken: dict[str, Any] | None = json_field()
    # When the owner was told the run overran its estimate (once per estimate; an extension
    # clears it).
    overrun_warned_at: datetime | None = at_field(nullable=True)
    # It declared that it checkpoints and resumes (`preemptible=yes`): paika may stop it, with
    # its grace (`preempt_grace_s`; None: the policy's default), and requeue it with its
    # progress kept; `preemptions` counts those stops; `checkpoint` is where it keeps its
    # checkpoint (None: the policy's shared root, or a folder its host's agent provides).
    preemptible: bool = Field(default=False, sa_column_kwargs={"server_default": "0"})
    preempt_grace_s: float | None = number_field(nullable=True)
    preemptions: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    checkpoint: str | None = Field(default=None, sa_type=String(CHECKPOINT))
    # It accepts a shared card (`share=yes`): one card, `min_memory_gib` of its memory; the
    # policy may place it beside another job there (issue 31). A core job never shares.
    share: bool = Field(default=False, sa_column_kwargs={"server_default": "0"})
    # One of an array (`count=`, `sweep=`, issue 32): the array's number (its first member's
    # id), its place in it (1-based, `#40.3`), how many there are, how many may run at once
    # (None: no limit) and, for a sweep, its values ({"lr": "3e-4"}). The first member also
    # keeps when its owner was told the whole array had ended (told once).
    array_id: int | None = Field(default=None, index=True)
    array_index: int | None = None
    array_size: int | None = None
    array_max_running: int | None = None
    array_values: dict[str, Any] | None = json_field()
    array_told_at: datetime | None = at_field(nullable=True)
    version: int = Field(default=0, sa_column=_VERSION)

    __mapper_args__ = {"version_id_col": _VERSION}


class JobEvent(SQLModel, table=True):
    """One state change of a job: its history, with who and why."""

    __tablename__ = "job_events"

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", index=True)
    at: datetime = at_field()
    from_state: str | None = Field(default=None, sa_type=String(16))
    to_state: str = Field(sa_type=String(16))
    actor: str = Field(sa_type=String(SLACK_ID))
    reason: str | None = text_field()
    # The reason as a code and its values (scheduler.policy.reasons); None: `reason` as typed.
    reason_code: str | None = Field(default=None, sa_type=String(REASON_CODE))
    reason_values: dict[str, Any] | None = json_field()


class OutputKind(StrEnum):
    """What a job reported: a metric's value, an artefact's location, or its own verdict."""

    METRIC = "metric"
    ARTEFACT = "artefact"
    STATUS = "status"


class OutputSource(StrEnum):
    """Who reported it: a person (`/gpu done`), the job through `paika report`, or the job's
    report file read by its host's agent."""

    PERSON = "person"
    JOB = "job"
    FILE = "file"


class JobOutput(SQLModel, table=True):
    """One thing a job produced, as reported: the output side of the ledger.

    A metric has `value`; an artefact (a checkpoint, a result) has its location in `text`
    and its label in `name`; a status has the verdict in `text`. Each report is kept, so a
    metric's history over a run stays readable; `jobs.metrics`/`jobs.output` hold the latest.
    """

    __tablename__ = "job_outputs"

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", index=True)
    attempt: int = 0
    at: datetime = at_field()
    source: str = Field(sa_type=String(OUTPUT_SOURCE))
    kind: str = Field(sa_type=String(16))
    name: str = Field(sa_type=String(OUTPUT_NAME))
    value: float | None = number_field(nullable=True)
    text: str | None = text_field()


class StartHold(SQLModel, table=True):
    """A host refused to start a job for a reason that does not change by itself (its agent's
    403: no such account there, root refused, a report-only agent): the job is not sent to
    that host again until something changes — the account its owner maps to, the host's
    agent (its version, or the host going down and up again), or an admin's release.

    Each refusal is kept (`released_at` set once it no longer holds): how many starts the
    hosts refused counts toward the job's attempts and shows in its history."""

    __tablename__ = "start_holds"

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", index=True)
    # The host by name (no key: removing the host leaves the record), and what the host was
    # when it refused: when it was added, its agent's version, when its state last changed.
    host: str = Field(sa_type=String(HOST_NAME))
    at: datetime = at_field()
    refusal: str = Field(sa_type=String(32))  # a RefusalCode
    problem: str | None = text_field()  # the agent's own words
    account: str | None = Field(default=None, sa_type=String(UNIX_ACCOUNT))  # the job's, then
    host_seen: str | None = Field(default=None, sa_type=String(100))
    released_at: datetime | None = at_field(nullable=True)
    released_why: str | None = Field(default=None, sa_type=String(32))


class DependencyKind(StrEnum):
    """What an upstream job must come to before its dependant may go on."""

    SUCCESS = "success"  # `after=#12`: #12 succeeded
    END = "end"  # `afterany=#12`: #12 ended, whatever its outcome
    DATA = "data"  # `data=after:#12`: #12 succeeded, and that makes the data ready


class DependencyState(StrEnum):
    """Where one dependency stands."""

    WAITING = "waiting"  # the upstream job has not come to it yet
    MET = "met"
    BROKEN = "broken"  # the upstream failed or was cancelled: it never will
    RELEASED = "released"  # someone let the dependant go on without it


class JobDependency(SQLModel, table=True):
    """One job waiting for another (`after=`, `afterany=`, `data=after:`). A job names only
    jobs submitted before it, so the waits form no cycle. The cycle settles each row once its
    upstream ends (scheduler/dependencies.py): met, or broken, when the dependant's owner is
    told once (`told_at`) and may cancel it or release it anyway."""

    __tablename__ = "job_dependencies"
    __table_args__ = (UniqueConstraint("job_id", "upstream_id", name="uq_job_dependencies_pair"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", index=True)
    # The job waited for, by number and without a key: a queue snapshot keeps the jobs not yet
    # ended, and a restore must keep what a waiting job waits for even when that job had ended.
    upstream_id: int = Field(index=True)
    kind: str = Field(sa_type=String(8))  # a DependencyKind
    state: str = Field(sa_type=String(8), default=DependencyState.WAITING, index=True)
    settled_at: datetime | None = at_field(nullable=True)
    settled_by: str | None = Field(default=None, sa_type=String(SLACK_ID))  # who released it
    told_at: datetime | None = at_field(nullable=True)


class Match(SQLModel, table=True):
    """The GPU type chosen for a job, the alternatives weighed, and why."""

    __tablename__ = "matches"

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", index=True)
    at: datetime = at_field()
    chosen_type: str = Field(sa_type=String(64))
    alternatives: list[dict[str, Any]] | None = json_field()
    reason: str = text_field(nullable=False)
    # The reason as a code and its values (scheduler.policy.reasons); None: rows from before.
    reason_code: str | None = Field(default=None, sa_type=String(REASON_CODE))
    reason_values: dict[str, Any] | None = json_field()


class BumpState(StrEnum):
    """A bump request is decided once."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    WITHDRAWN = "withdrawn"


class BumpRequest(SQLModel, table=True):
    """A request to change a job's priority class, decided by an approver."""

    __tablename__ = "bump_requests"

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", index=True)
    requested_by: str = Field(sa_type=String(SLACK_ID))
    from_priority: str = Field(sa_type=String(8))
    to_priority: str = Field(sa_type=String(8))
    reason: str = text_field(nullable=False)
    state: str = Field(sa_type=String(16), default=BumpState.PENDING, index=True)
    created_at: datetime = at_field()
    decided_by: str | None = Field(default=None, sa_type=String(SLACK_ID))
    decided_at: datetime | None = at_field(nullable=True)
    decision_reason: str | None = text_field()
    # paika's own decision reason (a request closed as moot) as a code and its values
    # (scheduler.policy.reasons); None where the approver typed it.
    decision_reason_code: str | None = Field(default=None, sa_type=String(REASON_CODE))
    decision_reason_values: dict[str, Any] | None = json_field()
    # Where the approval message with the buttons was posted, so it can be updated however
    # the request is decided (button or text command).
    message_channel: str | None = Field(default=None, sa_type=String(32))
    message_ts: str | None = Field(default=None, sa_type=String(32))


class Template(SQLModel, table=True):
    """A team's saved submit fields, reused with `submit template=NAME`."""

    __tablename__ = "templates"
    __table_args__ = (UniqueConstraint("team_id", "name", name="uq_templates_team_name"),)

    id: int | None = Field(default=None, primary_key=True)
    team_id: int = Field(foreign_key="teams.id", index=True)
    name: str = Field(sa_type=name_string(64))
    fields: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    # The latest version (template_versions keeps every one).
    version: int = Field(default=1, sa_column_kwargs={"server_default": "1"})
    created_by: str = Field(sa_type=String(SLACK_ID))
    created_at: datetime = at_field()
    updated_at: datetime = at_field()
