"""What changed between two snapshots (`paika state diff T1 T2`): jobs that came or went or
changed state, priority, wait reason or placement; hosts and GPUs that changed state;
quotas granted, removed or changed. Plain codes and values; the faces say them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from scheduler.archive.state import ETA_COLUMNS, records, taken_at
from storage.models.cluster import WHOLE_CARD

Plain = str | int | float | bool | None
# A job's wait reason is given whole (code, numbers, ETA), for the faces to say it.
Value = Plain | Mapping[str, Any]


class DiffKind(StrEnum):
    """What a change is about; each value is its catalogue term (`snapshot.kind.*`)."""

    JOB = "job"
    HOST = "host"
    GPU = "gpu"
    QUOTA = "quota"


class DiffField(StrEnum):
    """Which part of it changed; each value is its catalogue term (`snapshot.field.*`)."""

    STATE = "state"
    PRIORITY = "priority"
    REASON = "reason"
    PLACEMENT = "placement"
    SHARE = "share"  # its part of a shared card (a fraction); None: whole cards, or none
    DRAINING = "draining"
    HEALTHY = "healthy"
    GPU_TYPE = "gpu_type"
    GPU_HOURS = "gpu_hours"
    USED_HOURS = "used_hours"
    EXPIRES_ON = "expires_on"


@dataclass(frozen=True)
class Appeared:
    """A job, host, GPU or quota in one snapshot and not the other."""

    kind: DiffKind
    subject: str  # "#12 train-a", "gpu-a", "gpu-a/3", "#4 vision"


@dataclass(frozen=True)
class Change:
    """One field of one thing, from `old` to `new`."""

    kind: DiffKind
    subject: str
    field: DiffField
    old: Value
    new: Value


@dataclass(frozen=True)
class StateDiff:
    """Everything that changed from the snapshot taken at `since` to the one at `until`."""

    since: datetime
    until: datetime
    added: tuple[Appeared, ...]
    removed: tuple[Appeared, ...]
    changed: tuple[Change, ...]
    # Jobs submitted and ended between the two, in neither snapshot (ids; only where both
    # documents say the highest job id given).
    came_and_went: tuple[int, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.came_and_went)


# The fields compared, per kind: how each is read from a document's row.
Reader = Callable[[Mapping[str, Any]], Value]
# A reason is its code and its numbers; its place in the queue and its ETA move with
# every other job and with the clock, and are not a change of reason.
_NOT_REASON = ("job_id", "position", *ETA_COLUMNS)


def _reason(row: Mapping[str, Any]) -> Value:
    wait = row.get("wait")
    return {k: v for k, v in wait.items() if k not in _NOT_REASON} if wait else None


def _wait(row: Mapping[str, Any]) -> Value:
    wait: Mapping[str, Any] | None = row.get("wait")
    return wait


_FIELDS: dict[DiffKind, tuple[tuple[DiffField, Reader], ...]] = {
    DiffKind.JOB: (
        (DiffField.STATE, lambda row: row.get("state")),
        (DiffField.PRIORITY, lambda row: row.get("priority")),
        (DiffField.REASON, _reason),
        (DiffField.PLACEMENT, lambda row: row.get("placement")),
        (DiffField.SHARE, lambda row: row.get("share")),
    ),
    DiffKind.HOST: (
        (DiffField.STATE, lambda row: row.get("state")),
        (DiffField.DRAINING, lambda row: bool(row.get("draining"))),
    ),
    DiffKind.GPU: (
        (DiffField.HEALTHY, lambda row: bool(row.get("healthy"))),
        (DiffField.GPU_TYPE, lambda row: row.get("gpu_type")),
    ),
    DiffKind.QUOTA: (
        (DiffField.GPU_TYPE, lambda row: row.get("gpu_type")),
        (DiffField.GPU_HOURS, lambda row: row.get("gpu_hours")),
        (DiffField.USED_HOURS, lambda row: round(float(row.get("used_hours") or 0.0), 2)),
        (DiffField.EXPIRES_ON, lambda row: row.get("expires_on")),
    ),
}


def diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> StateDiff:
    """What changed from snapshot `a` to snapshot `b`, in a stable order (by kind, then id)."""
    before, after = _things(a), _things(b)
    added, removed, changed = [], [], []
    for kind in DiffKind:
        old, new = before[kind], after[kind]
        for key in sorted(new.keys() - old.keys()):
            added.append(Appeared(kind, _subject(kind, new[key])))
        for key in sorted(old.keys() - new.keys()):
            removed.append(Appeared(kind, _subject(kind, old[key])))
        for key in sorted(old.keys() & new.keys()):
            for field, read in _FIELDS[kind]:
                was, now = read(old[key]), read(new[key])
                if was == now:
                    continue
                if field is DiffField.REASON:  # said whole, with its ETA
                    was, now = _wait(old[key]), _wait(new[key])
                changed.append(Change(kind, _subject(kind, new[key]), field, was, now))
    return StateDiff(
        taken_at(a),
        taken_at(b),
        tuple(added),
        tuple(removed),
        tuple(changed),
        _came_and_went(a, b, before[DiffKind.JOB].keys() | after[DiffKind.JOB].keys()),
    )


def _came_and_went(a: Mapping[str, Any], b: Mapping[str, Any], held: set[Any]) -> tuple[int, ...]:
    """The jobs given ids between the two snapshots that neither holds: submitted and ended
    in between. Unknown (none) for a document from before snapshots kept the last id."""
    first, last = a.get("last_job_id"), b.get("last_job_id")
    if first is None or last is None:
        return ()
    low, high = sorted((int(first), int(last)))
    return tuple(job for job in range(low + 1, high + 1) if job not in held)


def _things(doc: Mapping[str, Any]) -> dict[DiffKind, dict[Any, Mapping[str, Any]]]:
    """Each kind's rows by a key that survives a restore (ids; a GPU by host and index); a
    job with its placement and its wait (reason, place and ETA)."""
    hosts = {host["id"]: host for host in records(doc, "hosts")}
    gpus = {
        gpu["id"]: {
            **gpu,
            "host": hosts[gpu["host_id"]]["name"] if gpu["host_id"] in hosts else "?",
        }
        for gpu in records(doc, "gpus")
    }
    placement: dict[int, list[str]] = {}
    share: dict[int, float] = {}
    for allocation in records(doc, "allocations"):
        gpu = gpus.get(allocation["gpu_id"])
        where = f"{gpu['host']}/{gpu['index']}" if gpu else f"gpu {allocation['gpu_id']}"
        placement.setdefault(allocation["job_id"], []).append(where)
        # A part of a shared card (a snapshot from before cards were shared says none).
        milli = int(allocation.get("share_milli") or WHOLE_CARD)
        if milli < WHOLE_CARD:
            share[allocation["job_id"]] = milli / WHOLE_CARD
    etas = {row["job_id"]: row for row in records(doc, "etas")}
    waits = {row["job_id"]: {**row, **etas.get(row["job_id"], {})} for row in records(doc, "waits")}
    teams = {team["id"]: team["name"] for team in records(doc, "teams")}
    return {
        DiffKind.JOB: {
            job["id"]: {
                **job,
                "placement": ", ".join(sorted(placement.get(job["id"], []))),
                "share": share.get(job["id"]),
                "wait": waits.get(job["id"]),
            }
            for job in records(doc, "jobs")
        },
        DiffKind.HOST: {host["name"]: host for host in hosts.values()},
        DiffKind.GPU: {(gpu["host"], gpu["index"]): gpu for gpu in gpus.values()},
        DiffKind.QUOTA: {
            quota["id"]: {**quota, "team": teams.get(quota["team_id"], "?")}
            for quota in records(doc, "quotas")
        },
    }


def _subject(kind: DiffKind, row: Mapping[str, Any]) -> str:
    if kind is DiffKind.JOB:
        return f"#{row['id']} {row['name']}"
    if kind is DiffKind.HOST:
        return str(row["name"])
    if kind is DiffKind.GPU:
        return f"{row['host']}/{row['index']}"
    return f"#{row['id']} {row['team']}"
