"""A snapshot of the queue and the cluster: one JSON document, schema-versioned, that says
everything a new install needs to carry on with the same queue (the take-over story), and
what `paika state show | diff` read back.

    schema, taken_at, config_version, zone
    teams, members, accounts, quotas (with the GPU-hours used of each), templates,
    hosts (no token material), gpus, jobs (every job not yet ended, every column),
    allocations (which open job holds which GPU), waits (each waiting job's reason: its
    code, its place and the numbers it names)
    etas (each waiting job's ETA, as the policy worked it out), polls (when each host's
    agent last answered)

Jobs' commands (their `command`, their spec's `cmd`, templates' `cmd`) are kept as the
policy's `archive.commands` says (masking.py): masked by default. `commands_changed` lists the
jobs whose command the archive did not keep as written: a restore brings those back
cancelled, with the reason in their history, rather than queued to run `***` in place of
a secret (or nothing, under `none`); their owners submit them again.

Each table is {"columns": [...], "rows": [[...], ...]}, rows by id: a queue of 10,000 jobs
is written in tens of milliseconds and a few hundred kilobytes gzipped. Times are UTC,
ISO 8601 (`taken_at` names its zone; row times are UTC without one, as the database keeps
them). Keys are sorted and gzip gets no time stamp, so the same state gives the same bytes.
`content_digest` leaves out what changes with every write though nothing happened (when it
was taken, the ETAs drifting with the clock, the hosts' last polls), so an unchanged queue
is not archived again.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any

import orjson
from sqlalchemy import Engine
from sqlmodel import Session

from scheduler.archive.history import StoredConfig
from scheduler.archive.masking import CommandsKept, kept_command, kept_fields
from scheduler.collector import collector_paused
from scheduler.config import PolicyConfig
from scheduler.errors import Conflict, Problem, UserError
from scheduler.policy.plan import Wait, WaitCode
from scheduler.policy.reasons import Reason, ReasonCode
from storage.db import session_scope
from storage.models import (
    ON_HOST_STATES,
    Allocation,
    Gpu,
    Host,
    Job,
    JobEvent,
    JobState,
    Member,
    Quota,
    Team,
    Template,
    UnixAccount,
)
from storage.models.cluster import MaintenanceWindow, ShareApart, TeamReservation
from storage.models.jobs import DependencyState, JobDependency
from storage.queries import archive as archive_queries
from storage.queries import audit
from storage.queries import cluster as cluster_queries
from storage.queries import config as config_queries
from storage.queries import restore as restore_queries
from storage.queries import state as state_queries

SCHEMA = 1
Document = dict[str, Any]
# Who a restore is recorded as in the audit trail (no person made the rows).
RESTORER = "paika-restore"
# The history's reason for a waiting job the archive kept without its command as written.
RESTORED_WITHOUT_COMMAND = Reason(ReasonCode.RESTORED_WITHOUT_COMMAND).english()
# What changes at every write though the state did not (see content_digest).
PER_WRITE = ("taken_at", "etas", "polls")
# A wait: its reason (code, the numbers and names it gives) and place, apart from its ETA
# (which drifts with the clock); every field of Wait is in one or the other.
ETA_COLUMNS = ("job_id", "eta", "free_at", "as_of")
WAIT_COLUMNS = tuple(
    f.name for f in fields(Wait) if f.name == "job_id" or f.name not in ETA_COLUMNS
)
_wait_values = attrgetter(*WAIT_COLUMNS)
_HOSTS_AT = WAIT_COLUMNS.index("hosts")


def _wait_row(wait: Wait) -> list[Any]:
    """A wait as a document row: as JSON keeps it (the hosts it waits for as lists)."""
    row = list(_wait_values(wait))
    row[_HOSTS_AT] = [list(pair) for pair in row[_HOSTS_AT]]
    return row


# gzip's level 3: about three times faster than the default 6 on a queue of 10,000 jobs, for
# a fifth more bytes (0.6 MB instead of 0.5; bench/state_store.py).
GZIP_LEVEL = 3
_eta_row = attrgetter(*ETA_COLUMNS)


def build_document(
    session: Session,
    policy: PolicyConfig,
    waits: Mapping[int, Wait] | None,
    now: datetime,
    config_version: int | None,
) -> Document:
    """The queue and the cluster as `session` sees them at `now`, with the policy's reasons
    and ETAs from `waits` (the cycle's plan; None: none known)."""
    with collector_paused():
        return _document(session, policy, waits, now, config_version)


def _document(
    session: Session,
    policy: PolicyConfig,
    waits: Mapping[int, Wait] | None,
    now: datetime,
    config_version: int | None,
) -> Document:
    jobs = state_queries.active_jobs(session=session)
    ids, states = jobs.columns.index("id"), jobs.columns.index("state")
    state_of = {row[ids]: row[states] for row in jobs.rows}
    # The waits are the last cycle's; a job may have moved since (its data marked ready, or
    # started). Only a wait its job's state still agrees with is kept: the snapshot says one
    # thing of each job, and the first cycle after a restore works the rest out again.
    pending = sorted(
        (wait for job_id, wait in (waits or {}).items() if _still_so(wait, state_of.get(job_id))),
        key=attrgetter("job_id"),
    )
    return {
        "schema": SCHEMA,
        "taken_at": now.astimezone(UTC).isoformat(),
        "config_version": config_version,
        "zone": policy.timezone,
        "teams": _table(state_queries.teams(session=session)),
        "members": _table(state_queries.members(session=session)),
        "accounts": _table(state_queries.accounts(session=session)),
        "quotas": _table(state_queries.quotas(session=session)),
        "templates": _commands_kept(
            _table(state_queries.templates(session=session)), policy.archive.commands
        ),
        "hosts": _table(state_queries.hosts(session=session)),
        "polls": _table(state_queries.host_polls(session=session)),
        "gpus": _table(state_queries.gpus(session=session)),
        "jobs": _commands_kept(_table(jobs), policy.archive.commands),
        "commands_changed": _commands_changed(_table(jobs), policy.archive.commands),
        "allocations": _table(state_queries.open_allocations(session=session)),
        # Jobs that must not share a card again (a neighbour slowed one of them).
        "share_apart": _table(state_queries.share_apart(session=session)),
        # What waiting jobs still wait for (after=, afterany=, data=after:).
        "dependencies": _table(state_queries.dependencies(session=session)),
        # Hosts' planned maintenance: a restored install keeps the windows ahead.
        "maintenance": _table(state_queries.maintenance(session=session, now=now)),
        "reservations": _table(state_queries.reservations(session=session, now=now)),
        "waits": {"columns": list(WAIT_COLUMNS), "rows": [list(_wait_row(w)) for w in pending]},
        "etas": {"columns": list(ETA_COLUMNS), "rows": [list(_eta_row(w)) for w in pending]},
        # The highest job id given so far: the jobs between two snapshots' that neither
        # holds came and went in between (paika state diff says them).
        "last_job_id": state_queries.last_job_id(session=session),
    }


def _table(found: state_queries.Rows) -> dict[str, Any]:
    return {"columns": list(found.columns), "rows": found.rows}


def _commands_kept(table: dict[str, Any], kept: CommandsKept) -> dict[str, Any]:
    """A table's commands (`command`; `cmd` of `spec` and `fields`) as the policy keeps them
    in the archive: a job keeps "" for none (its column holds text)."""
    if kept == "full":
        return table
    columns = table["columns"]
    at = {name: columns.index(name) for name in ("command", "spec", "fields") if name in columns}
    rows = []
    for row in table["rows"]:
        row = list(row)
        if "command" in at and isinstance(row[at["command"]], str):
            row[at["command"]] = kept_command(row[at["command"]], kept) or ""
        for name in ("spec", "fields"):
            if name in at and isinstance(row[at[name]], Mapping):
                row[at[name]] = kept_fields(row[at[name]], kept)
        rows.append(row)
    return {**table, "rows": rows}


def _commands_changed(table: dict[str, Any], kept: CommandsKept) -> list[int]:
    """The ids of the jobs whose command the archive keeps otherwise than as written."""
    if kept == "full":
        return []
    columns = table["columns"]
    ids, command = columns.index("id"), columns.index("command")
    return [
        row[ids]
        for row in table["rows"]
        if isinstance(row[command], str) and kept_command(row[command], kept) != row[command]
    ]


def _without_their_commands(
    jobs: list[dict[str, Any]], doc: Mapping[str, Any], now: datetime
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Jobs as restored: a waiting one whose command the archive masked (or left out) comes
    back cancelled, never queued to run a command that is not the one submitted. A running
    one is its agent's matter (the host runs the real command). Returns the jobs and the
    history rows of those cancelled."""
    changed = set(doc.get("commands_changed") or ())
    stamp = now.astimezone(UTC).isoformat()  # rows hold times as a snapshot writes them
    out: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for job in jobs:
        if job["id"] in changed and job["state"] not in ON_HOST_STATES:
            events.append(
                {
                    "job_id": job["id"],
                    "at": stamp,
                    "from_state": job["state"],
                    "to_state": JobState.CANCELLED,
                    "actor": RESTORER,
                    "reason": RESTORED_WITHOUT_COMMAND,
                    "reason_code": ReasonCode.RESTORED_WITHOUT_COMMAND.value,
                }
            )
            job = {**job, "state": JobState.CANCELLED, "ended_at": stamp}
            job["state_reason"] = RESTORED_WITHOUT_COMMAND
            # Its reason is this one now, not the one the snapshot held (an older snapshot
            # has neither column: the restore fills them in as none).
            job["state_reason_code"] = ReasonCode.RESTORED_WITHOUT_COMMAND.value
            job["state_reason_values"] = None
        out.append(job)
    return out, events


def _dependencies(
    rows: list[dict[str, Any]], jobs: list[dict[str, Any]], now: datetime
) -> list[dict[str, Any]]:
    """What restored jobs wait for: a dependency of a job not restored goes; one still
    waiting for a job the snapshot does not hold (it had ended, how is not known) is held,
    for its owner to be told and to release or cancel it, rather than dropped and run."""
    restored = {job["id"] for job in jobs}
    stamp = now.astimezone(UTC).isoformat()
    out = []
    for row in rows:
        if row["job_id"] not in restored:
            continue
        if row["state"] == DependencyState.WAITING and row["upstream_id"] not in restored:
            row = {**row, "state": DependencyState.BROKEN, "settled_at": stamp, "told_at": None}
        out.append(row)
    return out


def records(doc: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
    """One table of a document as a dict per row, by column name."""
    table = doc.get(name) or {"columns": [], "rows": []}
    columns = table["columns"]
    return [dict(zip(columns, row, strict=True)) for row in table["rows"]]


def _still_so(wait: Wait, state: str | None) -> bool:
    """Whether a job in `state` (None: not active now) may still wait for this reason."""
    if state == JobState.WAITING_DATA:
        return wait.code is WaitCode.WAITING_FOR_DATA
    waiting = state in (JobState.QUEUED, JobState.PREEMPTED)
    return waiting and wait.code is not WaitCode.WAITING_FOR_DATA


def waits_of(doc: Mapping[str, Any]) -> dict[int, Wait]:
    """Each waiting job's Wait, as the document keeps it (reason, place and ETA)."""
    etas = {row["job_id"]: row for row in records(doc, "etas")}
    found = {}
    for row in records(doc, "waits"):
        eta = etas.get(row["job_id"], {})
        found[row["job_id"]] = Wait(
            **{
                **row,
                "code": WaitCode(row["code"]),
                # JSON has no tuples: the hosts a job waits for come back as lists
                "hosts": tuple(tuple(pair) for pair in row.get("hosts") or ()),
            },
            eta=eta.get("eta"),
            free_at=eta.get("free_at"),
            as_of=eta.get("as_of") or 0.0,
        )
    return found


def encode(doc: Document) -> bytes:
    """Compact JSON, gzipped with no time stamp: the same document gives the same bytes."""
    return gzip.compress(_json(doc), compresslevel=GZIP_LEVEL, mtime=0)


def _json(doc: Mapping[str, Any]) -> bytes:
    """Compact JSON with sorted keys, UTF-8: the bytes `json.dumps(doc, sort_keys=True,
    separators=(",", ":"), ensure_ascii=False)` gives, about ten times faster (orjson;
    bench/state_store.py)."""
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)


def decode(data: bytes, *, key: str = "") -> Document:
    """The document in `data`; a snapshot written by a newer paika (a schema this code does
    not know) or one that is not a snapshot is refused, saying which and what to do."""
    try:
        doc = orjson.loads(gzip.decompress(data))
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
    ETAs and the moment they were worked out, the hosts' last polls): equal for equal state."""
    return hashlib.sha256(_json({k: v for k, v in doc.items() if k not in PER_WRITE})).hexdigest()


def _without(row: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in names}


def taken_at(doc: Mapping[str, Any]) -> datetime:
    """When the snapshot was taken."""
    return datetime.fromisoformat(doc["taken_at"])


def _mark_archived(
    session: Session,
    doc: Mapping[str, Any],
    jobs: Sequence[Mapping[str, Any]],
    config: Sequence[StoredConfig],
    now: datetime,
) -> None:
    """What the store already holds of the restored install: its config versions, the specs
    of its jobs, the current template versions (kept there by the install that wrote them),
    and this snapshot's content."""
    marks = {
        "config": max((stored.version for stored in config), default=0),
        "specs": max((int(job["id"]) for job in jobs), default=0),
        "templates": archive_queries.last_template_version_id(session=session),
    }
    for stream, position in marks.items():
        archive_queries.set_mark(session=session, stream=stream, position=position, at=now)
    archive_queries.set_mark(
        session=session, stream="snapshot", position=0, digest=content_digest(doc), at=now
    )


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
    # Waiting jobs brought back cancelled: the archive did not keep their command as written.
    without_command: tuple[int, ...] = ()


def restore(
    engine: Engine,
    doc: Mapping[str, Any],
    now: datetime,
    config: Sequence[StoredConfig] = (),
) -> RestoreResult:
    """Rebuild an empty (migrated) database from a snapshot, in one transaction: the same
    teams, people, quotas (with what was used of them), templates, hosts, GPUs, jobs under
    the same numbers, and which job holds which GPU. Running jobs come back running on the
    same hosts; their agents keep running them, and the next cycle takes their word.

    `config`: the policy config's versions as the store keeps them (history.config_history),
    restored with their numbers, so the same version is in force and the same history can be
    rolled back to. The archive's marks are set to what the store already holds, so the new
    install's archiver does not store those versions, specs or this snapshot again.

    A database that holds rows of any of those tables is refused and nothing is written.
    """
    with session_scope(engine) as session:
        holding = restore_queries.tables_with_rows(session=session)
        if config and config_queries.newest_number(session=session) is not None:
            holding.append("config_versions")
        if holding:
            raise Conflict(Problem.RESTORE_NOT_EMPTY, tables=tuple(holding))
        polls = {row["id"]: row["last_seen_at"] for row in records(doc, "polls")}
        hosts = [{**host, "last_seen_at": polls.get(host["id"])} for host in records(doc, "hosts")]
        quotas = [
            {**_without(q, ("used_hours",)), "carried_hours": q.get("used_hours") or 0.0}
            for q in records(doc, "quotas")
        ]
        # An open allocation names its GPU twice; the cards' booked parts are summed after.
        allocations = [{**a, "active_gpu_id": a["gpu_id"]} for a in records(doc, "allocations")]
        templates = records(doc, "templates")
        jobs, cancelled = _without_their_commands(records(doc, "jobs"), doc, now)
        written = {
            model: restore_queries.insert_rows(session=session, model=model, rows=rows)
            for model, rows in (
                (Team, records(doc, "teams")),
                (Member, records(doc, "members")),
                (UnixAccount, records(doc, "accounts")),
                (Quota, quotas),
                (Template, templates),
                (Host, hosts),
                (Gpu, records(doc, "gpus")),
                (Job, jobs),
                (JobEvent, cancelled),
                (Allocation, allocations),
                (ShareApart, records(doc, "share_apart")),  # none in older snapshots
                (JobDependency, _dependencies(records(doc, "dependencies"), jobs, now)),
                (MaintenanceWindow, records(doc, "maintenance")),
                (TeamReservation, records(doc, "reservations")),
            )
        }
        cluster_queries.rebook_cards(session=session)
        restore_queries.template_versions_of_current(session=session, rows=templates)
        for stored in config:
            config_queries.add_version(
                session=session,
                version=stored.version,
                content=stored.content,
                sha256=stored.sha256,
                author=stored.author,
                at=stored.at,
                reason=stored.reason,
                source=stored.source,
                detail=None,
            )
        restore_queries.advance_sequences(session=session)
        _mark_archived(session, doc, jobs, config, now)
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
        running=sum(1 for job in jobs if job["state"] in ON_HOST_STATES),
        without_command=tuple(event["job_id"] for event in cancelled),
        allocations=written[Allocation],
    )
