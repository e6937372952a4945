"""Polling every agent at once: one slow or dead host never delays the others.

One request per host per round (`/v1/status`: health, GPUs and jobs), each bounded by the
poll timeout, all concurrent. The Poller keeps an event loop in a thread of its own and one
keep-alive client per agent, so a round costs requests, not connections and clients.

Changes only. The Poller asks each agent for what changed since its last answer (`since`,
the cursor that answer gave): the running jobs and the ended ones that changed. It keeps the
ended runs it was told of (`_View`) until they are acknowledged, so each round's report still
holds every run the agent keeps that the database may have going: reconcile reads "not in the
report" as "the agent lost it", as before. A long backlog (a first poll after a restart) comes
in pages, up to MAX_PAGES a round; a report that could not take all of them is `partial`, and
reconcile concludes nothing from a run missing from it. Acknowledgements (`acknowledge`: runs
whose end the database has recorded, committed) go to the agent before the host's next poll;
only then may the agent forget them, and the Poller drops them. Both live in memory only: a
restarted scheduler asks from the start again (`since=0`), and the agent, which forgets only
what was acknowledged, sends every run it keeps.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from scheduler.agent.client import AsyncAgentClient, shared_tls
from scheduler.agent.errors import AgentAuthError, AgentError, AgentNotTrusted
from scheduler.agent.protocol import MAX_ACK, DiskState, GpuInfo, JobInfo, JobSample, Status
from scheduler.agent.transport import LeanTransport
from scheduler.hosts.report import DISK_LOW, AgentJobState, CardSample, GpuReading, HostReport

MIB_PER_GIB = 1024.0
MAX_PAGES = 8  # pages of an agent's backlog read in one round (each at most ~4 MiB)
MIB = 1024 * 1024


@dataclass
class _View:
    """What the Poller keeps of one agent between rounds: the cursor of its last answer, the
    ended runs it reported that are not acknowledged yet, and acknowledgements to send."""

    cursor: str | None = None
    ended: dict[str, AgentJobState] = field(default_factory=dict)
    unsent_acks: set[str] = field(default_factory=set)


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
        self._views: dict[str, _View] = {}  # by host name (touched on the loop's thread only)

    def __call__(self, targets: Sequence[Target]) -> Mapping[str, HostReport]:
        """One round: every target's report, keyed by host name."""
        return asyncio.run_coroutine_threadsafe(self._round(targets), self._loop).result()

    def acknowledge(self, acks: Mapping[str, Sequence[str]]) -> None:
        """Runs (by host) whose end the database has recorded: told to their agents before
        each host's next poll; the agents may then forget them."""
        if any(acks.values()):
            asyncio.run_coroutine_threadsafe(self._note_acks(acks), self._loop).result()

    async def _note_acks(self, acks: Mapping[str, Sequence[str]]) -> None:
        for host, runs in acks.items():
            view = self._views.get(host)
            if view is not None and view.cursor is not None:  # agents without cursors: none
                view.unsent_acks.update(runs)

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
        view = self._views.setdefault(target.name, _View())
        try:
            return await asyncio.wait_for(self._read(target, client, view, began), self.timeout)
        except (AgentError, TimeoutError) as exc:
            return HostReport(
                target.name,
                False,
                error=str(exc) or type(exc).__name__,
                latency_s=time.perf_counter() - began,
                untrusted=isinstance(exc, AgentNotTrusted | AgentAuthError),
            )

    async def _read(
        self, target: Target, client: AsyncAgentClient, view: _View, began: float
    ) -> HostReport:
        """Send the host's acknowledgements, then read what changed (page by page)."""
        if view.unsent_acks:
            runs = sorted(view.unsent_acks)
            for first in range(0, len(runs), MAX_ACK):
                await client.ack(runs[first : first + MAX_ACK])
            view.unsent_acks.difference_update(runs)
            for run in runs:
                view.ended.pop(run, None)
        status = await client.status(since=view.cursor or "0")
        if status.cursor is None:  # an agent before cursors: its answer holds every job
            self._views.pop(target.name, None)
            return report_of(target.name, status, time.perf_counter() - began)
        if _epoch(status.cursor) != _epoch(view.cursor):  # a new table: it sent all it has
            view.ended.clear()
        running: list[JobInfo] = []
        pages = 1
        while True:
            running = [job for job in status.jobs if job.running]
            for job in status.jobs:
                if not job.running:
                    view.ended[job.job_id] = _job(job)
            view.cursor = status.cursor
            if not status.more or pages >= MAX_PAGES:
                break
            status = await client.status(since=view.cursor)
            pages += 1
        report = report_of(target.name, status, time.perf_counter() - began)
        jobs = {**view.ended, **{job.job_id: _job(job) for job in running}}
        return replace(report, jobs=jobs, partial=status.more)

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
    """An agent's status as the scheduler's plain report. A host whose disk is low answers
    but takes no new job (unhealthy, with why) until it has room again."""
    return HostReport(
        host,
        True,
        gpus=tuple(_reading(gpu) for gpu in status.gpus),
        jobs={job.job_id: _job(job) for job in status.jobs},
        agent_version=status.health.agent_version,
        latency_s=latency_s,
        unhealthy=disk_low_reason(status.disk),
        samples=tuple(_card_sample(sample) for sample in status.samples),
    )


def disk_low_reason(disk: DiskState | None) -> str | None:
    """Why a host with this disk must take no new job (None: it may). The words are the
    code `disk_low` and its numbers, which the bot says in the reader's language."""
    if disk is None or not disk.low:
        return None
    return (
        f"{DISK_LOW}: {disk.free_bytes // MIB} MiB free for {disk.path}, "
        f"reserve {disk.reserve_bytes // MIB} MiB"
    )


def _epoch(cursor: str | None) -> str | None:
    return None if cursor is None else cursor.rpartition("-")[0]


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


def _card_sample(sample: JobSample) -> CardSample:
    def number(value: int | float | None) -> float | None:
        return None if value is None else float(value)

    return CardSample(
        run=sample.job_id,
        gpu=sample.gpu,
        memory_mib=sample.memory_mib,
        memory_peak_mib=sample.memory_peak_mib,
        sm_pct=number(sample.sm_pct),
        memory_busy_pct=number(sample.memory_busy_pct),
        pcie_mbps=sample.pcie_mbps,
        dram_bw_pct=sample.dram_bw_pct,
        sm_own=sample.sm_own,
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
        stopped_for=job.stopped_for,
        used_memory_mib=job.used_memory_mib,
    )
