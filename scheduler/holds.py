"""Start holds: a host whose agent refuses to start a job for a reason that does not change
by itself (its 403: no such Unix account there, the account is root, the agent is not root,
a report-only agent) is not sent that job again until something changes.

A refused start (scheduler/cycle.py) puts the job back in the queue, never failed, its
attempt counted, and records a hold of that job on that host; the job's owner and the admins
are told once, when the job's first standing hold is made. The policy is given each waiting
job's held hosts as data (scheduler/snapshots.py → `Pending.holds`) and places the job
elsewhere, or says why it waits (`WaitCode.REFUSED_BY_HOST`, with what to do).

Each cycle, `release` lets go of the holds whose cause may have gone:
- the account the job's owner maps to now is not the one refused (an admin changed the
  mapping: the job takes the new account);
- the host is not the one that refused: added again, or another agent version;
- the host is down (missed `down_after_failed_polls` polls in a row): whatever comes back
  may be another machine or a restarted agent, so the job may be sent there again. A poll
  or two missed on a busy network is not a change: the host only degrades, and the job is
  not sent again to be refused again;
- the job ended (a cancel, say);
- an admin put the host back in service (`/gpu admin host resume <host>`, see
  scheduler/service/admin.py): the admin fixed it.
A hold released is kept, with why, in its row and in the audit log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Set
from datetime import datetime

from sqlalchemy import Engine
from sqlmodel import Session

from scheduler.account_map import mapped_account
from scheduler.config import PolicyConfig
from scheduler.dispatch import DispatchError, RefusalCode
from storage.db import session_scope
from storage.models import TERMINAL_STATES, Host, HostState, Job, JobState, StartHold
from storage.queries import audit
from storage.queries import cluster as cluster_queries
from storage.queries import holds as hold_queries
from storage.queries import org as org_queries

log = logging.getLogger(__name__)
ACTOR = "scheduler"
RELEASED_ACTION = "job.hold_released"
PROBLEM_KEPT = 1000  # characters of the agent's words a hold keeps
# States in which a job waits for a start (and its owner's mapping is read afresh).
WAITING = (JobState.QUEUED, JobState.WAITING_DATA, JobState.PREEMPTED)


def host_seen(host: Host) -> str:
    """What a host is, as far as a refusal goes: when it was added and its agent's version.
    Another value: it may no longer refuse."""
    added = host.added_at.isoformat() if host.added_at else ""
    return f"{added}|{host.agent_version or ''}"[:100]


def _seen_key(seen: str | None) -> str | None:
    """A hold's `host_seen` as compared. Older holds also carry the moment the host's state
    last changed, a third part that one missed poll moved: it is not compared."""
    return None if seen is None else "|".join(seen.split("|")[:2])


def hold(session: Session, job: Job, failure: DispatchError, now: datetime) -> bool:
    """Hold `job` off the host that refused it, in the caller's transaction; True when the
    owner and the admins are to be told: the job has no other standing hold, and was never
    refused before for the same reason, there, as the same account (a hold released because
    the host's state changed, then refused again, is not told twice)."""
    refusal = (failure.refusal or RefusalCode.OTHER).value
    before = hold_queries.of_job(session=session, job_id=job.id or 0)
    host = cluster_queries.host_by_name(session=session, name=failure.host)
    session.add(
        StartHold(
            job_id=job.id or 0,
            host=failure.host,
            at=now,
            refusal=refusal,
            problem=failure.problem[:PROBLEM_KEPT],
            account=job.account,
            host_seen=host_seen(host) if host is not None else None,
        )
    )
    standing = any(row.released_at is None for row in before)
    told = any(
        (row.host, row.refusal, row.account) == (failure.host, refusal, job.account)
        for row in before
    )
    return not standing and not told


def release_host(session: Session, host: str, now: datetime, actor: str) -> list[int]:
    """An admin put `host` back in service (`/gpu admin host resume`): every job it held
    off may be sent there again (the admin fixed the host). The job ids released."""
    released = []
    for row in hold_queries.standing(session=session):
        if row.host.lower() == host.lower():
            _released(session, row, now, "admin_released", actor)
            released.append(row.job_id)
    return released


def release(engine: Engine, policy: PolicyConfig, now: datetime) -> list[int]:
    """Let go of the holds whose cause may have gone (see the module's docstring); the job
    ids released. Each hold is its own transaction: one that cannot be read costs only it."""
    with Session(engine) as session:
        ids = [row.id for row in hold_queries.standing(session=session)]
        if not ids:
            return []
        rows = cluster_queries.all_hosts(session=session)
        hosts = {host.name: host_seen(host) for host in rows}
        down = {host.name for host in rows if host.state == HostState.DOWN}
        teams = {team.id: team.name for team in org_queries.all_teams(session=session)}
    released = []
    for hold_id in ids:
        try:
            with session_scope(engine) as session:
                job_id = _release_one(session, policy, hold_id, hosts, down, teams, now)
        except Exception:
            log.exception("hold #%s could not be looked at; next cycle", hold_id)
            continue
        if job_id is not None:
            released.append(job_id)
    return released


def _release_one(
    session: Session,
    policy: PolicyConfig,
    hold_id: int | None,
    hosts: Mapping[str, str],
    down: Set[str],
    teams: Mapping[int | None, str],
    now: datetime,
) -> int | None:
    row = session.get(StartHold, hold_id)
    if row is None or row.released_at is not None:
        return None
    job = session.get(Job, row.job_id)
    why = None
    if job is None or job.state in TERMINAL_STATES:
        why = "job_ended"
    elif hosts.get(row.host) != _seen_key(row.host_seen):
        why = "host_changed"
    elif row.host in down:
        why = "host_down"
    elif job.state in WAITING:
        account = mapped_account(session, policy.accounts, job.owner, teams.get(job.team_id, ""))
        if account != row.account:
            why = "account_changed"
            if job.account != account:  # the job runs as its owner's account now
                job.account = account
                session.add(job)
    if why is None:
        return None
    _released(session, row, now, why, ACTOR)
    return row.job_id


def _released(session: Session, row: StartHold, now: datetime, why: str, actor: str) -> None:
    """Let go of one hold, in the caller's transaction, with an audit record of why."""
    row.released_at, row.released_why = now, why
    session.add(row)
    audit.record(
        session=session,
        at=now,
        actor=actor,
        action=RELEASED_ACTION,
        target_kind="job",
        target_id=row.job_id,
        detail={"host": row.host, "refusal": row.refusal, "why": why, "account": row.account},
    )
    log.info(
        "job #%s may be sent to %s again: %s",
        row.job_id,
        row.host,
        why,
        extra={"job_id": row.job_id, "host": row.host},
    )
