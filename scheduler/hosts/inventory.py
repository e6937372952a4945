"""Applying poll reports to the database: host health, GPUs, utilization samples.

Everything a round needs is loaded once (hosts, GPUs, open allocations, running jobs), so
a round over hundreds of hosts costs a handful of queries plus the changed rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, insert
from sqlmodel import Session

from scheduler.config import PolicyConfig
from scheduler.dispatch import agent_job_id
from scheduler.hosts.report import GpuReading, HostReport
from scheduler.notices.events import Event, EventCode, EventKind
from storage.limits import LAST_ERROR
from storage.models import Gpu, GpuSample, Host, HostState
from storage.queries import cluster as cluster_queries
from storage.queries import jobs as job_queries


@dataclass
class _Round:
    """What one round of reports is applied against, and the changes it gathers."""

    policy: PolicyConfig
    now: datetime
    holders: dict[int, int]  # GPU id → job id, open allocations
    ours: set[str]  # agent run ids the database has going
    gpus: dict[int, dict[int, Row[Any]]]  # host id → GPU index → GPU (plain row)
    samples: list[dict[str, object]]
    sample: bool
    gpu_changes: list[dict[str, Any]] = field(default_factory=list)
    host_changes: list[dict[str, Any]] = field(default_factory=list)


def apply_reports(
    session: Session,
    policy: PolicyConfig,
    reports: Mapping[str, HostReport],
    now: datetime,
    *,
    sample: bool = True,
) -> list[Event]:
    """Update every registered host from its report; events for hosts that went down or came
    back. With `sample`, each answering GPU's utilization is also kept as a sample.

    Hosts and GPUs are read as plain rows and only what changed is written, in bulk: a
    steady round over hundreds of hosts writes next to nothing (a host's `last_seen_at`, like
    its GPUs', moves at the sampling pace; a change of state is written at once)."""
    gpus: dict[int, dict[int, Row[Any]]] = defaultdict(dict)
    for gpu in cluster_queries.reading_gpus(session=session):
        gpus[gpu.host_id][gpu.position] = gpu
    running = job_queries.on_host_rows(session=session)
    ctx = _Round(
        policy,
        now,
        cluster_queries.holder_ids(session=session),
        {agent_job_id(row.id, row.attempts) for row in running},
        gpus,
        [],
        sample,
    )
    events: list[Event] = []
    for host in cluster_queries.host_rows(session=session):
        report = reports.get(host.name)
        if report is None:
            continue
        events += _answered(session, host, report, ctx) if report.ok else _failed(host, report, ctx)
    cluster_queries.update_by_id(session=session, model=Host, changes=ctx.host_changes)
    cluster_queries.update_by_id(session=session, model=Gpu, changes=ctx.gpu_changes)
    if ctx.samples:
        session.execute(insert(GpuSample), ctx.samples)
    return events


def _answered(session: Session, host: Row[Any], report: HostReport, ctx: _Round) -> list[Event]:
    events = []
    if host.state == HostState.DOWN:
        events.append(Event(EventKind.HOST_UP, ctx.now, EventCode.HOST_BACK, host=host.name))
    change: dict[str, Any] = {}
    if host.state != HostState.UP:
        change.update(state=HostState.UP, state_since=ctx.now)
    if host.failed_polls:
        change["failed_polls"] = 0
    if host.agent_version != report.agent_version:
        change["agent_version"] = report.agent_version
    # An unhealthy host answers but takes no new job: its reason stays on it (the board
    # and `/gpu admin host list` show it) until it is healthy again.
    unhealthy = None if report.unhealthy is None else report.unhealthy[:LAST_ERROR]
    if host.last_error != unhealthy or host.untrusted:
        change.update(last_error=unhealthy, untrusted=False)
    if change or ctx.sample:
        ctx.host_changes.append({"id": host.id, "last_seen_at": ctx.now, **change})
    _update_gpus(session, host, report, ctx)
    return events


def _failed(host: Row[Any], report: HostReport, ctx: _Round) -> list[Event]:
    failed_polls = host.failed_polls + 1
    limit = ctx.policy.scheduler.hosts.down_after_failed_polls
    state = HostState.DOWN if failed_polls >= limit else HostState.DEGRADED
    events = []
    if state == HostState.DOWN and host.state != HostState.DOWN:
        events.append(
            Event(
                EventKind.HOST_DOWN,
                ctx.now,
                EventCode.HOST_DOWN,
                host=host.name,
                detail={"error": report.error},
            )
        )
    change: dict[str, Any] = {"id": host.id, "failed_polls": failed_polls}
    error = (report.error or "no answer")[:LAST_ERROR]
    if (host.last_error, host.untrusted) != (error, report.untrusted):
        change.update(last_error=error, untrusted=report.untrusted)
    if state != host.state:
        change.update(state=state, state_since=ctx.now)
    ctx.host_changes.append(change)
    return events


def _update_gpus(session: Session, host: Row[Any], report: HostReport, ctx: _Round) -> None:
    known = ctx.gpus.get(host.id, {})
    seen = set()
    for reading in report.gpus:
        values = _reading_values(reading, ctx, healthy=report.unhealthy is None)
        row = known.get(reading.index)
        if row is None:  # a card seen for the first time
            gpu = Gpu(host_id=host.id, index=reading.index, last_seen_at=ctx.now, **values)
            session.add(gpu)
            session.flush()
            gpu_id = gpu.id or 0
        else:
            gpu_id = row.id
            # Only what changed, so unchanged cards cost no UPDATE.
            change = {name: value for name, value in values.items() if getattr(row, name) != value}
            if ctx.sample:
                change["last_seen_at"] = ctx.now
            if change:
                ctx.gpu_changes.append({"id": gpu_id, **change})
        seen.add(reading.index)
        if ctx.sample:
            ctx.samples.append(
                {
                    "gpu_id": gpu_id,
                    "at": ctx.now,
                    "utilization_pct": reading.utilization_pct,
                    "memory_used_gib": reading.memory_used_gib,
                    "job_id": ctx.holders.get(gpu_id),
                }
            )
    for index, row in known.items():
        if index not in seen and row.healthy:  # the agent no longer reports it (fell off the bus)
            ctx.gpu_changes.append({"id": row.id, "healthy": False})


def _reading_values(reading: GpuReading, ctx: _Round, *, healthy: bool) -> dict[str, Any]:
    # Memory on a card that no running paika job holds belongs to someone else: the card is
    # busy. (A run the database no longer has but the host still does counts as foreign too.)
    # A card another job holds whole (Slurm's) is busy for all of its memory.
    foreign = reading.holder is None or reading.holder not in ctx.ours
    used = reading.memory_total_gib if reading.taken else sum(reading.processes.values())
    values = {
        "uuid": reading.uuid,
        "name": reading.name,
        "gpu_type": reading.gpu_type
        or ctx.policy.type_for_card(reading.name, reading.memory_total_gib)
        or reading.name,
        "memory_gib": round(reading.memory_total_gib, 2),
        "healthy": healthy,
        "utilization_pct": reading.utilization_pct,
        "memory_used_gib": reading.memory_used_gib,
        "foreign_memory_gib": round(used, 3) if foreign else 0.0,
    }
    return values


def prune_samples(session: Session, policy: PolicyConfig, now: datetime) -> int:
    """Forget samples older than the retention window; returns how many went."""
    cutoff = now - timedelta(hours=policy.scheduler.hosts.sample_retention_hours)
    return cluster_queries.delete_samples_before(session=session, cutoff=cutoff)
