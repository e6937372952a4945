"""The job state machine: which moves are legal, and the one function that makes them.

waiting_data ⇄ queued → running ⇄ unknown → succeeded | failed | cancelled | preempted
     └──────────┴──────────────────────────→ cancelled
preempted → queued | waiting_data | cancelled   (requeued after checkpointing)
running | unknown → queued | waiting_data       (the start was refused, or the run was lost)

Every move is written as a conditional update (the job's version), so of two racing
writers exactly one wins; see `storage.models.jobs`.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from scheduler.errors import IllegalTransition
from scheduler.policy.reasons import Reason, english_of
from storage.models import Job, JobEvent, JobState
from storage.queries import jobs as job_queries

S = JobState
_ENDS = {S.SUCCEEDED, S.FAILED, S.CANCELLED, S.PREEMPTED}
TRANSITIONS: dict[str, frozenset[str]] = {
    S.WAITING_DATA: frozenset({S.QUEUED, S.CANCELLED}),
    S.QUEUED: frozenset({S.WAITING_DATA, S.RUNNING, S.CANCELLED}),
    # running → queued: its start was refused on the host, or its run was lost there.
    S.RUNNING: frozenset({*_ENDS, S.UNKNOWN, S.QUEUED, S.WAITING_DATA}),
    # unknown: the host is silent; when it answers, its word decides (or paika gives up).
    S.UNKNOWN: frozenset({*_ENDS, S.RUNNING, S.QUEUED, S.WAITING_DATA}),
    S.PREEMPTED: frozenset({S.QUEUED, S.WAITING_DATA, S.CANCELLED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
}


def can_move(current: str, wanted: str) -> bool:
    """Whether a job in `current` may become `wanted`."""
    return wanted in TRANSITIONS.get(current, frozenset())


def check_move(job: Job, wanted: str) -> None:
    """Raise IllegalTransition unless the job may become `wanted`."""
    if not can_move(job.state, wanted):
        raise IllegalTransition(job.id or 0, job.state, wanted)


def move(
    session: Session,
    job: Job,
    wanted: str,
    *,
    at: datetime,
    actor: str,
    reason: str | Reason | None = None,
) -> JobEvent:
    """Move a job to `wanted`, recording the change in its history. A reason given as a code
    is kept as its English text and as the code with its values, for the faces to say in
    each reader's language; words a person typed are kept as typed."""
    check_move(job, wanted)
    coded = reason if isinstance(reason, Reason) else None
    return job_queries.set_state(
        session=session,
        job=job,
        to=wanted,
        at=at,
        actor=actor,
        reason=english_of(reason),
        code=coded.code.value if coded is not None else None,
        values=coded.stored_values() if coded is not None else None,
    )
