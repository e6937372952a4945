"""Polling every agent at once: one slow or dead host never delays the others."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from scheduler.agent.client import AsyncAgentClient
from scheduler.agent.errors import AgentError
from scheduler.agent.protocol import GpuInfo, JobInfo
from scheduler.errors import PaikaError
from scheduler.hosts.report import AgentJobState, GpuReading, HostReport

MIB_PER_GIB = 1024.0


@dataclass(frozen=True, slots=True)
class Target:
    """A host to poll: its name and its agent's base URL."""

    name: str
    url: str


async def poll_all(
    targets: Sequence[Target],
    token: str,
    *,
    timeout: float,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, HostReport]:
    """Poll every target concurrently, each bounded by `timeout` seconds."""
    results = await asyncio.gather(
        *(_poll(target, token, timeout, transport) for target in targets)
    )
    return {report.host: report for report in results}


def poll_all_sync(
    targets: Sequence[Target], token: str, *, timeout: float
) -> dict[str, HostReport]:
    """`poll_all` from synchronous code (the scheduler's cycle runs in a worker thread)."""
    return asyncio.run(poll_all(targets, token, timeout=timeout))


async def _poll(
    target: Target, token: str, timeout: float, transport: httpx.AsyncBaseTransport | None
) -> HostReport:
    began = time.perf_counter()
    client = AsyncAgentClient(target.url, token, transport=transport, timeout=timeout)
    try:
        gpus, jobs, health = await asyncio.wait_for(
            asyncio.gather(client.gpus(), client.jobs(), client.health()), timeout=timeout
        )
    except (PaikaError, AgentError, TimeoutError) as exc:
        return HostReport(
            target.name,
            False,
            error=str(exc) or type(exc).__name__,
            latency_s=time.perf_counter() - began,
        )
    finally:
        await client.aclose()
    return HostReport(
        target.name,
        True,
        gpus=tuple(_reading(gpu) for gpu in gpus),
        jobs={job.job_id: _job(job) for job in jobs},
        agent_version=health.agent_version,
        latency_s=time.perf_counter() - began,
    )


def _reading(gpu: GpuInfo) -> GpuReading:
    return GpuReading(
        index=gpu.index,
        uuid=gpu.uuid,
        name=gpu.name,
        memory_total_gib=(gpu.memory_total_mib or 0) / MIB_PER_GIB,
        memory_used_gib=(gpu.memory_used_mib or 0) / MIB_PER_GIB,
        utilization_pct=None if gpu.utilization_pct is None else float(gpu.utilization_pct),
        processes={p.pid: (p.used_memory_mib or 0) / MIB_PER_GIB for p in gpu.processes},
        holder=gpu.job_id,
    )


def _job(job: JobInfo) -> AgentJobState:
    return AgentJobState(job.job_id, str(job.state), job.exit_code, (job.pid,) if job.pid else ())
