"""Jobs that wait for other jobs: `after=#12` (until #12 succeeds), `afterany=#12` (until it
ends, whatever its outcome) and `data=after:#12` (#12's success makes the data ready).

At submit (`wanted`, `record`): every job named must exist and be able to still come to what
is asked of it (a failed job never succeeds: the refusal names the fix). A job names only jobs
submitted before it, so the waits form no cycle. A dependency already met is recorded as met.

Later (`release`): the owner, their team's approvers or an admin let a job go on without what
it waits for, e.g. after its upstream failed; the cycle settles the rest
(scheduler/dependencies.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.dependencies import ENDED, NEVER_SUCCEEDS, WAITING, data_waits_over, make_data_ready
from scheduler.errors import NotFound, Problem, UserError
from scheduler.policy.reasons import Reason, ReasonCode
from scheduler.service.context import Context
from storage.models import Job, JobState
from storage.models.jobs import DependencyKind, DependencyState
from storage.queries import dependencies as dependency_queries
from storage.queries import jobs as job_queries

# What each kind waits for the upstream job to come to; a kind of an earlier row wins over a
# later one for the same job (data=after: is also a success, after= more than afterany=).
_STRENGTH = {DependencyKind.DATA: 3, DependencyKind.SUCCESS: 2, DependencyKind.END: 1}


@dataclass(frozen=True)
class Wanted:
    """One upstream job a submission waits for, and for what."""

    upstream_id: int
    kind: DependencyKind
    key: str  # the key that named it: after, afterany or data


def wanted(fields: Mapping[str, Any]) -> tuple[Wanted, ...]:
    """The upstream jobs a submission's keys name, each once, the strongest kind kept."""
    named: list[Wanted] = []
    data = fields.get("data")
    if data is not None and getattr(data, "after", None) is not None:
        named.append(Wanted(data.after, DependencyKind.DATA, "data"))
    for key, kind in (("after", DependencyKind.SUCCESS), ("afterany", DependencyKind.END)):
        named.extend(Wanted(job_id, kind, key) for job_id in fields.get(key) or ())
    return _strongest(named)


def _strongest(named: list[Wanted]) -> tuple[Wanted, ...]:
    """Each upstream job once, with the strongest kind it was named with."""
    found: dict[int, Wanted] = {}
    for want in named:
        held = found.get(want.upstream_id)
        if held is None or _STRENGTH[want.kind] > _STRENGTH[held.kind]:
            found[want.upstream_id] = want
    return tuple(found.values())


def whole_arrays(ctx: Context, wants: tuple[Wanted, ...]) -> tuple[Wanted, ...]:
    """An array named by its number (#40) stands for every job of it: a job after a sweep
    waits for the whole sweep (#40.1 names one job of it)."""
    out: list[Wanted] = []
    for want in wants:
        upstream = job_queries.get_job(session=ctx.session, job_id=want.upstream_id)
        if upstream is None or upstream.array_id != upstream.id:
            out.append(want)
            continue
        members = job_queries.array_jobs(session=ctx.session, array_id=upstream.id or 0)
        out += [Wanted(member.id or 0, want.kind, want.key) for member in members]
    return _strongest(out)


def check(ctx: Context, wants: tuple[Wanted, ...]) -> None:
    """Refuse a submission whose upstream jobs do not exist or can never come to what it
    waits for."""
    for want in wants:
        upstream = job_queries.get_job(session=ctx.session, job_id=want.upstream_id)
        if upstream is None:
            raise NotFound(Problem.UPSTREAM_NOT_FOUND, given=want.key, job_id=want.upstream_id)
        if want.kind is not DependencyKind.END and upstream.state in NEVER_SUCCEEDS:
            raise UserError(
                Problem.UPSTREAM_FAILED,
                given=want.key,
                job_id=want.upstream_id,
                current=upstream.state,
            )


def record(ctx: Context, job: Job, wants: tuple[Wanted, ...]) -> bool:
    """Record what `job` waits for; True when it waits for data another job makes and every
    such job has already succeeded (its data is ready at submit)."""
    data_met = None
    for want in wants:
        upstream = job_queries.get_job(session=ctx.session, job_id=want.upstream_id)
        state = upstream.state if upstream is not None else None
        met = state == JobState.SUCCEEDED or (want.kind is DependencyKind.END and state in ENDED)
        dependency_queries.add(
            session=ctx.session,
            job_id=job.id or 0,
            upstream_id=want.upstream_id,
            kind=want.kind,
            state=DependencyState.MET if met else DependencyState.WAITING,
            at=ctx.now,
        )
        if want.kind is DependencyKind.DATA:
            data_met = met and data_met is not False
    return bool(data_met)


@dataclass(frozen=True)
class Released:
    """What `release` did: the job, and the upstream jobs it no longer waits for."""

    job: Job
    upstream: tuple[int, ...]
    data_ready: bool  # its data became ready (it waited for data another job makes)


def release(ctx: Context, job: Job) -> Released:
    """Let `job` go on without the jobs it still waits for (the caller checked who may):
    each unmet dependency is released; one whose data another job makes marks its data
    ready. Refused when it waits for none."""
    rows = [
        row
        for row in dependency_queries.of_job(session=ctx.session, job_id=job.id or 0)
        if row.state in dependency_queries.UNMET
    ]
    if not rows or job.state not in WAITING:
        raise UserError(Problem.NOT_WAITING_FOR_JOBS, job_id=job.id or 0)
    released = []
    for row in rows:
        if dependency_queries.settle(
            session=ctx.session,
            dependency_id=row.id or 0,
            was=dependency_queries.UNMET,
            now=DependencyState.RELEASED,
            at=ctx.now,
            by=ctx.actor.user_id,
        ):
            released.append(row)
    data = any(row.kind == DependencyKind.DATA for row in released) and data_waits_over(
        ctx.session, job
    )
    if data:
        make_data_ready(
            ctx.session,
            job,
            ctx.now,
            ctx.actor.user_id,
            Reason(ReasonCode.DATA_RELEASED, {"by": ctx.actor.user_id}),
        )
    ctx.audit(
        "job.release",
        "job",
        job.id,
        upstream=[row.upstream_id for row in released],
    )
    return Released(job, tuple(row.upstream_id for row in released), data)
