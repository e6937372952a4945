"""Applying poll reports to the database: host health, GPUs, utilization samples.

Everything a round needs is loaded once (hosts, GPUs, open allocations, running jobs), so
a round over hundreds of hosts costs a handful of queries plus the changed rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import insert
from sqlmodel import Session

from scheduler.config import PolicyConfig
from scheduler.dispatch import agent_job_id
from scheduler.hosts.report import GpuReading, HostReport
from scheduler.notify import Event, EventKind
from storage.models import Gpu, GpuSample, Host, HostState
from storage.queries import cluster as cluster_queries
from storage.queries import jobs as job_queries


@dataclass
class _Round:
    """What one round of reports is applied against."""

    policy: PolicyConfig
    now: datetime
    holders: dict[int, int]  # GPU id → job id, open allocations
    ours: set[str]  # agent run ids the database has going
    gpus: dict[int, dict[int, Gpu]]  # host id → GPU index → GPU
    samples: list[dict[str, object]]
    sample: bool


def apply_reports(
    session: Session,
    policy: PolicyConfig,
    reports: Mapping[str, HostReport],
    now: datetime,
    *,
    sample: bool = True,
) -> list[Event]:
    """Update every registered host from its report; events for hosts that went down or came
    back. With `sample`, each answering GPU's utilization is also kept as a sample."""
    gpus: dict[int, dict[int, Gpu]] = defaultdict(dict)
    for gpu in cluster_queries.all_gpus(session=session):
        gpus[gpu.host_id][gpu.index] = gpu
    running = job_queries.running_rows(session=session)
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
    for host in cluster_queries.all_hosts(session=session):
        report = reports.get(host.name)
        if report is None:
            continue
        events += (
            _answered(session, host, report, ctx)
            if report.ok
            else _failed(session, host, report, ctx)
        )
    if ctx.samples:
        session.execute(insert(GpuSample), ctx.samples)
    return events


def _answered(session: Session, host: Host, report: HostReport, ctx: _Round) -> list[Event]:
    events = []
    if host.state == HostState.DOWN:
        events.append(
            Event(EventKind.HOST_UP, ctx.now, f"host {host.name} is back", host=host.name)
        )
    if host.state != HostState.UP:
        host.state_since = ctx.now
    host.state, host.failed_polls, host.last_seen_at = HostState.UP, 0, ctx.now
    host.agent_version = report.agent_version
    session.add(host)
    _update_gpus(session, host, report, ctx)
    return events


def _failed(session: Session, host: Host, report: HostReport, ctx: _Round) -> list[Event]:
    host.failed_polls += 1
    limit = ctx.policy.scheduler.hosts.down_after_failed_polls
    state = HostState.DOWN if host.failed_polls >= limit else HostState.DEGRADED
    events = []
    if state == HostState.DOWN and host.state != HostState.DOWN:
        events.append(
            Event(
                EventKind.HOST_DOWN,
                ctx.now,
                f"host {host.name} is down: {report.error}",
                host=host.name,
            )
        )
    if state != host.state:
        host.state, host.state_since = state, ctx.now
    session.add(host)
    return events


def _update_gpus(session: Session, host: Host, report: HostReport, ctx: _Round) -> None:
    known = ctx.gpus.get(host.id or 0, {})
    seen = set()
    for reading in report.gpus:
        gpu = known.get(reading.index)
        if gpu is None:  # a card seen for the first time
            gpu = Gpu(host_id=host.id or 0, index=reading.index, gpu_type="", memory_gib=0)
            _read_into(gpu, reading, ctx)
            session.add(gpu)
            session.flush()
        else:
            _read_into(gpu, reading, ctx)
        seen.add(reading.index)
        if ctx.sample:
            ctx.samples.append(
                {
                    "gpu_id": gpu.id,
                    "at": ctx.now,
                    "utilization_pct": reading.utilization_pct,
                    "memory_used_gib": reading.memory_used_gib,
                    "job_id": ctx.holders.get(gpu.id or 0),
                }
            )
    for index, gpu in known.items():
        if index not in seen and gpu.healthy:  # the agent no longer reports it (fell off the bus)
            gpu.healthy = False


def _read_into(gpu: Gpu, reading: GpuReading, ctx: _Round) -> None:
    # Memory on a card that no running paika job holds belongs to someone else: the card is
    # busy. (A run the database no longer has but the host still does counts as foreign too.)
    foreign = reading.holder is None or reading.holder not in ctx.ours
    values = {
        "uuid": reading.uuid,
        "name": reading.name,
        "gpu_type": ctx.policy.type_for_card(reading.name, reading.memory_total_gib)
        or reading.name,
        "memory_gib": round(reading.memory_total_gib, 2),
        "healthy": True,
        "utilization_pct": reading.utilization_pct,
        "memory_used_gib": reading.memory_used_gib,
        "foreign_memory_gib": round(sum(reading.processes.values()), 3) if foreign else 0.0,
    }
    for field, value in values.items():  # only what changed, so unchanged cards cost no UPDATE
        if getattr(gpu, field) != value:
            setattr(gpu, field, value)
    if ctx.sample:
        gpu.last_seen_at = ctx.now


def prune_samples(session: Session, policy: PolicyConfig, now: datetime) -> int:
    """Forget samples older than the retention window; returns how many went."""
    cutoff = now - timedelta(hours=policy.scheduler.hosts.sample_retention_hours)
    return cluster_queries.delete_samples_before(session=session, cutoff=cutoff)
