"""Applying poll reports to the database: host health, GPUs, utilization samples."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from sqlmodel import Session

from scheduler.config import PolicyConfig
from scheduler.dispatch import agent_job_id
from scheduler.hosts.report import GpuReading, HostReport
from scheduler.notify import Event, EventKind
from storage.models import Gpu, GpuSample, Host, HostState, JobState
from storage.queries import cluster as cluster_queries
from storage.queries import jobs as job_queries


def apply_reports(
    session: Session, policy: PolicyConfig, reports: Mapping[str, HostReport], now: datetime
) -> list[Event]:
    """Update every registered host from its report; events for hosts that went down or came back."""
    events: list[Event] = []
    holders = {a.gpu_id: a.job_id for a in cluster_queries.open_allocations(session=session)}
    for host in cluster_queries.all_hosts(session=session):
        report = reports.get(host.name)
        if report is None:
            continue
        if report.ok:
            events += _answered(session, policy, host, report, now, holders)
        else:
            events += _failed(session, policy, host, report, now)
    return events


def _answered(
    session: Session,
    policy: PolicyConfig,
    host: Host,
    report: HostReport,
    now: datetime,
    holders: dict[int, int],
) -> list[Event]:
    events = []
    if host.state == HostState.DOWN:
        events.append(Event(EventKind.HOST_UP, now, f"host {host.name} is back", host=host.name))
    if host.state != HostState.UP:
        host.state_since = now
    host.state, host.failed_polls, host.last_seen_at = HostState.UP, 0, now
    host.agent_version = report.agent_version
    session.add(host)
    _update_gpus(session, policy, host, report, now, holders)
    return events


def _failed(
    session: Session, policy: PolicyConfig, host: Host, report: HostReport, now: datetime
) -> list[Event]:
    host.failed_polls += 1
    limit = policy.scheduler.hosts.down_after_failed_polls
    state = HostState.DOWN if host.failed_polls >= limit else HostState.DEGRADED
    events = []
    if state == HostState.DOWN and host.state != HostState.DOWN:
        events.append(
            Event(
                EventKind.HOST_DOWN,
                now,
                f"host {host.name} is down: {report.error}",
                host=host.name,
            )
        )
    if state != host.state:
        host.state, host.state_since = state, now
    session.add(host)
    return events


def _update_gpus(
    session: Session,
    policy: PolicyConfig,
    host: Host,
    report: HostReport,
    now: datetime,
    holders: dict[int, int],
) -> None:
    known = {
        gpu.index: gpu
        for gpu in cluster_queries.gpus_of_host(session=session, host_id=host.id or 0)
    }
    ours = running_runs(session)
    seen = set()
    for reading in report.gpus:
        gpu = known.get(reading.index) or Gpu(
            host_id=host.id or 0, index=reading.index, gpu_type="", memory_gib=0
        )
        _read_into(gpu, reading, policy, ours, now)
        session.add(gpu)
        session.flush()
        seen.add(reading.index)
        session.add(
            GpuSample(
                gpu_id=gpu.id or 0,
                at=now,
                utilization_pct=reading.utilization_pct,
                memory_used_gib=reading.memory_used_gib,
                job_id=holders.get(gpu.id or 0),
            )
        )
    for index, gpu in known.items():
        if index not in seen and gpu.healthy:  # the agent no longer reports it (fell off the bus)
            gpu.healthy = False
            session.add(gpu)


def running_runs(session: Session) -> set[str]:
    """The agent job ids of the runs the database has going."""
    running = job_queries.jobs_in_states(session=session, states=(JobState.RUNNING,))
    return {agent_job_id(job.id or 0, job.attempts) for job in running}


def _read_into(
    gpu: Gpu, reading: GpuReading, policy: PolicyConfig, ours: set[str], now: datetime
) -> None:
    gpu.uuid, gpu.name = reading.uuid, reading.name
    gpu.gpu_type = policy.type_for_card(reading.name, reading.memory_total_gib) or reading.name
    gpu.memory_gib = round(reading.memory_total_gib, 2)
    gpu.healthy = True
    gpu.utilization_pct = reading.utilization_pct
    gpu.memory_used_gib = reading.memory_used_gib
    # Memory on a card that no running paika job holds belongs to someone else: the card is
    # busy. (A job the database no longer runs but the host still does counts as foreign too.)
    foreign = reading.holder is None or reading.holder not in ours
    gpu.foreign_memory_gib = round(sum(reading.processes.values()), 3) if foreign else 0.0
    gpu.last_seen_at = now


def prune_samples(session: Session, policy: PolicyConfig, now: datetime) -> int:
    """Forget samples older than the retention window; returns how many went."""
    cutoff = now - timedelta(hours=policy.scheduler.hosts.sample_retention_hours)
    return cluster_queries.delete_samples_before(session=session, cutoff=cutoff)
