"""A snapshot of the queue and the cluster: one JSON document, schema-versioned, that says
everything a new install needs to carry on with the same queue (the take-over story), and
what `paika state show | diff` read back.

    schema, taken_at, config_version, zone
    teams, members, accounts, quotas (with the GPU-hours used of each), templates,
    hosts (no token material), gpus, jobs (every job not yet ended, every column, with the
    policy's wait reason and ETA), allocations (which open job holds which GPU)

Rows are sorted by id and keys by name, so the same state gives the same bytes; `encode`
gzips with no time stamp for the same reason. `content_digest` leaves out what changes with
every write though nothing happened (the moment, hosts' last poll, ETAs drifting with the
clock), so an unchanged queue is not archived again.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from scheduler.config import PolicyConfig
from scheduler.errors import Conflict, Problem, UserError
from scheduler.policy.plan import Wait, WaitCode
from storage.db import session_scope
from storage.models import (
    Allocation,
    Gpu,
    Host,
    Job,
    Member,
    Quota,
    Team,
    Template,
    UnixAccount,
)
from storage.queries import audit
from storage.queries import restore as restore_queries
from storage.queries import state as state_queries

SCHEMA = 1
Document = dict[str, Any]
# Who a restore is recorded as in the audit trail (no person made the rows).
RESTORER = "paika-restore"
# Fields that change at every write though the state did not (see content_digest).
_PER_WRITE = ("taken_at",)
_HOST_PER_WRITE = ("last_seen_at",)
_WAIT_PER_WRITE = ("eta", "free_at", "as_of")
# Wait fields kept with their value even when it is the default (the rest are left out then).
_WAIT_ALWAYS = ("code", "position")


def build_document(
    session: Session,
    policy: PolicyConfig,
    waits: Mapping[int, Wait] | None,
    now: datetime,
    config_version: int | None,
) -> Document:
    """The queue and the cluster as `session` sees them at `now`, with the policy's reasons
    and ETAs from `waits` (the cycle's plan; None: none known)."""
    waits = waits or {}
    jobs = []
    for row in state_queries.active_jobs(session=session):
        job = _plain(row)
        wait = waits.get(row["id"])
        if wait is not None:
            job["wait"] = wait_fields(wait)
        jobs.append(job)
    return {
        "schema": SCHEMA,
        "taken_at": _moment(now),
        "config_version": config_version,
        "zone": policy.timezone,
        "teams": [_plain(r) for r in state_queries.teams(session=session)],
        "members": [_plain(r) for r in state_queries.members(session=session)],
        "accounts": [_plain(r) for r in state_queries.accounts(session=session)],
        "quotas": [_plain(r) for r in state_queries.quotas(session=session)],
        "templates": [_plain(r) for r in state_queries.templates(session=session)],
        "hosts": [_plain(r) for r in state_queries.hosts(session=session)],
        "gpus": [_plain(r) for r in state_queries.gpus(session=session)],
        "jobs": jobs,
        "allocations": [_plain(r) for r in state_queries.open_allocations(session=session)],
    }


def _moment(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def _plain(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as JSON values: times as ISO 8601 in UTC, dates as ISO days; None left out
    (a restore writes None for what a row does not name)."""
    plain = {}
    for name, value in row.items():
        if value is None:
            continue
        if isinstance(value, datetime):
            value = value.astimezone(UTC).isoformat()
        elif isinstance(value, date):
            value = value.isoformat()
        plain[name] = value
    return plain


_WAIT_DEFAULTS = {f.name: f.default for f in fields(Wait)}


def wait_fields(wait: Wait) -> dict[str, Any]:
    """A wait as plain values: its code, its place, and the numbers that are not defaults."""
    found: dict[str, Any] = {"code": wait.code.value, "position": wait.position}
    for f in fields(Wait):
        if f.name in ("job_id", *_WAIT_ALWAYS):
            continue
        value = getattr(wait, f.name)
        if value is not None and value != _WAIT_DEFAULTS.get(f.name):
            found[f.name] = value
    return found


def wait_of(job_id: int, found: Mapping[str, Any]) -> Wait:
    """The Wait a document's job says (the inverse of wait_fields)."""
    values = {k: v for k, v in found.items() if k in _WAIT_DEFAULTS and k != "code"}
    return Wait(job_id=job_id, code=WaitCode(found["code"]), **{"eta": None, **values})


def encode(doc: Document) -> bytes:
    """Compact JSON, gzipped with no time stamp: the same document gives the same bytes."""
    return gzip.compress(_json(doc), compresslevel=6, mtime=0)


def _json(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def decode(data: bytes, *, key: str = "") -> Document:
    """The document in `data`; a snapshot written by a newer paika (a schema this code does
    not know) or one that is not a snapshot is refused, saying which and what to do."""
    try:
        doc = json.loads(gzip.decompress(data))
    except (OSError, EOFError, zlib.error, ValueError) as exc:
        raise UserError(Problem.SNAPSHOT_UNREADABLE, snapshot=key, detail=str(exc)) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("schema"), int):
        raise UserError(Problem.SNAPSHOT_UNREADABLE, snapshot=key, detail='"schema": ?')
    if doc["schema"] > SCHEMA:
        raise UserError(
            Problem.SNAPSHOT_SCHEMA_NEWER, snapshot=key, found=doc["schema"], known=SCHEMA
        )
    return doc


def content_digest(doc: Mapping[str, Any]) -> str:
    """SHA-256 of the document without what changes at every write (when it was taken, the
    hosts' last polls, the ETAs and the moment they were worked out): equal for equal state."""
    kept = {k: v for k, v in doc.items() if k not in _PER_WRITE}
    kept["hosts"] = [_without(h, _HOST_PER_WRITE) for h in doc.get("hosts", ())]
    kept["jobs"] = [
        {**job, "wait": _without(job["wait"], _WAIT_PER_WRITE)} if "wait" in job else job
        for job in doc.get("jobs", ())
    ]
    return hashlib.sha256(_json(kept)).hexdigest()


def _without(row: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in names}


def taken_at(doc: Mapping[str, Any]) -> datetime:
    """When the snapshot was taken."""
    return datetime.fromisoformat(doc["taken_at"])


@dataclass(frozen=True)
class RestoreResult:
    """What a restore wrote: when its snapshot was taken, and how many of each."""

    taken_at: datetime
    config_version: int | None
    teams: int
    quotas: int
    hosts: int
    gpus: int
    jobs: int
    running: int
    allocations: int


def restore(engine: Engine, doc: Mapping[str, Any], now: datetime) -> RestoreResult:
    """Rebuild an empty (migrated) database from a snapshot, in one transaction: the same
    teams, people, quotas (with what was used of them), templates, hosts, GPUs, jobs under
    the same numbers, and which job holds which GPU. Running jobs come back running on the
    same hosts; their agents keep running them, and the next cycle takes their word.

    A database that holds rows of any of those tables is refused and nothing is written.
    """
    with session_scope(engine) as session:
        holding = restore_queries.tables_with_rows(session=session)
        if holding:
            raise Conflict(Problem.RESTORE_NOT_EMPTY, tables=tuple(holding))
        quotas = [
            {**_without(q, ("used_hours",)), "carried_hours": q.get("used_hours", 0.0)}
            for q in doc["quotas"]
        ]
        jobs = [_without(job, ("wait",)) for job in doc["jobs"]]
        # An open allocation names its GPU twice: the database refuses a second open one.
        allocations = [{**a, "active_gpu_id": a["gpu_id"]} for a in doc["allocations"]]
        written = {
            model: restore_queries.insert_rows(session=session, model=model, rows=rows)
            for model, rows in (
                (Team, doc["teams"]),
                (Member, doc["members"]),
                (UnixAccount, doc["accounts"]),
                (Quota, quotas),
                (Template, doc["templates"]),
                (Host, doc["hosts"]),
                (Gpu, doc["gpus"]),
                (Job, jobs),
                (Allocation, allocations),
            )
        }
        restore_queries.template_versions_of_current(session=session, rows=doc["templates"])
        restore_queries.advance_sequences(session=session)
        audit.record(
            session=session,
            at=now,
            actor=RESTORER,
            action="state.restore",
            target_kind="snapshot",
            target_id=doc["taken_at"],
            detail={"schema": doc["schema"], "jobs": written[Job]},
        )
    return RestoreResult(
        taken_at=taken_at(doc),
        config_version=doc.get("config_version"),
        teams=written[Team],
        quotas=written[Quota],
        hosts=written[Host],
        gpus=written[Gpu],
        jobs=written[Job],
        running=sum(1 for job in doc["jobs"] if job["state"] in ("running", "unknown")),
        allocations=written[Allocation],
    )
