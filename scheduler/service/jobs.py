"""Submitting jobs and following them: submit, ready, cancel, done, status, queue."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, is_dataclass, replace
from datetime import timedelta
from enum import StrEnum
from typing import Any

from scheduler import lifecycle
from scheduler.dependencies import make_data_ready
from scheduler.errors import Action, Conflict, PermissionDenied, Problem, UserError
from scheduler.fingerprints import CardUse, card_use
from scheduler.grammar.sharing import shares
from scheduler.hosts.reconcile import PREEMPT_ACTION
from scheduler.notices import approvals
from scheduler.outputs import Artefact, Report
from scheduler.outputs import store as store_report
from scheduler.policy.admission import Admission, Verdict, admit
from scheduler.policy.matching import CardNeeds, CardType, cheapest_fit, fitting_types
from scheduler.policy.plan import Wait, WaitCode
from scheduler.policy.priority_classes import PriorityClass
from scheduler.policy.reasons import Reason, ReasonCode, because
from scheduler.policy.scheduler import queue_order, schedule
from scheduler.results import Said
from scheduler.service import accounts, arrays, dependencies, reservations
from scheduler.service.context import Context
from scheduler.service.lookup import job_by_ref, team_by_name, team_name
from scheduler.service.records import BumpRecord, EventRecord, JobRecord, LedgerRecord
from scheduler.service.report import lower_is_better
from scheduler.snapshots import EstimateRecord, build_snapshot
from storage.models import (
    ON_HOST_STATES,
    TERMINAL_STATES,
    BumpRequest,
    BumpState,
    Job,
    JobEvent,
    JobState,
    Team,
)
from storage.models.jobs import DependencyKind, OutputSource
from storage.queries import accounting
from storage.queries import audit as audit_queries
from storage.queries import cluster as cluster_queries
from storage.queries import jobs as job_queries
from storage.queries import org as org_queries

PENDING_STATES = (JobState.WAITING_DATA, JobState.QUEUED, JobState.PREEMPTED)
LISTING = "queue"  # the shared listing's key on the board
SUBMITTED = Reason(ReasonCode.SUBMITTED)  # the first line of every job's history


@dataclass(frozen=True)
class JobView:
    """A job as a user sees it: its record, its team, why it waits (if it does), its likely
    card."""

    job: JobRecord
    team: str
    wait: Wait | None
    likely_type: str | None


@dataclass(frozen=True)
class SubmitResult:
    """What `submit` tells the user (`array`: the array it made, when it made one)."""

    view: JobView
    bump: BumpRecord | None
    admission: Admission | None = None
    array: ArraySummary | None = None
    # A pipeline's steps, first to last: (job id, name), when a template chained them.
    pipeline: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class ArraySummary:
    """An array just submitted: its number (its first job's id), how many jobs, how many may
    run at once (None: any) and its last job's id."""

    array_id: int
    size: int
    max_running: int | None
    last_id: int


@dataclass(frozen=True)
class StatusResult:
    """What `status` tells the user."""

    view: JobView
    history: Sequence[EventRecord]
    bumps: Sequence[BumpRecord]
    ledger: Sequence[LedgerRecord]
    # Whether the reader may see the job's command: its team, approvers and admins only
    # (people put secrets in commands); for anyone else `view.job.command` is empty.
    shows_command: bool = True
    # The submission as given (scheduler.service.specs); None for a job from before specs
    # were kept, and for a reader who may not see the command (the spec holds it).
    spec: Mapping[str, Any] | None = None
    # The owner's record of run time against estimates, when the owner asks (see
    # scheduler.service.estimates); None for others, and before any finished run.
    estimates: EstimateRecord | None = None
    # How often paika stopped and requeued it for other work, and why the last time; None
    # for a job never preempted.
    preempted: PreemptedRecord | None = None
    # The hosts of its latest run (a Slurm pool's: its nodes); none before it first started.
    hosts: Sequence[str] = ()
    # The cards of its latest run: (host, GPU type, how many); none before it first started.
    cards: Sequence[tuple[str, str, int]] = ()
    # How its earlier runs used a card alone (scheduler.fingerprints), what sharing a card
    # is decided by; None before any run was sampled.
    card_use: CardUse | None = None
    # Asked for by the array's number (`/gpu status 40`): every job of it, by its place.
    array: ArrayStatus | None = None


@dataclass(frozen=True)
class ArrayMember:
    """One job of an array as its status lists it."""

    job_id: int
    index: int
    state: str
    values: Mapping[str, Any]  # its sweep values ({} for a count= copy)
    metrics: Mapping[str, Any]  # what it reported of itself (paika report), when it did


@dataclass(frozen=True)
class ArrayStatus:
    """An array: its number, size, how many may run at once, and each job of it."""

    array_id: int
    size: int
    max_running: int | None
    members: tuple[ArrayMember, ...]
    # The metric its jobs are listed by, best first (the first one two or more of them
    # reported; `lower` when a smaller value is better); None: listed by their place.
    ranked_by: str | None = None
    lower: bool = False

    def counts(self) -> dict[str, int]:
        """How many of its jobs are in each state."""
        found: dict[str, int] = {}
        for member in self.members:
            found[member.state] = found.get(member.state, 0) + 1
        return found


@dataclass(frozen=True)
class PreemptedRecord:
    """A job's preemptions: how many, the GPU-hours they lost, and the last one's reason
    (its PreemptCode value and the job it made room for)."""

    times: int
    lost_gpu_hours: float
    code: str | None
    for_job: int | None


@dataclass(frozen=True)
class QueueResult:
    """What `queue` tells the user: running jobs, then waiting jobs in queue order."""

    scope: str
    running: list[JobView] = field(default_factory=list)
    waiting: list[JobView] = field(default_factory=list)
    # The cards booked for the reader's team, ahead or under way (`/gpu admin reserve`).
    bookings: list[Said] = field(default_factory=list)


class ChangeNote(StrEnum):
    """What a change to one job did, said by the faces; each value is its catalogue key."""

    ALREADY_READY = "change.already_ready"
    READY = "change.ready"
    STOPPING = "change.stopping"
    CANCELLED = "change.cancelled"
    RECORDED = "change.recorded"
    RECORDED_STOPPING = "change.recorded_stopping"
    RELEASED = "change.released"  # it waits for the jobs before it no longer


@dataclass(frozen=True)
class ChangeResult:
    """A change to one job, or why nothing changed (`cancelled`: the jobs of an array a
    cancel by its number reached, 0 for one job)."""

    view: JobView
    changed: bool
    note: ChangeNote
    cancelled: int = 0


def catalog(ctx: Context) -> list[CardType]:
    """The policy file's GPU catalog as the policy code sees it."""
    return list(ctx.policy.catalog())


def needs_of(job: Job | JobRecord) -> CardNeeds:
    """What a job asks of each GPU."""
    types = tuple(job.gpu_types) if job.gpu_types else None
    return CardNeeds(types, job.min_memory_gib, job.min_speed)


def submit(
    ctx: Context,
    fields: Mapping[str, Any],
    *,
    spec: Mapping[str, Any] | None = None,
    template_version: int | None = None,
) -> SubmitResult:
    """Queue a job from checked submit fields (template already merged), keeping its spec
    (the submission as given, see scheduler.service.specs) and the template's version."""
    team = _submit_team(ctx, fields.get("team"))
    needs = _card_needs(ctx, fields)
    _check_limits(ctx, fields)
    preemptible = _preemptible(fields)
    asked = PriorityClass(fields["priority"])
    priority = asked
    array = arrays.plan(fields)
    if ctx.policy.approval_required(asked) and not ctx.actor.is_approver_of(team.id or 0):
        if array is not None:
            # One bump request per job of an array would ask the approvers many times.
            raise UserError(Problem.ARRAY_NEEDS_APPROVAL, priority=asked, size=array.size)
        priority = PriorityClass.NORMAL
    size = array.size if array is not None else 1
    admission = _admission(ctx, priority, fields["hours"] * size)
    if admission.verdict is Verdict.DEFER:
        raise UserError(
            Problem.QUEUE_TOO_DEEP,
            backlog=admission.backlog_hours,
            limit=admission.max_backlog_hours,
            priority=priority,
        )
    account = accounts.require_account(ctx, ctx.actor.user_id, team)
    data = fields["data"]
    waits = dependencies.whole_arrays(ctx, dependencies.wanted(fields))
    dependencies.check(ctx, waits)
    members = array.members if array is not None else (arrays.Member(0),)
    made: list[Job] = []
    for member in members:
        job = Job(
            name=fields["name"] if array is None else f"{fields['name']}.{member.index}",
            owner=ctx.actor.user_id,
            team_id=team.id or 0,
            priority=priority,
            gpus=fields["gpus"],
            gpu_types=list(needs.allowed_types) if needs.allowed_types else None,
            min_memory_gib=needs.min_memory_gib,
            min_speed=needs.min_speed,
            est_gpu_hours=fields["hours"],
            data_ready=data.ready,
            data_location=data.location,
            data_ready_at=ctx.now if data.ready else None,
            command=arrays.command_for(fields["cmd"], member.values),
            image=fields.get("image"),
            account=account,
            template=fields.get("template"),
            template_version=template_version,
            project=fields.get("project"),
            round=fields.get("round"),
            preemptible=preemptible,
            share=shares(fields),
            preempt_grace_s=fields["grace"].seconds if "grace" in fields else None,
            checkpoint=fields.get("checkpoint"),
            spec=dict(spec) if spec is not None else None,
            state=JobState.QUEUED if data.ready else JobState.WAITING_DATA,
            submitted_at=ctx.now,
        )
        if array is not None:
            job.array_index, job.array_size = member.index, array.size
            job.array_max_running = array.max_running
            job.array_values = dict(member.values) or None
        ctx.session.add(job)
        ctx.session.flush()
        if array is not None:
            job.array_id = made[0].id if made else job.id  # the array's number: its first job's
        made.append(job)
        _submitted(ctx, job, waits)
    first = made[0]
    ctx.audit(
        "job.submit",
        "job",
        first.id,
        name=fields["name"],
        team=team.name,
        priority=priority,
        **({"array": [j.id for j in made]} if array is not None else {}),
    )
    bump = None
    if priority != asked:
        bump = BumpRecord.of(open_bump(ctx, first, asked, "asked for at submit"))
    summary = None
    if array is not None:
        summary = ArraySummary(first.id or 0, array.size, array.max_running, (made[-1].id or 0))
    return SubmitResult(view_of(ctx, first), bump, admission, summary)


def _submitted(ctx: Context, job: Job, waits: tuple[dependencies.Wanted, ...]) -> None:
    """A new job's first history line and what it waits for."""
    ctx.session.add(
        JobEvent(
            job_id=job.id or 0,
            at=ctx.now,
            to_state=job.state,
            actor=ctx.actor.user_id,
            reason=SUBMITTED.english(),
            reason_code=SUBMITTED.code.value,
        )
    )
    if dependencies.record(ctx, job, waits):
        # The jobs that make its data all succeeded already: ready from the start.
        upstream = next(w.upstream_id for w in waits if w.kind is DependencyKind.DATA)
        ctx.session.flush()
        make_data_ready(
            ctx.session,
            job,
            ctx.now,
            ctx.actor.user_id,
            Reason(ReasonCode.DATA_FROM_JOB, {"upstream": upstream}),
        )


def _admission(ctx: Context, priority: str, hours: float) -> Admission:
    waiting = job_queries.gpu_hours_in_states(session=ctx.session, states=PENDING_STATES)
    knobs = ctx.policy.scheduler.admission
    return admit(
        priority,
        [waiting, hours],
        cluster_queries.schedulable_gpu_count(session=ctx.session),
        max_backlog_hours=knobs.max_backlog_hours,
        action=knobs.action,
    )


def _submit_team(ctx: Context, name: str | None) -> Team:
    if name is None:
        if ctx.actor.is_admin and ctx.actor.team_id is None:
            raise UserError(Problem.NO_TEAM_FOR_JOB)
        return ctx.require_team()
    team = team_by_name(ctx, name)
    if not ctx.actor.in_team(team.id or 0):
        raise PermissionDenied(
            Problem.SUBMIT_FOR_OTHER_TEAM, own=ctx.actor.team_name or "-", team=team.name
        )
    return team


def _words(name: str) -> set[str]:
    return {w for w in re.split(r"[^0-9a-z]+", name.casefold()) if w}


def _hosts_with_unlisted(ctx: Context, name: str) -> tuple[str, ...]:
    """The hosts with cards of a model that `name` names (every word of it in the card's
    name) and no GPU type of the policy matches: a type the team has but paika does not know."""
    wanted = _words(name)
    if not wanted:
        return ()
    hosts = {h.id: h.name for h in cluster_queries.all_hosts(session=ctx.session)}
    found = {
        hosts[card.host_id]
        for card in cluster_queries.all_gpus(session=ctx.session)
        if card.gpu_type not in ctx.policy.gpu_types
        and card.host_id in hosts
        and wanted <= _words(f"{card.name or ''} {card.gpu_type}")
    }
    return tuple(sorted(found))


def _card_needs(ctx: Context, fields: Mapping[str, Any]) -> CardNeeds:
    types = fields.get("type")
    canonical: tuple[str, ...] | None = None
    if types:
        names = []
        for name in types:
            known = ctx.policy.canonical_type(name)
            if known is None and (hosts := _hosts_with_unlisted(ctx, name)):
                raise UserError(Problem.GPU_TYPE_NOT_LISTED, name=name, hosts=hosts)
            if known is None:
                raise UserError(
                    Problem.UNKNOWN_GPU_TYPE,
                    name=name,
                    types=tuple(ctx.policy.gpu_types),
                    example=next(iter(ctx.policy.gpu_types)),
                )
            names.append(known)
        canonical = tuple(dict.fromkeys(names))
    needs = CardNeeds(canonical, fields.get("mem"), fields.get("speed"))
    if not fitting_types(catalog(ctx), needs):
        sizes: tuple[Mapping[str, str | float], ...] = tuple(
            {"name": name, "memory_gib": spec.memory_gib, "speed": spec.speed}
            for name, spec in ctx.policy.gpu_types.items()
        )
        raise UserError(Problem.NO_TYPE_MEETS_NEEDS, sizes=sizes)
    return needs


def _check_limits(ctx: Context, fields: Mapping[str, Any]) -> None:
    limits = ctx.policy.limits
    if fields["gpus"] > limits.max_gpus_per_job:
        raise UserError(
            Problem.TOO_MANY_GPUS,
            gpus=fields["gpus"],
            limit=limits.max_gpus_per_job,
            example=min(8, limits.max_gpus_per_job),
        )
    if fields["hours"] > limits.max_hours_per_job:
        raise UserError(
            Problem.TOO_MANY_HOURS, hours=fields["hours"], limit=limits.max_hours_per_job
        )


def _preemptible(fields: Mapping[str, Any]) -> bool:
    """Whether the job declared it checkpoints and resumes; its grace and checkpoint place
    mean nothing without it, so either alone is refused, naming the key to add."""
    preemptible = fields.get("preemptible") == "yes"
    if not preemptible:
        for key in ("grace", "checkpoint"):
            if key in fields:
                raise UserError(Problem.NEEDS_PREEMPTIBLE, given=key, value=str(fields[key]))
    return preemptible


def mark_ready(
    ctx: Context, job_id: int | None, name: str | None, location: str | None
) -> ChangeResult:
    """Mark a job's data ready, so it may take GPUs."""
    job = job_by_ref(ctx, job_id, name)
    _require_team_member(ctx, job, Action.MARK_READY)
    if job.data_ready:
        return ChangeResult(view_of(ctx, job), False, ChangeNote.ALREADY_READY)
    job.data_ready = True
    job.data_ready_at = ctx.now
    if location:
        job.data_location = location
    if job.state == JobState.WAITING_DATA:
        lifecycle.move(
            ctx.session,
            job,
            JobState.QUEUED,
            at=ctx.now,
            actor=ctx.actor.user_id,
            reason=Reason(ReasonCode.DATA_READY),
        )
    ctx.session.add(job)
    ctx.audit("job.ready", "job", job.id, location=job.data_location)
    return ChangeResult(view_of(ctx, job), True, ChangeNote.READY)


def release(ctx: Context, job_id: int | None, name: str | None) -> ChangeResult:
    """Let a job go on without the jobs it still waits for (`/gpu release`, or the Release
    button when an upstream job failed): the owner, their team's approvers or an admin."""
    job = job_by_ref(ctx, job_id, name)
    require_owner_or_approver(ctx, job, Action.RELEASE)
    dependencies.release(ctx, job)
    return ChangeResult(view_of(ctx, job), True, ChangeNote.RELEASED)


def cancel(ctx: Context, job_id: int | None, name: str | None, reason: str | None) -> ChangeResult:
    """Cancel a job: the owner, their team's approvers or an admin. By an array's number
    (not #40.1), every job of the array still to end."""
    job = job_by_ref(ctx, job_id, name)
    require_owner_or_approver(ctx, job, Action.CANCEL)
    if job_id is not None and _heads_array(job):
        return _cancel_array(ctx, job, reason)
    return _cancel_one(ctx, job, reason)


def _cancel_array(ctx: Context, head: Job, reason: str | None) -> ChangeResult:
    """Cancel every job of an array not yet ended; what the array's first job became."""
    members = [
        job
        for job in job_queries.array_jobs(session=ctx.session, array_id=head.id or 0)
        if job.state not in TERMINAL_STATES
    ]
    if not members:
        lifecycle.check_move(head, JobState.CANCELLED)  # says it has ended, and how
    notes = [_cancel_one(ctx, job, reason).note for job in members]
    note = ChangeNote.STOPPING if ChangeNote.STOPPING in notes else ChangeNote.CANCELLED
    return ChangeResult(view_of(ctx, head), True, note, cancelled=len(members))


def _cancel_one(ctx: Context, job: Job, reason: str | None) -> ChangeResult:
    lifecycle.check_move(job, JobState.CANCELLED)
    if job.state in ON_HOST_STATES:
        # Its GPUs stay held until the host confirms the process is gone, so that no other
        # job is put on a card the old process still uses (an unknown job's host is asked
        # as soon as it answers again).
        _request_stop(ctx, job, "cancel")
        ctx.audit("job.cancel", "job", job.id, reason=reason)
        return ChangeResult(view_of(ctx, job), True, ChangeNote.STOPPING)
    lifecycle.move(
        ctx.session,
        job,
        JobState.CANCELLED,
        at=ctx.now,
        actor=ctx.actor.user_id,
        reason=reason or Reason(ReasonCode.CANCELLED),  # typed words stay as typed
    )
    _withdraw_bumps(ctx, job)
    ctx.audit("job.cancel", "job", job.id, reason=reason)
    return ChangeResult(view_of(ctx, job), True, ChangeNote.CANCELLED)


def done(
    ctx: Context, job_id: int | None, name: str | None, output: str | None, metrics: Sequence[Any]
) -> ChangeResult:
    """Record what a job produced; a running job is marked succeeded."""
    job = job_by_ref(ctx, job_id, name)
    require_owner_or_approver(ctx, job, Action.MARK_DONE)
    if output is None and not metrics:
        raise UserError(Problem.DONE_WITHOUT_OUTPUT)
    if job.state in PENDING_STATES:
        raise UserError(Problem.DONE_BEFORE_RUN, job_id=job.id or 0)
    note = ChangeNote.RECORDED
    if job.state in ON_HOST_STATES:
        _request_stop(ctx, job, "done")
        note = ChangeNote.RECORDED_STOPPING
    # Through the one place every report is stored: rows in the ledger's outputs, and the
    # job's latest metrics and output.
    said = Report(tuple(metrics), (Artefact(output),) if output is not None else ())
    store_report(ctx.session, job, said, source=OutputSource.PERSON, at=ctx.now)
    ctx.audit("job.done", "job", job.id, output=output, metrics=job.metrics)
    return ChangeResult(view_of(ctx, job), True, note)


def _request_stop(ctx: Context, job: Job, reason: str) -> None:
    """Ask the scheduler to stop a running job on its host (it sends the stop each cycle)."""
    # The owner's cancel or done wins over paika's own stops (preemption, idle reclaim, a
    # shared card's neighbour slowed).
    if job.stop_requested_at is None or job.stop_reason in (
        "preempt",
        "reclaim",
        "release",
        "slowed",
    ):
        job.stop_requested_at = ctx.now
    job.stop_reason = reason
    ctx.session.add(job)


def status(ctx: Context, job_id: int | None, name: str | None) -> StatusResult:
    """Everything about one job: where it is, why it waits, its history and its cost; asked
    by an array's number (not #40.1), every job of the array too."""
    job_id_given = job_id is not None
    job = job_by_ref(ctx, job_id, name)
    session, job_id = ctx.session, job.id or 0
    view = view_of(ctx, job)
    shows_command = ctx.actor.in_team(job.team_id)
    if not shows_command:
        view = replace(view, job=replace(view.job, command=""))
    ledger = [LedgerRecord.of(e) for e in accounting.ledger_of_job(session=session, job_id=job_id)]
    return StatusResult(
        view,
        [EventRecord.of(e) for e in job_queries.history(session=session, job_id=job_id)],
        [BumpRecord.of(b) for b in job_queries.bumps_of_job(session=session, job_id=job_id)],
        ledger,
        shows_command,
        dict(job.spec) if job.spec is not None and shows_command else None,
        preempted=_preempted(ctx, job, ledger),
        hosts=[h.name for h in cluster_queries.last_run_hosts(session=session, job_id=job_id)],
        cards=cluster_queries.last_run_cards(session=session, job_id=job_id),
        card_use=card_use(session, job),
        array=_array_status(ctx, job) if job_id_given and _heads_array(job) else None,
    )


def _heads_array(job: Job) -> bool:
    """Whether a job is the first of an array, whose number is the array's."""
    return job.array_id is not None and job.array_id == job.id


def _array_status(ctx: Context, head: Job) -> ArrayStatus:
    jobs = job_queries.array_jobs(session=ctx.session, array_id=head.id or 0)
    members = [
        ArrayMember(
            job.id or 0,
            job.array_index or 0,
            job.state,
            dict(job.array_values or {}),
            dict(job.metrics or {}),
        )
        for job in jobs
    ]
    metric = _shared_metric(members)
    lower = metric is not None and lower_is_better(metric)
    if metric is not None:
        # Best first by the metric; the jobs that did not report it after, by their place.
        def rank(member: ArrayMember) -> tuple[int, float, int]:
            value = member.metrics.get(metric)
            if not isinstance(value, int | float):
                return (1, 0.0, member.index)
            return (0, float(value) if lower else -float(value), member.index)

        members.sort(key=rank)
    return ArrayStatus(
        head.id or 0,
        head.array_size or len(members),
        head.array_max_running,
        tuple(members),
        metric,
        lower,
    )


def _shared_metric(members: Sequence[ArrayMember]) -> str | None:
    """The first metric (in the order the jobs reported them) two or more jobs reported as
    a number."""
    seen: dict[str, int] = {}
    for member in members:
        for name, value in member.metrics.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                seen[name] = seen.get(name, 0) + 1
    return next((name for name, n in seen.items() if n >= 2), None)


def _preempted(ctx: Context, job: Job, ledger: Sequence[LedgerRecord]) -> PreemptedRecord | None:
    """The job's preemptions so far, with the last one's reason (from its audit record)."""
    if not job.preemptions:
        return None
    last = audit_queries.latest(
        session=ctx.session, action=PREEMPT_ACTION, target_kind="job", target_id=job.id
    )
    detail = (last.detail or {}) if last is not None else {}
    for_job = detail.get("for_job")
    return PreemptedRecord(
        job.preemptions,
        sum(entry.lost_gpu_hours for entry in ledger),
        str(detail["code"]) if detail.get("code") else None,
        int(for_job) if isinstance(for_job, int) else None,
    )


def queue(ctx: Context, scope: str) -> QueueResult:
    """Running and waiting jobs, in queue order, for the actor, their team or everyone."""
    team_id = None
    if scope == "team":
        team_id = ctx.require_team().id
    result = QueueResult(scope, bookings=reservations.of_team(ctx, ctx.actor.team_id))
    for view in _listing(ctx, None if scope == "all" else (team_id, scope)):
        job = view.job
        if scope == "mine" and job.owner != ctx.actor.user_id:
            continue
        if team_id is not None and job.team_id != team_id:
            continue
        (result.running if job.state in ON_HOST_STATES else result.waiting).append(view)
    return result


def _listing(ctx: Context, part: tuple[int | None, str] | None) -> tuple[JobView, ...]:
    """Running and waiting jobs in queue order: every one, shared by the commands of this
    process while the state stays the same (see scheduler.service.waits); for a `part` (a
    team, or the actor's own), the shared listing when it is current, else just that part
    from the database (listing everything for one user's few jobs would cost more)."""
    board = ctx.waits_board
    if board is None or ctx.wrote or ctx.reuse.get("waits") is not None:
        return _list_all(ctx, part)
    max_age = timedelta(seconds=ctx.policy.scheduler.cycle_seconds)
    if part is not None:
        kept = board.peek(LISTING, ctx.session, ctx.now, ctx.policy, max_age)
        return kept if kept is not None else _list_all(ctx, part)
    return board.shared(LISTING, ctx.session, ctx.now, ctx.policy, max_age, lambda: _list_all(ctx))


def _list_all(ctx: Context, part: tuple[int | None, str] | None = None) -> tuple[JobView, ...]:
    team_id, scope = part or (None, "all")
    rows = job_queries.shown_jobs(
        session=ctx.session,
        states=(*PENDING_STATES, *ON_HOST_STATES),
        team_id=team_id,
        owner=ctx.actor.user_id if scope == "mine" else None,
    )
    waits = current_waits(ctx)
    # One read of the teams for the whole listing, not one query per job.
    teams = {t.id: t.name for t in org_queries.all_teams(session=ctx.session)}
    jobs = [JobRecord.of_columns(row._mapping) for row in rows]
    ordered_jobs = sorted(jobs, key=lambda j: waits[j.id].position if j.id in waits else 0)
    return tuple(
        JobView(job, teams.get(job.team_id) or _team(ctx, job), wait, _likely(ctx, job, wait))
        for job in ordered_jobs
        for wait in [waits.get(job.id or 0)]
    )


# Reasons whose job cannot start however the queue moves: its data, its quota, no host for
# it. "Next up" leaves those jobs out (the board and the digest count them apart).
_BLOCKED = frozenset(
    {
        WaitCode.WAITING_FOR_DATA,
        WaitCode.QUOTA_EXHAUSTED,
        WaitCode.NO_LIVE_QUOTA,
        WaitCode.QUOTA_EXPIRES,
        WaitCode.NEVER_FITS,
        WaitCode.NO_HOSTS,
        WaitCode.REFUSED_BY_HOST,
        WaitCode.WAITING_FOR_HOSTS,
    }
)


def can_start_next(view: JobView) -> bool:
    """Whether a waiting job belongs in "next up": the jobs that can start next.

    A job waiting for its data keeps its place in the queue but cannot start until someone
    marks the data ready, however high it stands, so naming it "next up" would promise a
    start that cannot come; the same goes for a job its quota blocks and one no host can take
    now. The board and the digest count the jobs waiting for data as such instead (and the
    digest lists them in a part of their own).
    """
    wait = view.wait
    return (
        wait is not None
        and wait.code not in _BLOCKED
        and wait.eta is not None
        and view.job.data_ready
    )


def _expected_start(wait: Wait) -> tuple[float, int]:
    """The order "next up" lists jobs in: the policy's expected start, then queue place."""
    return (wait.eta if wait.eta is not None else float("inf"), wait.position)


def next_up(views: Iterable[JobView], count: int) -> tuple[JobView, ...]:
    """The first `count` of `views` that can start next, in the order the policy expects them
    to start (by ETA; queue place on a tie)."""
    startable = [view for view in views if can_start_next(view)]
    startable.sort(key=lambda view: _expected_start(view.wait))  # type: ignore[arg-type]
    return tuple(startable[:count])


def next_waiting(ctx: Context, count: int) -> tuple[JobView, ...]:
    """The first `count` waiting jobs that can start next (see `can_start_next`), by
    expected start, loading only those."""
    waits = current_waits(ctx)
    # A few spare candidates: the reasons may be from a state where some have since started.
    first = sorted(
        (w for w in waits.values() if w.code not in _BLOCKED and w.eta is not None),
        key=_expected_start,
    )[: count * 4]
    found = {
        job.id: job
        for job in job_queries.jobs_with_ids(session=ctx.session, ids=[w.job_id for w in first])
        if job.state in PENDING_STATES
    }
    views = [
        JobView(JobRecord.of(job), _team(ctx, job), wait, _likely(ctx, job, wait))
        for wait in first
        if (job := found.get(wait.job_id)) is not None
    ]
    return next_up(views, count)


def view_of(ctx: Context, job: Job) -> JobView:
    """A job with its team name, why it waits (if it does) and its likely card type."""
    wait = current_waits(ctx).get(job.id or 0) if job.state in PENDING_STATES else None
    return JobView(JobRecord.of(job), _team(ctx, job), wait, _likely(ctx, job, wait))


@contextmanager
def reusing_waits(ctx: Context) -> Iterator[None]:
    """Within the block, the policy runs once for every reason and ETA asked for.

    Only for reading (the Home tab draws the user's jobs and the board from one state);
    a change inside the block would not be reflected.
    """
    ctx.reuse["waits"] = None
    try:
        yield
    finally:
        ctx.reuse.pop("waits", None)


def current_waits(ctx: Context) -> dict[int, Wait]:
    """Why each pending job waits and its ETA, from the policy run on the current state.

    A command that has changed something sees its own change: it computes them in its own
    transaction, or, with `defer_waits`, leaves them to `with_current_waits` after its
    commit, where they come from the shared board like every read's.
    """
    if ctx.reuse.get("waits") is not None:
        return dict(ctx.reuse["waits"])
    if ctx.wrote and ctx.defer_waits:
        ctx.reuse["deferred"] = True
        return {}
    if ctx.waits_board is not None and not ctx.wrote:
        max_age = timedelta(seconds=ctx.policy.scheduler.cycle_seconds)
        waits = ctx.waits_board.waits(
            ctx.session, ctx.now, ctx.policy, max_age, lambda: _compute_waits(ctx)
        )
    else:
        waits = _compute_waits(ctx)
    if "waits" in ctx.reuse:
        ctx.reuse["waits"] = waits
    return waits


def with_current_waits(ctx: Context, result: object) -> object:
    """The result of a command that deferred its job's reason and ETA, with them filled in
    from the state after its commit (ctx: a fresh unit of work)."""
    view = getattr(result, "view", None)
    if not isinstance(view, JobView) or not is_dataclass(result) or isinstance(result, type):
        return result
    job = view.job
    wait = current_waits(ctx).get(job.id) if job.state in PENDING_STATES else None
    return replace(result, view=JobView(job, view.team, wait, _likely(ctx, job, wait)))


def _compute_waits(ctx: Context) -> dict[int, Wait]:
    ctx.session.flush()
    snapshot = build_snapshot(ctx.session, ctx.policy, ctx.now)
    plan = schedule(snapshot, explain=True)
    waits = dict(plan.waits)
    positions = {job.id: i for i, job in enumerate(queue_order(snapshot)[0], 1)}
    for start in plan.starts:
        waits[start.job_id] = Wait(
            start.job_id,
            WaitCode.STARTING,
            positions[start.job_id],
            snapshot.now,
            start.gpu_type,
            as_of=snapshot.now,
        )
    if not snapshot.hosts:  # a new install: say what is missing rather than "never fits"
        waits = {
            i: replace(w, code=WaitCode.NO_HOSTS) if w.code is WaitCode.NEVER_FITS else w
            for i, w in waits.items()
        }
    return waits


def _likely(ctx: Context, job: Job | JobRecord, wait: Wait | None = None) -> str | None:
    """The type the policy's estimate puts the job on; else the catalog's cheapest fit. None
    for a job that started and does not wait now: where it runs or ran is known, not likely."""
    if job.started_at is not None and job.state not in PENDING_STATES:
        return None
    if wait is not None and wait.gpu_type:
        return wait.gpu_type
    card = cheapest_fit(catalog(ctx), needs_of(job))
    return card.name if card else None


def _team(ctx: Context, job: Job | JobRecord) -> str:
    return team_name(ctx, job.team_id)


def _require_team_member(ctx: Context, job: Job, action: Action) -> None:
    if not ctx.actor.in_team(job.team_id):
        raise PermissionDenied(
            Problem.OTHER_TEAMS_JOB,
            job_id=job.id or 0,
            team=_team(ctx, job),
            action=action,
            owner=job.owner,
        )


def require_owner_or_approver(ctx: Context, job: Job, action: Action) -> None:
    if job.owner == ctx.actor.user_id and ctx.actor.in_team(job.team_id):
        return
    if ctx.actor.is_approver_of(job.team_id):
        return
    raise PermissionDenied(
        Problem.NOT_YOURS, job_id=job.id or 0, owner=job.owner, team=_team(ctx, job), action=action
    )


def open_bump(ctx: Context, job: Job, to: str, reason: str) -> BumpRequest:
    pending = job_queries.pending_bumps(session=ctx.session, job_id=job.id or 0)
    if pending:
        raise Conflict(
            Problem.BUMP_ALREADY_PENDING, job_id=job.id or 0, request_id=pending[0].id or 0
        )
    bump = BumpRequest(
        job_id=job.id or 0,
        requested_by=ctx.actor.user_id,
        from_priority=job.priority,
        to_priority=to,
        reason=reason,
        created_at=ctx.now,
    )
    ctx.session.add(bump)
    ctx.session.flush()
    ctx.audit("bump.request", "bump", bump.id, job=job.id, to=to, reason=reason)
    approvals.ask_approvers(ctx.session, bump, job, ctx.now)
    return bump


def _withdraw_bumps(ctx: Context, job: Job) -> None:
    for bump in job_queries.pending_bumps(session=ctx.session, job_id=job.id or 0):
        bump.state = BumpState.WITHDRAWN
        bump.decided_at = ctx.now
        moot = because(ReasonCode.BUMP_MOOT, state=job.state)
        bump.decision_reason = moot.english()
        bump.decision_reason_code, bump.decision_reason_values = (
            moot.code.value,
            moot.stored_values(),
        )
        ctx.session.add(bump)
