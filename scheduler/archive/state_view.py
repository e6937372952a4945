"""A snapshot read back as the board and the queue were at that moment (`paika state show`):
the same result objects `/gpu board` and `/gpu queue all` answer with, built from the
document instead of the database, so the faces draw them the same way."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from scheduler.archive.state import records, taken_at, waits_of
from scheduler.config import PolicyConfig
from scheduler.errors import Problem, UserError
from scheduler.service.board import NEXT_UP, BoardResult, assemble
from scheduler.service.jobs import PENDING_STATES, JobView, QueueResult, next_up
from scheduler.service.records import JobRecord
from storage.models import ON_HOST_STATES, Gpu, Host, Job
from storage.models.cluster import WHOLE_CARD
from storage.queries.cluster import CardTenant
from storage.queries.restore import typed

LATEST = "latest"
MOMENT_EXAMPLE = "2026-12-01T10:00"
# ISO 8601 to the minute or finer, with T or a space, with or without a zone.
_MOMENT = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$")


@dataclass(frozen=True)
class SnapshotView:
    """The board and the whole queue as a snapshot has them."""

    taken_at: datetime
    config_version: int | None
    board: BoardResult
    queue: QueueResult


UTC_ZONE = ZoneInfo("UTC")
# A moment as paika prints it: ISO 8601 without an offset, then a zone's abbreviation.
_NAMED_ZONE = re.compile(r"^(?P<moment>.*\d)\s+(?P<zone>[A-Za-z][A-Za-z0-9+-]{0,9})$")


def parse_moment(text: str, zone: ZoneInfo) -> datetime | None:
    """A moment people type: ISO 8601 (`2026-12-01T10:00`, `2026-12-01 10:00`, a day), with
    or without a zone (none: the install's zone); `latest` is None (the newest snapshot).
    The form paika prints moments in (`2026-12-01 10:00:37 CST`: the install zone's
    abbreviation then, or UTC) is taken back too."""
    given = text.strip()
    if given.lower() == LATEST:
        return None
    named = _NAMED_ZONE.match(given)
    if named is not None:
        return _in_named_zone(given, named["moment"], named["zone"], zone)
    if not _MOMENT.match(given.upper()):
        raise UserError(Problem.BAD_MOMENT, given=given, example=MOMENT_EXAMPLE)
    try:
        moment = datetime.fromisoformat(given.upper().replace("Z", "+00:00"))
    except ValueError as exc:
        raise UserError(Problem.BAD_MOMENT, given=given, example=MOMENT_EXAMPLE) from exc
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)


def _in_named_zone(given: str, moment: str, name: str, zone: ZoneInfo) -> datetime:
    """A moment followed by a zone's abbreviation: UTC (or GMT, Z), or the install zone's
    own abbreviation at that moment (CST for Asia/Shanghai)."""
    if name.upper() in ("UTC", "GMT", "Z"):
        found = parse_moment(moment, UTC_ZONE)
    else:
        found = parse_moment(moment, zone)
        if found is not None and found.tzname() != name:
            found = None
    if found is None or not _MOMENT.match(moment.upper()) or moment.upper().endswith("Z"):
        raise UserError(Problem.BAD_MOMENT, given=given, example=MOMENT_EXAMPLE)
    return found


def snapshot_view(doc: Mapping[str, Any], policy: PolicyConfig) -> SnapshotView:
    """The board and the queue (everyone's) the document describes."""
    teams = {team["id"]: team["name"] for team in records(doc, "teams")}
    jobs = {row["id"]: Job(**typed(Job, row)) for row in records(doc, "jobs")}
    waits = waits_of(doc)
    views = []
    for job_id, job in jobs.items():
        wait = waits.get(job_id)
        likely = wait.gpu_type if wait is not None else None
        views.append(JobView(JobRecord.of(job), teams.get(job.team_id, ""), wait, likely))
    running = sorted(
        (v for v in views if v.job.state in ON_HOST_STATES),
        key=lambda v: (v.job.started_at or v.job.submitted_at, v.job.id),
    )
    waiting = sorted(
        (v for v in views if v.job.state in PENDING_STATES),
        key=lambda v: (v.wait is None, v.wait.position if v.wait else 0, v.job.id),
    )
    # Every job on each card with its part: a shared card has several (a snapshot taken
    # before cards were shared says no part: each held its card whole).
    tenants: dict[int, list[CardTenant]] = defaultdict(list)
    for a in records(doc, "allocations"):
        if a["job_id"] in jobs:
            part = int(a.get("share_milli") or WHOLE_CARD)
            tenants[a["gpu_id"]].append(CardTenant(jobs[a["job_id"]], part))
    polls = {row["id"]: row["last_seen_at"] for row in records(doc, "polls")}
    hosts = [
        Host(**typed(Host, {**row, "last_seen_at": polls.get(row["id"])}))
        for row in records(doc, "hosts")
    ]
    board = assemble(
        taken_at(doc),
        policy,
        hosts=sorted(hosts, key=lambda host: host.name),
        gpus=[Gpu(**typed(Gpu, row)) for row in records(doc, "gpus")],
        tenants=tenants,
        counts=Counter((job.state, job.priority) for job in jobs.values()),
        next_up=next_up(waiting, NEXT_UP),
        config_version=doc.get("config_version"),
    )
    return SnapshotView(
        taken_at(doc), doc.get("config_version"), board, QueueResult("all", running, waiting)
    )
