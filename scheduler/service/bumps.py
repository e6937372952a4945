"""Changing a job's priority class: bump requests and their approval."""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.errors import Action, NotFound, PermissionDenied, Problem, UserError
from scheduler.notices import approvals
from scheduler.policy.priority_classes import CLASS_RANK
from scheduler.policy.reasons import ReasonCode, because
from scheduler.service.context import Context
from scheduler.service.jobs import (
    PENDING_STATES,
    JobView,
    open_bump,
    require_owner_or_approver,
    view_of,
)
from scheduler.service.lookup import job_by_ref
from scheduler.service.records import BumpRecord
from storage.models import BumpRequest, BumpState, Job
from storage.queries import jobs as job_queries


@dataclass(frozen=True)
class BumpResult:
    """A bump: applied at once, or a request waiting for an approver."""

    view: JobView
    request: BumpRecord | None
    applied: bool


@dataclass(frozen=True)
class DecisionResult:
    """An approver's decision, or why nothing changed (already decided; or `moot`: the job
    no longer waits, so the request was closed instead, its class left as it is)."""

    request: BumpRecord
    view: JobView
    changed: bool
    moot: bool = False


def bump(ctx: Context, job_id: int | None, name: str | None, to: str, reason: str) -> BumpResult:
    """Ask to change a job's class; lowering it, or an approver asking, applies at once."""
    job = job_by_ref(ctx, job_id, name)
    require_owner_or_approver(ctx, job, Action.BUMP)
    if job.state not in PENDING_STATES:
        raise UserError(Problem.BUMP_NOT_WAITING, job_id=job.id or 0, current=job.state)
    if to == job.priority:
        raise UserError(Problem.BUMP_SAME_CLASS, job_id=job.id or 0, priority=to)
    raising = CLASS_RANK[to] < CLASS_RANK[job.priority]
    if raising and ctx.policy.approval_required(to) and not ctx.actor.is_approver_of(job.team_id):
        request = BumpRecord.of(open_bump(ctx, job, to, reason))
        return BumpResult(view_of(ctx, job), request, applied=False)
    _apply(ctx, job, to, reason)
    return BumpResult(view_of(ctx, job), None, applied=True)


def decide(ctx: Context, request_id: int, approve: bool, reason: str | None) -> DecisionResult:
    """Approve or deny a request; only the job team's approvers and admins may."""
    request = job_queries.get_bump(session=ctx.session, request_id=request_id)
    if request is None:
        raise NotFound(Problem.BUMP_NOT_FOUND, request_id=request_id)
    job = job_queries.get_job(session=ctx.session, job_id=request.job_id)
    if job is None:
        raise NotFound(Problem.BUMP_JOB_GONE, request_id=request_id)
    if not ctx.actor.is_approver_of(job.team_id):
        raise PermissionDenied(Problem.APPROVERS_DECIDE)
    if request.state != BumpState.PENDING:
        return DecisionResult(BumpRecord.of(request), view_of(ctx, job), changed=False)
    if job.state not in PENDING_STATES:
        return _close_moot(ctx, request, job)
    state = BumpState.APPROVED if approve else BumpState.DENIED
    decided = job_queries.decide_bump(
        session=ctx.session,
        request_id=request_id,
        state=state,
        by=ctx.actor.user_id,
        at=ctx.now,
        reason=reason,
    )
    request = job_queries.get_bump(session=ctx.session, request_id=request_id) or request
    job = job_queries.get_job(session=ctx.session, job_id=request.job_id) or job
    if not decided:  # someone else decided it between our read and our write
        return DecisionResult(BumpRecord.of(request), view_of(ctx, job), changed=False)
    ctx.audit(
        f"bump.{state}", "bump", request_id, job=job.id, to=request.to_priority, reason=reason
    )
    if approve and job.state in PENDING_STATES:
        _apply(ctx, job, request.to_priority, f"bump #{request_id} approved")
    approvals.tell_requester(ctx.session, request, job, ctx.now)
    return DecisionResult(BumpRecord.of(request), view_of(ctx, job), changed=True)


def _close_moot(ctx: Context, request: BumpRequest, job: Job) -> DecisionResult:
    """A request whose job started (or ended) before anyone decided it: a class orders only
    waiting jobs (as a Slurm job's priority does), so the request is closed as withdrawn,
    the job keeps the class it runs at, and the asker is told; asking again is for when the
    job waits again."""
    request_id = request.id or 0
    moot = because(ReasonCode.BUMP_MOOT, state=job.state)
    closed = job_queries.decide_bump(
        session=ctx.session,
        request_id=request_id,
        state=BumpState.WITHDRAWN,
        by=ctx.actor.user_id,
        at=ctx.now,
        reason=moot.english(),
        code=moot.code.value,
        values=moot.stored_values(),
    )
    request = job_queries.get_bump(session=ctx.session, request_id=request_id) or request
    if not closed:  # someone else decided it between our read and our write
        return DecisionResult(BumpRecord.of(request), view_of(ctx, job), changed=False)
    ctx.audit("bump.moot", "bump", request_id, job=job.id, state=job.state)
    approvals.tell_requester(ctx.session, request, job, ctx.now)
    return DecisionResult(BumpRecord.of(request), view_of(ctx, job), changed=False, moot=True)


def _apply(ctx: Context, job: Job, to: str, reason: str) -> None:
    before = job.priority
    job.priority = to
    ctx.session.add(job)
    ctx.audit("job.priority", "job", job.id, before=before, after=to, reason=reason)
