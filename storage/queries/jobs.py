"""Jobs, their history, bump requests and templates."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, exists, func, update
from sqlalchemy import select as sa_select
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from storage.models import (
    ACTIVE_STATES,
    ON_HOST_STATES,
    Allocation,
    BumpRequest,
    BumpState,
    Job,
    JobEvent,
    JobState,
    Template,
)
from storage.queries.names import first_named


def array_member(*, session: Session, array_id: int, index: int) -> Job | None:
    """The job at place `index` (1-based) of array `array_id`."""
    query = select(Job).where(Job.array_id == array_id, Job.array_index == index)
    return session.exec(query).first()


def array_jobs(*, session: Session, array_id: int) -> Sequence[Job]:
    """Every job of an array, by its place."""
    query = select(Job).where(Job.array_id == array_id).order_by(col(Job.array_index))
    return session.exec(query).all()


def arrays_ended_untold(*, session: Session) -> Sequence[int]:
    """The arrays whose every job has ended and whose owner was not told yet: the numbers."""
    member = aliased(Job)
    query = (
        select(Job.id)
        .where(col(Job.array_id) == col(Job.id))
        .where(col(Job.array_told_at).is_(None))
        .where(
            ~exists().where(
                col(member.array_id) == col(Job.id), col(member.state).in_(sorted(ACTIVE_STATES))
            )
        )
        .order_by(col(Job.id))
    )
    return [int(found) for found in session.exec(query).all() if found is not None]


def get_job(*, session: Session, job_id: int) -> Job | None:
    """The job with this id, if any."""
    return session.get(Job, job_id)


def active_jobs_named(*, session: Session, name: str) -> Sequence[Job]:
    """Jobs not yet ended that are called `name`, newest first."""
    query = (
        select(Job)
        .where(Job.name == name, col(Job.state).in_(ACTIVE_STATES))
        .order_by(col(Job.id).desc())
    )
    return session.exec(query).all()


def latest_job_named(*, session: Session, name: str, owner: str) -> Job | None:
    """The newest job of `owner` called `name`, in any state."""
    query = select(Job).where(Job.name == name, Job.owner == owner).order_by(col(Job.id).desc())
    return session.exec(query).first()


def recent_runs(*, session: Session, owners: Collection[str], limit: int) -> Sequence[Row[Any]]:
    """Each owner's `limit` most recently ended succeeded jobs (owner, gpus, est_gpu_hours,
    started_at, ended_at), as plain rows, in one query (a window over all the owners)."""
    if not owners:
        return []
    newest = (
        func.row_number()
        .over(partition_by=col(Job.owner), order_by=col(Job.ended_at).desc())
        .label("newest")
    )
    ranked = (
        sa_select(
            col(Job.owner),
            col(Job.gpus),
            col(Job.est_gpu_hours),
            col(Job.started_at),
            col(Job.ended_at),
            newest,
        )
        .where(col(Job.owner).in_(owners), col(Job.state) == JobState.SUCCEEDED)
        .subquery()
    )
    query = sa_select(
        ranked.c.owner,
        ranked.c.gpus,
        ranked.c.est_gpu_hours,
        ranked.c.started_at,
        ranked.c.ended_at,
    ).where(ranked.c.newest <= limit)
    return session.execute(query).all()


def jobs_in_states(
    *,
    session: Session,
    states: Collection[str],
    team_id: int | None = None,
    owner: str | None = None,
) -> Sequence[Job]:
    """Jobs in any of `states` (optionally of one team, or one owner), oldest first."""
    query = select(Job).where(col(Job.state).in_(states)).order_by(col(Job.id))
    if team_id is not None:
        query = query.where(Job.team_id == team_id)
    if owner is not None:
        query = query.where(Job.owner == owner)
    return session.exec(query).all()


# What people are shown of a job (every field but the scheduler's own bookkeeping).
_SHOWN_COLUMNS = (
    col(Job.id),
    col(Job.name),
    col(Job.owner),
    col(Job.team_id),
    col(Job.priority),
    col(Job.gpus),
    col(Job.gpu_types),
    col(Job.min_memory_gib),
    col(Job.min_speed),
    col(Job.est_gpu_hours),
    col(Job.data_ready),
    col(Job.data_location),
    col(Job.command),
    col(Job.image),
    col(Job.template),
    col(Job.template_version),
    col(Job.state),
    col(Job.state_reason),
    col(Job.state_reason_code),
    col(Job.state_reason_values),
    col(Job.submitted_at),
    col(Job.started_at),
    col(Job.ended_at),
    col(Job.output),
    col(Job.metrics),
    col(Job.share),
)


def shown_jobs(
    *,
    session: Session,
    states: Collection[str],
    team_id: int | None = None,
    owner: str | None = None,
) -> Sequence[Row[Any]]:
    """What people are shown of the jobs in `states` (optionally of one team, or one owner),
    as plain rows named like the job's fields (no ORM objects: a listing reads thousands),
    oldest first."""
    query = sa_select(*_SHOWN_COLUMNS).where(col(Job.state).in_(states)).order_by(col(Job.id))
    if team_id is not None:
        query = query.where(col(Job.team_id) == team_id)
    if owner is not None:
        query = query.where(col(Job.owner) == owner)
    return session.execute(query).all()


def jobs_with_ids(*, session: Session, ids: Collection[int]) -> Sequence[Job]:
    """The jobs with these ids (those that exist), in one query."""
    if not ids:
        return []
    return session.exec(select(Job).where(col(Job.id).in_(ids))).all()


def count_by_state_and_priority(*, session: Session) -> dict[tuple[str, str], int]:
    """How many jobs there are in each (state, priority class), counted by the database."""
    query = sa_select(col(Job.state), col(Job.priority), func.count()).group_by(
        col(Job.state), col(Job.priority)
    )
    return {(state, priority): int(n) for state, priority, n in session.execute(query)}


def gpu_hours_in_states(*, session: Session, states: Collection[str]) -> float:
    """The estimated GPU-hours of every job in `states`, summed by the database."""
    query = sa_select(func.coalesce(func.sum(col(Job.est_gpu_hours)), 0.0)).where(
        col(Job.state).in_(states)
    )
    return float(session.execute(query).scalar_one())


# What the scheduling policy reads of a job: enough to order, match and place it.
_PLANNING_COLUMNS = (
    col(Job.id),
    col(Job.state),
    col(Job.priority),
    col(Job.team_id),
    col(Job.owner),
    col(Job.submitted_at),
    col(Job.started_at),
    col(Job.data_ready),
    col(Job.gpus),
    col(Job.gpu_types),
    col(Job.min_memory_gib),
    col(Job.min_speed),
    col(Job.est_gpu_hours),
    col(Job.preemptible),
    col(Job.preempt_grace_s),
    col(Job.preemptions),
    col(Job.stop_requested_at),
    col(Job.share),
    col(Job.account),  # MPS serves one account at a time: who may share a card with whom
    col(Job.array_id),  # an array's jobs run at most max_running at a time
    col(Job.array_max_running),
)


def planning_rows(*, session: Session, states: Collection[str]) -> Sequence[Row[Any]]:
    """The policy's view of the jobs in `states`, as plain rows (no ORM objects: a cycle
    reads thousands of them), oldest first."""
    query = sa_select(*_PLANNING_COLUMNS).where(col(Job.state).in_(states)).order_by(col(Job.id))
    return session.execute(query).all()


def on_host_rows(*, session: Session) -> Sequence[Row[Any]]:
    """What reconciling needs of each job that holds GPUs on a host (running or unknown), as
    plain rows: id, state, attempts, missing_since, stop_requested_at, confirmed_at."""
    query = sa_select(
        col(Job.id),
        col(Job.state),
        col(Job.attempts),
        col(Job.missing_since),
        col(Job.stop_requested_at),
        col(Job.confirmed_at),
    ).where(col(Job.state).in_(ON_HOST_STATES))
    return session.execute(query.order_by(col(Job.id))).all()


def allocation_leaks(*, session: Session) -> Sequence[Row[Any]]:
    """Open allocations whose job no longer holds GPUs (job id, allocation id, job state):
    none should exist; a cycle closes any it finds."""
    query = (
        sa_select(col(Allocation.job_id), col(Allocation.id), col(Job.state))
        .join(Job, col(Job.id) == col(Allocation.job_id))
        .where(col(Allocation.ended_at).is_(None), col(Job.state).not_in(ON_HOST_STATES))
    )
    return session.execute(query.order_by(col(Allocation.id))).all()


def set_state(
    *,
    session: Session,
    job: Job,
    to: str,
    at: datetime,
    actor: str,
    reason: str | None,
    code: str | None = None,
    values: dict[str, Any] | None = None,
) -> JobEvent:
    """Write a state change and its history row; the caller has checked it is legal.
    `reason` is the text kept; `code` and `values` the same reason as a code, if it has one."""
    was = job.state
    event = JobEvent(
        job_id=_id(job),
        at=at,
        from_state=was,
        to_state=to,
        actor=actor,
        reason=reason,
        reason_code=code,
        reason_values=values,
    )
    job.state = to
    job.state_reason = reason
    job.state_reason_code, job.state_reason_values = code, values
    if to == JobState.RUNNING and was != JobState.UNKNOWN:  # a new run, not one found again
        job.started_at = at
    if to in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED):
        job.ended_at = at
    session.add(job)
    session.add(event)
    return event


def went_unknown_since(*, session: Session, job_id: int, since: datetime) -> bool:
    """Whether the job was marked unknown (its host silent) at or after `since`."""
    query = sa_select(col(JobEvent.id)).where(
        col(JobEvent.job_id) == job_id,
        col(JobEvent.to_state) == JobState.UNKNOWN,
        col(JobEvent.at) >= since,
    )
    return session.execute(query.limit(1)).first() is not None


def history(*, session: Session, job_id: int) -> Sequence[JobEvent]:
    """A job's state changes, oldest first."""
    query = select(JobEvent).where(JobEvent.job_id == job_id).order_by(col(JobEvent.id))
    return session.exec(query).all()


def get_bump(*, session: Session, request_id: int) -> BumpRequest | None:
    """The bump request with this id, if any."""
    return session.get(BumpRequest, request_id)


def pending_bumps(*, session: Session, job_id: int) -> Sequence[BumpRequest]:
    """Undecided bump requests of one job."""
    query = select(BumpRequest).where(
        BumpRequest.job_id == job_id, BumpRequest.state == BumpState.PENDING
    )
    return session.exec(query).all()


def template_named(*, session: Session, team_id: int, name: str) -> Template | None:
    """A team's template by name (whatever its case, in any script)."""
    query = select(Template).where(Template.team_id == team_id)
    return first_named(session, query, col(Template.name), name)


def templates(*, session: Session, team_id: int) -> Sequence[Template]:
    """A team's templates, by name."""
    query = select(Template).where(Template.team_id == team_id).order_by(col(Template.name))
    return session.exec(query).all()


def _id(row: Job) -> int:
    if row.id is None:
        raise ValueError("job has no id yet; flush the session first")
    return row.id


def bumps_of_job(*, session: Session, job_id: int) -> Sequence[BumpRequest]:
    """Every bump request of one job, oldest first."""
    query = select(BumpRequest).where(BumpRequest.job_id == job_id).order_by(col(BumpRequest.id))
    return session.exec(query).all()


def decide_bump(
    *,
    session: Session,
    request_id: int,
    state: str,
    by: str,
    at: datetime,
    reason: str | None,
    code: str | None = None,
    values: dict[str, Any] | None = None,
) -> bool:
    """Decide a pending request; False if it was no longer pending. `code` and `values`:
    paika's own reason as a code (a person's words have none).

    One conditional UPDATE, so two approvers clicking at once (or a replayed click, or two
    paika instances) cannot both decide it.
    """
    statement = (
        update(BumpRequest)
        .where(col(BumpRequest.id) == request_id, col(BumpRequest.state) == BumpState.PENDING)
        .values(
            state=state,
            decided_by=by,
            decided_at=at,
            decision_reason=reason,
            decision_reason_code=code,
            decision_reason_values=values,
        )
        .execution_options(synchronize_session=False)
    )
    result = session.execute(statement)
    session.expire_all()
    return bool(result.rowcount)  # type: ignore[attr-defined]
