"""The decision log: what each cycle decided, as rows of the `decisions` table.

Lines, each with its moment and job:
- start: a start the host took (hosts, GPU type, GPUs, attempt, the match and its alternatives);
- preempt: an idle-class job asked to stop for a core job (for whom, by when, why);
- reserve: EASY backfill keeping GPUs of a type for a blocked job;
- wait: a waiting job's reason, written only when it changes.

The log compacts: a reason is written again only when what it says changes — its code, the
type waited for, the costlier type it could take, whom it waits behind, or the hosts it
waits for (each with why it takes no jobs; the detail's `hosts`, as [host, why] pairs) or
that refused it. Its place in
the queue and its ETA drift every cycle and are not a change. The same holds for a
reservation (a new type or size is a change; its start drifting is not). The last line
written for each job is kept in memory, read from the table on first use, so a restarted
cycle does not write the same reasons again.

`/gpu why` reads these rows (scheduler/service/why.py); the archiver ships them to the
object store by day.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from scheduler.policy.plan import Alternative, Plan, Preempt, Reserved, Start, Wait, WaitCode
from scheduler.policy.reasons import Reason, reason_of
from scheduler.policy.snapshot import Snapshot
from storage.db import session_scope
from storage.models import JobState
from storage.queries import decisions as decision_queries

# Codes whose GPU type is the shadow plan's estimate, not what the job waits for.
_ESTIMATED_TYPE = frozenset(
    code.value
    for code in (WaitCode.BEHIND_HIGHER_PRIORITY, WaitCode.BEHIND_EARLIER, WaitCode.NO_TYPE_FREE)
)
# Jobs that wait, whose last reason the log keeps.
WAITING_STATES = (JobState.WAITING_DATA, JobState.QUEUED, JobState.PREEMPTED)


class Kind(StrEnum):
    """What a line of the log records."""

    START = "start"
    PREEMPT = "preempt"
    RESERVE = "reserve"
    WAIT = "wait"


# What makes a reason (or a reservation) a different one; everything else is drift.
Said = tuple[object, ...]


@dataclass(frozen=True)
class Outcome:
    """What the cycle did with the plan: the starts the hosts took (with their attempt), the
    starts whose answer is not known yet, and the preemptions it recorded."""

    at: datetime
    started: Mapping[int, int]  # job id → attempt
    unconfirmed: Iterable[int]
    preempted: Iterable[int]
    # When each start was recorded, where not `at` (a job submitted while the cycle ran).
    start_times: Mapping[int, datetime] = field(default_factory=dict)


class DecisionLog:
    """Writes one cycle's lines; remembers the last reason and reservation written per job."""

    def __init__(self) -> None:
        self._waits: dict[int, Said] | None = None  # None: not read from the table yet
        self._reserved: dict[int, Said] = {}
        # Starts sent but not yet confirmed: logged once their host takes them.
        self._sent: dict[int, Start] = {}

    def write(self, engine: Engine, snapshot: Snapshot, plan: Plan, outcome: Outcome) -> int:
        """Append this cycle's lines in one transaction; how many were written. The memory
        moves on only once they are committed, so a failed write is tried again."""
        if self._waits is None:
            with Session(engine) as session:
                self._waits, self._reserved = _remembered(session)
        waits, reserved = self._waits, self._reserved
        lines = self._starts(plan, outcome)
        lines += _preemptions(plan.preemptions, outcome)
        now_reserved = {held.job_id: held for held in plan.reservations}
        reserve_said = {job_id: _reserve_said(held) for job_id, held in now_reserved.items()}
        lines += [
            _line(outcome.at, job_id, Kind.RESERVE, _reserve_detail(now_reserved[job_id]))
            for job_id, said in reserve_said.items()
            if reserved.get(job_id) != said
        ]
        fresh = _waits_as_said(snapshot, plan)
        wait_said = {job_id: _wait_said(wait) for job_id, wait in fresh.items()}
        changed = [job_id for job_id, said in wait_said.items() if waits.get(job_id) != said]
        if changed:
            priorities = {job.id: job.priority for job in snapshot.pending}
            lines += [
                _line(outcome.at, job_id, Kind.WAIT, wait_detail(fresh[job_id], priorities))
                for job_id in changed
            ]
        if lines:
            with session_scope(engine) as session:
                decision_queries.append(session=session, lines=lines)
        # A job that started or stopped waiting is forgotten: waiting again later is news.
        self._waits, self._reserved = wait_said, reserve_said
        return len(lines)

    def _starts(self, plan: Plan, outcome: Outcome) -> list[dict[str, Any]]:
        planned = {start.job_id: start for start in plan.starts}
        for job_id in outcome.unconfirmed:
            if job_id in planned:
                self._sent[job_id] = planned[job_id]
        lines = []
        for job_id, attempt in outcome.started.items():
            start = planned.get(job_id) or self._sent.pop(job_id, None)
            if start is not None:
                at = outcome.start_times.get(job_id, outcome.at)
                lines.append(_line(at, job_id, Kind.START, start_detail(start, attempt)))
        # Kept while its answer is awaited; a start settled another way (the host's report,
        # a refusal) is told by the job's history instead.
        awaited = set(outcome.unconfirmed)
        self._sent = {job_id: s for job_id, s in self._sent.items() if job_id in awaited}
        return lines


def _remembered(session: Session) -> tuple[dict[int, Said], dict[int, Said]]:
    """The last reason and reservation written for each waiting job, unless it started since."""
    rows = decision_queries.latest_of_jobs_in(
        session=session,
        states=WAITING_STATES,
        kinds=(Kind.WAIT, Kind.RESERVE, Kind.START),
    )
    latest: dict[tuple[int, str], tuple[int, dict[str, Any]]] = {
        (row.job_id or 0, row.kind): (row.id or 0, row.detail or {}) for row in rows
    }
    waits: dict[int, Said] = {}
    reserved: dict[int, Said] = {}
    for (job_id, kind), (row_id, detail) in latest.items():
        started = latest.get((job_id, Kind.START), (0, {}))[0]
        if row_id < started:
            continue
        if kind == Kind.WAIT:
            waits[job_id] = _detail_said(detail)
        elif kind == Kind.RESERVE:
            reserved[job_id] = (detail.get("gpu_type"), detail.get("gpus"))
    return waits, reserved


def _waits_as_said(snapshot: Snapshot, plan: Plan) -> dict[int, Wait]:
    """The plan's waits as people are told them: with no host at all, "never fits" is said as
    "no hosts yet" (as `/gpu status` says it)."""
    if snapshot.hosts:
        return plan.waits
    return {
        job_id: _no_hosts(wait) if wait.code is WaitCode.NEVER_FITS else wait
        for job_id, wait in plan.waits.items()
    }


def _no_hosts(wait: Wait) -> Wait:
    return replace(wait, code=WaitCode.NO_HOSTS)


def _wait_said(wait: Wait) -> Said:
    return _said(
        wait.code.value,
        wait.gpu_type,
        wait.costlier,
        wait.behind,
        wait.hosts,
        (wait.refused_by, wait.refusal),
    )


def _detail_said(detail: Mapping[str, Any]) -> Said:
    return _said(
        str(detail.get("code")),
        detail.get("gpu_type"),
        str(detail.get("costlier") or ""),
        detail.get("behind"),
        _hosts_of(detail),
        (str(detail.get("refused_by") or ""), str(detail.get("refusal") or "")),
    )


def _said(
    code: str,
    gpu_type: str | None,
    costlier: str,
    behind: int | None,
    hosts: tuple[tuple[str, str], ...],
    refused: tuple[str, str],
) -> Said:
    """What makes a reason a different one. Where the type is the ETA's estimate (waiting
    behind others, or for any free GPU), it drifts with the estimate and is left out. The
    hosts a job waits for, and why each takes no jobs, are part of what it says: "waiting
    for gpu-a (down)" and "waiting for gpu-a (draining), gpu-b (not seen yet)" differ."""
    return (code, None if code in _ESTIMATED_TYPE else gpu_type, costlier, behind, hosts, refused)


def _hosts_of(detail: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The hosts a wait line names as (host, why it takes no jobs); none on older lines."""
    return tuple((str(host), str(why)) for host, why in detail.get("hosts") or ())


def _reserve_said(held: Reserved) -> Said:
    return (held.gpu_type, held.gpus)


def wait_detail(wait: Wait, priorities: Mapping[int, str]) -> dict[str, Any]:
    """A reason as a line's detail: the code and every number the faces say it with, and the
    class of the job it waits behind."""
    return {
        "code": wait.code.value,
        "position": wait.position,
        "eta": wait.eta,
        "gpu_type": wait.gpu_type,
        "higher": wait.higher,
        "earlier": wait.earlier,
        "costlier": wait.costlier,
        "free_at": wait.free_at,
        "left_hours": wait.left_hours,
        "needs_hours": wait.needs_hours,
        "gpus": wait.gpus,
        "keeps_headroom": wait.keeps_headroom,
        "behind": wait.behind,
        "behind_priority": priorities.get(wait.behind) if wait.behind is not None else None,
        # Waiting for hosts: each as [host, why it takes no jobs now] (a HostOut value).
        "hosts": [list(pair) for pair in wait.hosts],
        "refused_by": wait.refused_by,
        "refusal": wait.refusal,
    }


def wait_of(job_id: int, at: datetime, detail: Mapping[str, Any]) -> Wait:
    """A wait line back as the policy's Wait, as of the line's moment."""
    return Wait(
        job_id,
        WaitCode(detail["code"]),
        int(detail.get("position") or 0),
        detail.get("eta"),
        detail.get("gpu_type"),
        higher=int(detail.get("higher") or 0),
        earlier=int(detail.get("earlier") or 0),
        costlier=str(detail.get("costlier") or ""),
        free_at=detail.get("free_at"),
        left_hours=float(detail.get("left_hours") or 0.0),
        needs_hours=float(detail.get("needs_hours") or 0.0),
        gpus=int(detail.get("gpus") or 0),
        keeps_headroom=bool(detail.get("keeps_headroom")),
        as_of=at.timestamp(),
        behind=detail.get("behind"),
        refused_by=str(detail.get("refused_by") or ""),
        refusal=str(detail.get("refusal") or ""),
        hosts=_hosts_of(detail),
    )


def start_detail(start: Start, attempt: int) -> dict[str, Any]:
    """A start as a line's detail: where, on what, which attempt, and the match."""
    match = start.match
    return {
        "hosts": list(start.hosts),
        "gpu_type": start.gpu_type,
        "gpus": len(start.gpu_ids),
        "attempt": attempt,
        "match": {
            "chosen": match.chosen,
            "alternatives": [weighed_detail(alt, waited=False) for alt in match.alternatives],
            "reason": match.reason,
            **_coded("reason", match.why),
        },
    }


def weighed_detail(alt: Alternative, *, waited: bool = True) -> dict[str, Any]:
    """A type weighed at a match as JSON (a start's line, the matches table): its verdict in
    English and as a code with its values; `waited`: with how long it would have waited."""
    said: dict[str, Any] = {
        "gpu_type": alt.gpu_type,
        "price_per_gpu_hour": alt.price_per_gpu_hour,
        "verdict": alt.verdict,
    }
    if waited:
        said["wait_s"] = alt.wait_s
    return said | _coded("verdict", alt.verdict_why)


def weighed_of(said: Mapping[str, Any]) -> Alternative:
    """A type weighed at a match, read back from its JSON (older rows: no code, no wait)."""
    wait = said.get("wait_s")
    return Alternative(
        str(said.get("gpu_type", "")),
        float(said.get("price_per_gpu_hour") or 0.0),
        str(said.get("verdict", "")),
        float(wait) if wait is not None else None,
        reason_of(said.get("verdict_code"), said.get("verdict_values")),
    )


def _coded(name: str, why: Reason | None) -> dict[str, Any]:
    """A reason's code and values under `name`_code and `name`_values (nothing for none)."""
    if why is None:
        return {}
    return {f"{name}_code": why.code.value, f"{name}_values": why.stored_values()}


def _preemptions(preemptions: Iterable[Preempt], outcome: Outcome) -> list[dict[str, Any]]:
    recorded = set(outcome.preempted)
    return [
        _line(
            outcome.at,
            preempt.job_id,
            Kind.PREEMPT,
            {
                "for_job": preempt.for_job,
                "deadline": _moment(preempt.deadline),
                "reason": preempt.reason,
                "code": preempt.code.value,
            },
        )
        for preempt in preemptions
        if preempt.job_id in recorded
    ]


def _reserve_detail(held: Reserved) -> dict[str, Any]:
    return {"gpu_type": held.gpu_type, "gpus": held.gpus, "start": _moment(held.start)}


def _moment(posix: float) -> str | None:
    """A POSIX moment as ISO text in UTC (None when it is never)."""
    if posix == float("inf"):
        return None
    return datetime.fromtimestamp(posix, UTC).isoformat()


def _line(at: datetime, job_id: int, kind: Kind, detail: dict[str, Any]) -> dict[str, Any]:
    return {"at": at, "job_id": job_id, "kind": kind.value, "detail": detail}
