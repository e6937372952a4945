"""Polling every agent at once: one slow or dead host never delays the others.

One request per host per round (`/v1/status`: health, GPUs and jobs), each bounded by the
poll timeout, all concurrent. The Poller keeps an event loop in a thread of its own and one
keep-alive client per agent, so a round costs requests, not connections and clients.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.agent.client import AsyncAgentClient, shared_tls
from scheduler.agent.errors import AgentAuthError, AgentError, AgentNotTrusted
from scheduler.agent.protocol import GpuInfo, JobInfo, Status
from scheduler.agent.transport import LeanTransport
from scheduler.hosts.report import AgentJobState, GpuReading, HostReport

MIB_PER_GIB = 1024.0


@dataclass(frozen=True, slots=True)
class Target:
    """A host to poll: its name, its agent's base URL and the token to present there (None:
    the poller's shared one), or why it must not be polled (`problem`: no usable token)."""

    name: str
    url: str
    token: str | None = None
    problem: str | None = None
    # The paika runs the database holds there: a batch system's poll looks up one it no
    # longer lists (an agent reports all of its own; it is not told).
    runs: tuple[str, ...] = ()


class Poller:
    """Polls agents concurrently from synchronous code (the cycle runs in a worker thread)."""

    def __init__(self, token: str, *, timeout: float, tls: ssl.SSLContext | None = None) -> None:
        """`token`: for targets that bring none; `tls`: whom https:// agents must prove they
        are (default: the system's CAs), host names checked."""
        self.token, self.timeout = token, timeout
        self.tls = tls or shared_tls()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="paika-poller", daemon=True
        )
        self._thread.start()
        self._clients: dict[tuple[str, str], AsyncAgentClient] = {}

    def __call__(self, targets: Sequence[Target]) -> Mapping[str, HostReport]:
        """One round: every target's report, keyed by host name."""
        return asyncio.run_coroutine_threadsafe(self._round(targets), self._loop).result()

    def close(self) -> None:
        """Close every connection and stop the loop."""
        asyncio.run_coroutine_threadsafe(self._close_clients(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    async def _round(self, targets: Sequence[Target]) -> dict[str, HostReport]:
        results = await asyncio.gather(*(self._poll(target) for target in targets))
        return {report.host: report for report in results}

    async def _poll(self, target: Target) -> HostReport:
        began = time.perf_counter()
        if target.problem is not None:
            return HostReport(target.name, False, error=target.problem, untrusted=True)
        token = target.token or self.token
        client = self._clients.get((target.url, token))
        if client is None:
            # By URL and token: after a rotation the old token's client goes, with its sockets.
            for stale in [key for key in self._clients if key[0] == target.url]:
                await self._clients.pop(stale).aclose()
            client = self._clients[(target.url, token)] = AsyncAgentClient(
                target.url,
                token,
                timeout=self.timeout,
                transport=LeanTransport(ssl_context=self.tls),
            )
        try:
            status = await asyncio.wait_for(client.status(), timeout=self.timeout)
        except (AgentError, TimeoutError) as exc:
            return HostReport(
                target.name,
                False,
                error=str(exc) or type(exc).__name__,
                latency_s=time.perf_counter() - began,
                untrusted=isinstance(exc, AgentNotTrusted | AgentAuthError),
            )
        return report_of(target.name, status, time.perf_counter() - began)

    async def _close_clients(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


def poll_all_sync(
    targets: Sequence[Target], token: str, *, timeout: float
) -> Mapping[str, HostReport]:
    """One round with a throwaway Poller (tests, one-off tools)."""
    poller = Poller(token, timeout=timeout)
    try:
        return poller(targets)
    finally:
        poller.close()


def report_of(host: str, status: Status, latency_s: float) -> HostReport:
    """An agent's status as the scheduler's plain report."""
    return HostReport(
        host,
        True,
        gpus=tuple(_reading(gpu) for gpu in status.gpus),
        jobs={job.job_id: _job(job) for job in status.jobs},
        agent_version=status.health.agent_version,
        latency_s=latency_s,
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
    # How long it ran, by the agent's own clock: free of any skew between the two hosts.
    ran = (job.ended_at - job.started_at).total_seconds() if job.ended_at else None
    # A run the agent never launched (its stop came first) has no process and no command.
    launched = job.pid is not None or bool(job.command)
    return AgentJobState(
        job.job_id,
        str(job.state),
        job.exit_code,
        (job.pid,) if job.pid else (),
        ran,
        launched,
        job.report_lines,
        job.report_first,
    )
