"""What the services hand to the faces: plain frozen copies of the stored rows.

A result that carried ORM rows would let a renderer read (or write) the database after its
unit of work had ended, and would tie every face to the tables. So each service copies what
people are shown into one of these records at its boundary (`of`), and the faces import
nothing of `storage`.

The words the faces compare against are re-exported here rather than copied, so there is one
definition of each and a face names them through the scheduler: job states, bump states and
roles are the database's own, the priority classes the policy's
(scheduler.policy.priority_classes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from scheduler.policy.priority_classes import PriorityClass
from scheduler.policy.reasons import Reason, reason_of
from storage.models import (
    BumpRequest,
    BumpState,
    Job,
    JobEvent,
    JobState,
    LedgerEntry,
    Quota,
    Role,
)

__all__ = [
    "BumpRecord",
    "BumpState",
    "EventRecord",
    "JobRecord",
    "JobState",
    "LedgerRecord",
    "PriorityClass",
    "QuotaRecord",
    "Role",
]


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job as people see it: what it asks for, where it is in its life, what it produced."""

    id: int
    name: str
    owner: str
    team_id: int
    priority: str
    gpus: int
    gpu_types: tuple[str, ...] | None
    min_memory_gib: float | None
    min_speed: float | None
    est_gpu_hours: float
    data_ready: bool
    data_location: str | None
    command: str
    image: str | None
    template: str | None
    template_version: int | None
    state: str
    state_reason: str | None
    submitted_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    output: str | None
    metrics: Mapping[str, Any] | None
    # It accepts a shared card (`share=yes`): one card, `min_memory_gib` of its memory.
    share: bool = False
    # `state_reason` as a code and its values, for the faces to say in the reader's language
    # (None: typed by a person, or stored before codes: shown as stored).
    state_why: Reason | None = None

    @property
    def shares_card(self) -> bool:
        """Whether it may run on a shared card: it said share=yes and is not core work (a
        core job takes whole cards, whatever it said before a bump)."""
        return self.share and self.priority != PriorityClass.CORE

    @classmethod
    def of(cls, job: Job) -> JobRecord:
        """The record of a stored (flushed) job."""
        return cls(
            id=job.id or 0,
            name=job.name,
            owner=job.owner,
            team_id=job.team_id,
            priority=job.priority,
            gpus=job.gpus,
            gpu_types=tuple(job.gpu_types) if job.gpu_types is not None else None,
            min_memory_gib=job.min_memory_gib,
            min_speed=job.min_speed,
            est_gpu_hours=job.est_gpu_hours,
            data_ready=job.data_ready,
            data_location=job.data_location,
            command=job.command,
            image=job.image,
            template=job.template,
            template_version=job.template_version,
            state=job.state,
            state_reason=job.state_reason,
            submitted_at=job.submitted_at,
            started_at=job.started_at,
            ended_at=job.ended_at,
            output=job.output,
            metrics=dict(job.metrics) if job.metrics is not None else None,
            share=bool(job.share),
            state_why=reason_of(job.state_reason_code, job.state_reason_values),
        )

    @classmethod
    def of_columns(cls, row: Mapping[Any, Any]) -> JobRecord:
        """The record of a job read as plain columns (a listing of thousands skips the ORM):
        `row` has one entry per field, as `storage.queries.jobs.shown_jobs` selects them."""
        fields = dict(row)
        types = fields["gpu_types"]
        fields["gpu_types"] = tuple(types) if types is not None else None
        code, values = fields.pop("state_reason_code"), fields.pop("state_reason_values")
        return cls(**fields, state_why=reason_of(code, values))


@dataclass(frozen=True, slots=True)
class BumpRecord:
    """A request to change a job's priority class, and its decision once made."""

    id: int
    job_id: int
    requested_by: str
    from_priority: str
    to_priority: str
    reason: str
    state: str
    created_at: datetime
    decided_by: str | None
    decided_at: datetime | None
    decision_reason: str | None
    # Where the approval message was posted, so that a decision updates that message.
    message_channel: str | None
    message_ts: str | None
    # `decision_reason` as a code when paika gave it (None: the approver's words, as typed).
    decision_why: Reason | None = None

    @classmethod
    def of(cls, request: BumpRequest) -> BumpRecord:
        return cls(
            id=request.id or 0,
            job_id=request.job_id,
            requested_by=request.requested_by,
            from_priority=request.from_priority,
            to_priority=request.to_priority,
            reason=request.reason,
            state=request.state,
            created_at=request.created_at,
            decided_by=request.decided_by,
            decided_at=request.decided_at,
            decision_reason=request.decision_reason,
            message_channel=request.message_channel,
            message_ts=request.message_ts,
            decision_why=reason_of(request.decision_reason_code, request.decision_reason_values),
        )


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One step of a job's history."""

    at: datetime
    from_state: str | None
    to_state: str
    actor: str
    reason: str | None
    why: Reason | None = None  # `reason` as a code and its values (None: shown as stored)

    @classmethod
    def of(cls, event: JobEvent) -> EventRecord:
        why = reason_of(event.reason_code, event.reason_values)
        return cls(event.at, event.from_state, event.to_state, event.actor, event.reason, why)


@dataclass(frozen=True, slots=True)
class LedgerRecord:
    """GPU time charged for one stretch of a job's run."""

    gpu_type: str
    gpu_hours: float
    idle_gpu_hours: float
    cost: float
    started_at: datetime
    ended_at: datetime
    # Of gpu_hours, the work a preemption threw away (since the last reported checkpoint).
    lost_gpu_hours: float = 0.0

    @classmethod
    def of(cls, entry: LedgerEntry) -> LedgerRecord:
        return cls(
            entry.gpu_type,
            entry.gpu_hours,
            entry.idle_gpu_hours,
            entry.cost,
            entry.started_at,
            entry.ended_at,
            entry.lost_gpu_hours,
        )


@dataclass(frozen=True, slots=True)
class QuotaRecord:
    """GPU-hours granted to a team, on one type or any, until a day."""

    id: int
    team_id: int
    gpu_type: str | None
    gpu_hours: float
    expires_on: date
    owner: str
    note: str | None

    @classmethod
    def of(cls, quota: Quota) -> QuotaRecord:
        return cls(
            quota.id or 0,
            quota.team_id,
            quota.gpu_type,
            quota.gpu_hours,
            quota.expires_on,
            quota.owner,
            quota.note,
        )
