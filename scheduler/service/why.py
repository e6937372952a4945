"""`/gpu why <job> [at=TIME]`: a job's story up to a moment, from the decision log and the
job's own history — submitted, each stage of its wait and what it waited for (and behind
whom), where and on what it started, preempted, requeued, ended.

Anyone may ask about any job, as with `/gpu status`; the story names no command. It reads
SQL only, so it answers while object storage is down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from scheduler.decision_log import Kind, wait_of, weighed_of
from scheduler.errors import Problem, UserError
from scheduler.hosts.reconcile import ACTOR
from scheduler.policy.plan import Alternative, Wait
from scheduler.policy.reasons import Reason, reason_of
from scheduler.service.context import Context
from scheduler.service.lookup import job_by_ref, team_name
from scheduler.service.records import JobRecord
from storage.models import Decision, JobEvent, JobState
from storage.queries import decisions as decision_queries
from storage.queries import jobs as job_queries


class Step(StrEnum):
    """What one step of the story tells; each is said by `why.step.<value>`."""

    SUBMITTED = "submitted"
    WAITED = "waited"  # a (changed) reason it waits
    RESERVED = "reserved"  # GPUs kept for it (backfill)
    STARTED = "started"
    PREEMPT_ASKED = "preempt_asked"
    CHANGED = "changed"  # any other state change of its history


@dataclass(frozen=True)
class StoryStep:
    """One step, at its moment; only the fields of its kind are set."""

    at: datetime
    step: Step
    wait: Wait | None = None
    behind_priority: str | None = None  # the class of the job it waited behind
    gpu_type: str | None = None
    gpus: int = 0
    hosts: tuple[str, ...] = ()
    attempt: int = 0
    reason: str | None = None  # the match's reason, a preemption's, a state change's
    why: Reason | None = None  # the match's or a state change's reason as a code and values
    alternatives: tuple[Alternative, ...] = ()
    for_job: int | None = None
    until: datetime | None = None  # a reservation's start, a preemption's deadline
    from_state: str | None = None
    to_state: str | None = None
    actor: str | None = None
    code: str | None = None  # a preemption's PreemptCode value (None: logged before codes)


@dataclass(frozen=True)
class WhyResult:
    """A job and its story up to `until` (now, or the moment asked about)."""

    job: JobRecord
    team: str
    until: datetime
    asked_at: bool  # whether the reader named the moment (at=)
    steps: Sequence[StoryStep]


def why(ctx: Context, job_id: int | None, name: str | None, at: datetime | None) -> WhyResult:
    """The story of one job up to `at` (naive: in the policy's zone) or now."""
    job = job_by_ref(ctx, job_id, name)
    until = ctx.now if at is None else min(ctx.moment(at), ctx.now)
    submitted = job.submitted_at
    if submitted.tzinfo is None:
        submitted = submitted.replace(tzinfo=UTC)
    if until < submitted:
        raise UserError(
            Problem.WHY_BEFORE_SUBMIT,
            job_id=job.id or 0,
            at=_local(ctx, until),
            submitted=_local(ctx, submitted),
        )
    job_id = job.id or 0
    lines = decision_queries.of_job(session=ctx.session, job_id=job_id, until=until)
    events = [
        e for e in job_queries.history(session=ctx.session, job_id=job_id) if _utc(e.at) <= until
    ]
    record = JobRecord.of(job)
    if not ctx.actor.in_team(job.team_id):  # as `/gpu status`: commands are the team's
        record = replace(record, command="")
    return WhyResult(
        record, team_name(ctx, job.team_id), until, at is not None, _story(lines, events)
    )


def _story(lines: Sequence[Decision], events: Sequence[JobEvent]) -> tuple[StoryStep, ...]:
    """Both sources in time order. At one moment (a cycle and a command in the same tick):
    the submission first, then the scheduler's own changes (the cycle makes them before it
    logs), then the cycle's lines, then people's changes."""
    started_at = {_utc(line.at) for line in lines if line.kind == Kind.START}
    told: list[tuple[datetime, int, int, StoryStep]] = []
    for event in events:
        at = _utc(event.at)
        if event.to_state == JobState.RUNNING and at in started_at:
            continue  # the log's start line says it, with where and why
        step = _event_step(at, event)
        rank = 0 if step.step is Step.SUBMITTED else 1 if step.actor is None else 3
        told.append((at, rank, event.id or 0, step))
    for line in lines:
        found = _line_step(_utc(line.at), line)
        if found is not None:
            told.append((found.at, 2, line.id or 0, found))
    told.sort(key=lambda entry: entry[:3])
    return tuple(step for *_, step in told)


def _event_step(at: datetime, event: JobEvent) -> StoryStep:
    kind = Step.SUBMITTED if event.from_state is None else Step.CHANGED
    return StoryStep(
        at,
        kind,
        from_state=event.from_state,
        to_state=event.to_state,
        actor=None if event.actor == ACTOR else event.actor,  # a person, or the scheduler
        reason=event.reason,
        why=reason_of(event.reason_code, event.reason_values),
    )


def _line_step(at: datetime, line: Decision) -> StoryStep | None:
    detail: Mapping[str, Any] = line.detail or {}
    job_id = line.job_id or 0
    if line.kind == Kind.WAIT:
        return StoryStep(
            at,
            Step.WAITED,
            wait=wait_of(job_id, at, detail),
            behind_priority=detail.get("behind_priority"),
        )
    if line.kind == Kind.START:
        match = detail.get("match") or {}
        return StoryStep(
            at,
            Step.STARTED,
            gpu_type=detail.get("gpu_type"),
            gpus=int(detail.get("gpus") or 0),
            hosts=tuple(detail.get("hosts") or ()),
            attempt=int(detail.get("attempt") or 0),
            reason=match.get("reason"),
            why=reason_of(match.get("reason_code"), match.get("reason_values")),
            alternatives=tuple(weighed_of(a) for a in match.get("alternatives") or ()),
        )
    if line.kind == Kind.RESERVE:
        return StoryStep(
            at,
            Step.RESERVED,
            gpu_type=detail.get("gpu_type"),
            gpus=int(detail.get("gpus") or 0),
            until=_parsed(detail.get("start")),
        )
    if line.kind == Kind.PREEMPT:
        return StoryStep(
            at,
            Step.PREEMPT_ASKED,
            for_job=detail.get("for_job"),
            until=_parsed(detail.get("deadline")),
            reason=detail.get("reason"),
            code=detail.get("code"),
        )
    return None  # a kind this version does not know: left out, not a failure


def _local(ctx: Context, moment: datetime) -> str:
    """A moment as the reader types it: YYYY-MM-DDTHH:MM in the policy's zone."""
    return moment.astimezone(ctx.policy.zone).strftime("%Y-%m-%dT%H:%M")


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _parsed(text: object) -> datetime | None:
    return datetime.fromisoformat(text) if isinstance(text, str) else None
