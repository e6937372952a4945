"""Idle-GPU reclaim: GPUs a running job holds but does not use are asked about, then reclaimed.

1. `check_idle`: a running job whose GPUs were *all* below `reclaim.idle_utilization_pct` in
   every sample of the last `idle_minutes`, with samples covering that window (no stretch
   longer than two sampling periods without one, so a host that stopped answering never
   looks idle) → its owner is asked "still using?" once: `idle:<job id>:<attempt>:<ask>`.
   A job that has held its GPUs for less than `idle_minutes` is never idle.
2. `act_on_idle`: an ask still unanswered `grace_minutes` after it was delivered, about a
   job still running and still idle → the action for the job's priority class:
   release: stop it and end it (cancelled); requeue: stop it and queue it again, the way a
   preempted job is (its host confirms the stop, then its GPUs are freed); keep: nothing.
   Each action is audited and announced to the owner: `reclaim:<job id>:<attempt>:<ask>`.
3. Answers (`answer_idle`, first answer wins): "Still using" → nothing happens for that
   occasion, and that run is not asked about again for `idle_minutes × STILL_USING_QUIET`;
   after that, once it has been idle a whole window again, it is asked again.
   "Release" → released at once, the same way as on a timeout.

What an ask's `answer` column ends up holding: still_using or release (a person), timeout
(nobody answered: the action was taken), not_idle (by the deadline its GPUs were busy
again, or the samples no longer showed them idle: no action; a new ask once it has been idle
a whole window again) or ended (the run ended or was already stopping).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from scheduler.alerts.answers import answering
from scheduler.config import PolicyConfig
from scheduler.hosts.reconcile import ACTOR
from scheduler.notices.kinds import NoticeKind
from scheduler.notices.outbox import Announcement, claim, from_row
from scheduler.races import on_race, retrying
from storage.db import session_scope
from storage.models import Allocation, GpuSample, Job, JobState, Notice
from storage.queries import audit, reclaim
from storage.queries import cluster as cluster_queries
from storage.queries import jobs as job_queries
from storage.queries import notices as notice_queries
from storage.queries import org as org_queries

ASK_KIND = NoticeKind.GPUS_IDLE
ACTION_KIND = NoticeKind.GPUS_RECLAIMED
STILL_USING = "still_using"
RELEASE = "release"
TIMEOUT = "timeout"
NOT_IDLE = "not_idle"
ENDED = "ended"
ANSWERS = (STILL_USING, RELEASE)
# After "still using", the same run is not asked about again for idle_minutes × this.
STILL_USING_QUIET = 3
# Samples may be this many sampling periods apart and still count as covering the window.
COVERAGE_PERIODS = 2
# How the host is asked to stop, by action: the reasons the cycle's reconcile already acts
# on once the host confirms (preempt → preempted, then queued; cancel → cancelled).
STOP_REASON = {"requeue": "reclaim", "release": "release"}

Stopper = Callable[[Sequence[int]], object]


@dataclass(frozen=True)
class IdleRun:
    """A running job whose GPUs have all been idle for the whole window."""

    job: Job
    gpu_ids: tuple[int, ...]
    gpu_type: str
    hosts: tuple[str, ...]
    peak_pct: float  # the highest utilization any of its GPUs showed in the window
    # The other jobs on its cards (id, owner), by id: a shared card is idle only as a whole,
    # so each of them is asked about it too.
    beside: tuple[tuple[int, str], ...] = ()


def sample_period(policy: PolicyConfig) -> float:
    """Seconds between two samples of a GPU: the sampling pace, rounded up to whole cycles."""
    return policy.sample_period_seconds()


def idle_runs(session: Session, policy: PolicyConfig, now: datetime) -> dict[int, IdleRun]:
    """Running jobs (not already being stopped) whose GPUs were all idle for `idle_minutes`."""
    knobs = policy.reclaim
    start = now - timedelta(minutes=knobs.idle_minutes)
    held = _held_since(session, start)
    samples = _samples_of_held(session, held, start)
    # Who is on each card now: a shared card's samples name one of its jobs, and are the
    # card's readings for every job on it (the card is idle, or not, as a whole).
    tenants = cluster_queries.card_tenants(session=session)
    gpus = {gpu.id: gpu for gpu in cluster_queries.all_gpus(session=session)}
    hosts = {host.id: host.name for host in cluster_queries.all_hosts(session=session)}
    max_gap = timedelta(seconds=COVERAGE_PERIODS * sample_period(policy))
    found = {}
    for job, allocations in held:
        job_id = job.id or 0
        ids = tuple(sorted(a.gpu_id for a in allocations))
        peaks = []
        for allocation in allocations:
            on_card = {t.job.id or 0 for t in tenants.get(allocation.gpu_id, ())} | {job_id}
            # A sample from the cycle that started the job was read before it held the GPU.
            since = [s for s in samples.get(allocation.gpu_id, []) if s.at > allocation.started_at]
            peaks.append(
                _idle_peak(since, on_card, start, now, knobs.idle_utilization_pct, max_gap)
            )
        known = [peak for peak in peaks if peak is not None]
        if len(known) == len(peaks):
            cards = [gpu for i in ids if (gpu := gpus.get(i)) is not None]
            gpu_type = cards[0].gpu_type if cards else "?"
            names = tuple(sorted({hosts.get(card.host_id, "?") for card in cards}))
            beside = tuple(
                sorted(
                    {
                        (t.job.id or 0, t.job.owner)
                        for i in ids
                        for t in tenants.get(i, ())
                        if t.job.id != job_id
                    }
                )
            )
            found[job_id] = IdleRun(job, ids, gpu_type, names, max(known), beside)
    return found


def _held_since(session: Session, start: datetime) -> list[tuple[Job, list[Allocation]]]:
    """Running jobs not being stopped that have held all their GPUs since `start` or before
    (a job that started within the window has not had the chance to be idle for all of it)."""
    held: dict[int, list[Allocation]] = defaultdict(list)
    for allocation in cluster_queries.open_allocations(session=session):
        held[allocation.job_id].append(allocation)
    return [
        (job, held[job.id or 0])
        for job in job_queries.jobs_in_states(session=session, states=(JobState.RUNNING,))
        if job.stop_requested_at is None
        and held.get(job.id or 0)
        and all(a.started_at <= start for a in held[job.id or 0])
    ]


def _samples_of_held(
    session: Session, held: Sequence[tuple[Job, list[Allocation]]], start: datetime
) -> dict[int, list[GpuSample]]:
    """The window's samples of each held GPU, by GPU id, oldest first (a shared card's are
    read once for all its jobs; each job keeps those taken after it took the card)."""
    gpu_ids = sorted({a.gpu_id for _, allocations in held for a in allocations})
    by_gpu: dict[int, list[GpuSample]] = defaultdict(list)
    for sample in reclaim.samples_of_gpus(session=session, gpu_ids=gpu_ids, since=start):
        by_gpu[sample.gpu_id].append(sample)
    return by_gpu


def _idle_peak(
    samples: Sequence[GpuSample],
    on_card: Collection[int],
    start: datetime,
    end: datetime,
    below: float,
    max_gap: timedelta,
) -> float | None:
    """The highest utilization in the window if every sample was taken while the card was
    held by the jobs now on it (this job, and on a shared card its neighbours: the card's
    reading is theirs together) and is below `below`, and the samples cover [start, end];
    else None (busy, held by another, or not enough evidence)."""
    if not samples:
        return None
    peak = 0.0
    for sample in samples:
        pct = sample.utilization_pct
        if sample.job_id not in on_card or pct is None or pct >= below:
            return None
        peak = max(peak, pct)
    moments = [start, *(s.at for s in samples), end]
    if any(later - earlier > max_gap for earlier, later in pairwise(moments)):
        return None
    return peak


# ---------------------------------------------------------------- 1. asking


def check_idle(engine: Engine, policy: PolicyConfig, now: datetime) -> list[Announcement]:
    """Ask the owner of each newly idle run whether they still use its GPUs (once per occasion)."""
    if not policy.reclaim.enabled:
        return []
    asked = []
    with session_scope(engine) as session:
        runs = idle_runs(session, policy, now)
        if not runs:
            return []
        latest = _latest_asks(session, list(runs.values()))
        teams = {team.id: team.name for team in org_queries.all_teams(session=session)}
        for job_id, run in sorted(runs.items()):
            number = _next_ask(latest.get(job_id), policy, now)
            if number is None:
                continue
            ask = _ask(run, number, policy, now, teams.get(run.job.team_id, "?"))
            if claim(session, ask):
                audit.record(
                    session=session,
                    at=now,
                    actor=ACTOR,
                    action="job.idle_asked",
                    target_kind="job",
                    target_id=job_id,
                    detail={"alert": ask.key, "peak_pct": run.peak_pct},
                )
                asked.append(ask)
    return asked


def _latest_asks(session: Session, runs: Sequence[IdleRun]) -> dict[int, Notice]:
    """The last ask about each run's current attempt, by job id."""
    attempts = {run.job.id or 0: run.job.attempts for run in runs}
    latest: dict[int, Notice] = {}
    for row in notice_queries.notices_about(
        session=session, kind=ASK_KIND, subjects=[str(job_id) for job_id in attempts]
    ):
        info = from_row(row).detail
        job_id = int(info.get("job_id", 0))
        if info.get("attempt") != attempts.get(job_id):
            continue
        if job_id not in latest or info.get("ask", 0) > from_row(latest[job_id]).detail.get(
            "ask", 0
        ):
            latest[job_id] = row
    return latest


def _next_ask(previous: Notice | None, policy: PolicyConfig, now: datetime) -> int | None:
    """The number of the next ask about this run, or None while it must not be asked again."""
    if previous is None:
        return 1
    number = int(from_row(previous).detail.get("ask", 1))
    if previous.answer == NOT_IDLE:
        return number + 1
    quiet = timedelta(minutes=policy.reclaim.idle_minutes * STILL_USING_QUIET)
    if previous.answer == STILL_USING and previous.answered_at is not None:
        return number + 1 if now >= previous.answered_at + quiet else None
    return None  # unanswered (its grace runs), or the run is being reclaimed or has ended


def _ask(run: IdleRun, number: int, policy: PolicyConfig, now: datetime, team: str) -> Announcement:
    job, knobs = run.job, policy.reclaim
    action = knobs.action.get(job.priority, "keep")  # type: ignore[call-overload]  # any str
    detail: dict[str, Any] = {
        "subject": str(job.id),
        "job_id": job.id,
        "name": job.name,
        "owner": job.owner,
        "team": team,
        "priority": job.priority,
        "attempt": job.attempts,
        "ask": number,
        "gpus": len(run.gpu_ids),
        "gpu_type": run.gpu_type,
        "hosts": list(run.hosts),
        "idle_pct": knobs.idle_utilization_pct,
        "idle_minutes": knobs.idle_minutes,
        "peak_pct": run.peak_pct,
        "grace_minutes": knobs.grace_minutes,
        "action": action,
    }
    if run.beside:
        detail["shared_with"] = [{"job_id": i, "owner": owner} for i, owner in run.beside]
    return Announcement(
        key=f"idle:{job.id}:{job.attempts}:{number}",
        kind=ASK_KIND,
        at=now,
        to_users=(job.owner,),
        detail=detail,
    )


# ---------------------------------------------------------------- 2. acting


def act_on_idle(
    engine: Engine, policy: PolicyConfig, now: datetime, stopper: Stopper | None = None
) -> list[Announcement]:
    """Take the policy's action on each ask left unanswered past the grace period.

    The stops are recorded on the jobs in the same transaction; the cycle sends them to the
    hosts (step 3 of every cycle). `stopper`, given the job ids, may send them at once.
    """
    if not policy.reclaim.enabled:
        return []
    notices = retrying(lambda: _act_on_asks(engine, policy, now), what="idle reclaim")
    if stopper is not None and notices:
        stopper([int(notice.detail["job_id"]) for notice in notices])
    return notices


def _act_on_asks(engine: Engine, policy: PolicyConfig, now: datetime) -> list[Announcement]:
    deadline = now - timedelta(minutes=policy.reclaim.grace_minutes)
    notices: list[Announcement] = []
    with session_scope(engine) as session:
        asks = notice_queries.unanswered_notices(
            session=session, kind=ASK_KIND, sent_before=deadline
        )
        if not asks:
            return []
        idle = idle_runs(session, policy, now)
        for row in asks:
            notice = _act(session, policy, now, from_row(row), idle)
            if notice is not None:
                notices.append(notice)
    return notices


def _act(
    session: Session,
    policy: PolicyConfig,
    now: datetime,
    ask: Announcement,
    idle: dict[int, IdleRun],
) -> Announcement | None:
    job = job_queries.get_job(session=session, job_id=int(ask.detail.get("job_id", 0)))
    if job is None or not _same_run(job, ask):
        _close(session, ask.key, ENDED, now)
        return None
    if job.stop_requested_at is not None:
        return None  # already being stopped (cancel, done, preemption); it ends soon
    if job.id not in idle:
        _close(session, ask.key, NOT_IDLE, now)
        return None
    action = policy.reclaim.action.get(job.priority, "keep")  # type: ignore[call-overload]
    if action not in STOP_REASON:
        return None  # keep: asking was all; the owner may still release it
    if not notice_queries.answer_notice(
        session=session, key=ask.key, answer=TIMEOUT, by=ACTOR, at=now
    ):
        return None  # answered meanwhile: the answer decides
    return _reclaim(session, policy, now, job, ask, action, None)


def _same_run(job: Job, ask: Announcement) -> bool:
    return job.state == JobState.RUNNING and job.attempts == ask.detail.get("attempt")


def _releasable(job: Job, ask: Announcement) -> bool:
    """Still the asked-about run, and not already stopping for a reason that a release
    must not override (cancel, done); a preemption in progress becomes the release."""
    return _same_run(job, ask) and (job.stop_requested_at is None or job.stop_reason == "preempt")


def _close(session: Session, key: str, answer: str, now: datetime) -> None:
    notice_queries.answer_notice(session=session, key=key, answer=answer, by=ACTOR, at=now)


def _reclaim(
    session: Session,
    policy: PolicyConfig,
    now: datetime,
    job: Job,
    ask: Announcement,
    action: str,
    by: str | None,
) -> Announcement | None:
    """Ask the job's host to stop it, as preemption and cancel do; audit and announce it."""
    if job.stop_requested_at is None or job.stop_reason == "preempt":
        job.stop_requested_at = now
    job.stop_reason = STOP_REASON[action]
    session.add(job)
    minutes = policy.reclaim.idle_minutes
    audit.record(
        session=session,
        at=now,
        actor=by or ACTOR,
        action="job.reclaim",
        target_kind="job",
        target_id=job.id,
        detail={"action": action, "alert": ask.key, "idle_minutes": minutes, "by": by},
    )
    detail = {
        **{
            k: ask.detail.get(k)
            for k in (
                "job_id",
                "name",
                "owner",
                "team",
                "priority",
                "attempt",
                "ask",
                "gpus",
                "gpu_type",
                "hosts",
            )
        },
        "subject": str(job.id),
        "action": action,
        "by": by,
        "ask_key": ask.key,
        "idle_minutes": minutes,
        "grace_minutes": policy.reclaim.grace_minutes,
    }
    notice = Announcement(
        key=f"reclaim:{job.id}:{job.attempts}:{ask.detail.get('ask', 1)}",
        kind=ACTION_KIND,
        at=now,
        to_users=(job.owner,),
        detail=detail,
    )
    return notice if claim(session, notice) else None


# ---------------------------------------------------------------- 3. answers


@dataclass(frozen=True)
class IdleAnswer:
    """What a click on Still using / Release did, and the ask to redraw."""

    known: bool  # the key names an idle ask
    allowed: bool = False  # the clicker is the job's owner, an approver of its team or an admin
    changed: bool = False  # this click recorded the answer (first wins)
    answer: str | None = None  # the answer that holds
    answered_by: str | None = None
    answered_at: datetime | None = None
    alert: Announcement | None = None
    action: Announcement | None = None  # the release this answer set off, if any


@on_race("an idle answer")
def answer_idle(
    engine: Engine,
    policy: PolicyConfig,
    admins: Collection[str],
    key: str,
    answer: str,
    user_id: str,
    now: datetime,
) -> IdleAnswer:
    """Record the answer to an idle ask (first wins); "release" stops the job at once."""
    if answer not in ANSWERS:
        raise ValueError(f"unknown answer {answer!r}")
    with session_scope(engine) as session:
        found = answering(session, key, ASK_KIND, user_id, admins)
        row, ask, job = found.row, found.notice, found.job
        if row is None or ask is None:
            return IdleAnswer(known=False)
        if not found.allowed:
            return IdleAnswer(True, alert=ask)
        if row.answered_at is not None:
            return IdleAnswer(True, True, False, row.answer, row.answered_by, row.answered_at, ask)
        notice_queries.answer_notice(session=session, key=key, answer=answer, by=user_id, at=now)
        audit.record(
            session=session,
            at=now,
            actor=user_id,
            action="job.idle_answered",
            target_kind="job",
            target_id=ask.detail.get("job_id"),
            detail={"alert": key, "answer": answer},
        )
        notice = None
        if answer == RELEASE and job is not None and _releasable(job, ask):
            notice = _reclaim(session, policy, now, job, ask, "release", user_id)
        return IdleAnswer(True, True, True, answer, user_id, now, ask, notice)


# ---------------------------------------------------------------- counting


def idle_hours(
    session: Session, policy: PolicyConfig, start: datetime, end: datetime
) -> dict[tuple[str, str], float]:
    """GPU-hours held idle in [start, end) by (team, GPU type), from the samples (the digest)."""
    return reclaim.idle_gpu_hours(
        session=session,
        start=start,
        end=end,
        below_pct=policy.reclaim.idle_utilization_pct,
        sample_seconds=sample_period(policy),
    )
