"""What each running job does to its cards: the per-job samples of a status answer.

A card tells its processes apart (NVML lists each with its memory, and where the card keeps
per-process samples, its SM busy %); the agent tells its jobs apart by their processes. A
process is a job's when it is the job's wrapper, shares its process group or session (the
wrapper starts a session of its own, so its pid names both), or lives in the job's cgroup or
one below it (what left the session, where the host has cgroups). A container job's
processes are the runtime's, in neither: on a card only that job holds, the card's processes
that no job owns are taken as its.

The memory-controller busy %, PCIe traffic and DRAM bandwidth are the card's: no card counts
them per process, so a job that shares its card is charged its card's figures. The peak
memory is the most seen since the agent began watching the run (an agent restarted during a
run starts over); the scheduler keeps the peak of its own across polls.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scheduler.agent.isolation import cgroup2_mount
from scheduler.agent.protocol import GpuInfo, GpuProcess, JobSample

PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class JobProcesses:
    """How to find one running job's processes: its wrapper's pid (its process group and
    session), its cgroup (None: none), and whether a container runtime runs it."""

    job_id: str
    pid: int
    gpus: tuple[int, ...]
    cgroup: str | None = None
    container: bool = False


def _session_and_group(pid: int, proc: Path) -> tuple[int, int] | None:
    """Fields 5 and 6 of /proc/<pid>/stat (process group, session); None when gone."""
    try:
        raw = (proc / str(pid) / "stat").read_bytes().decode(errors="replace")
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()  # the name (field 2) may hold ') '
    try:
        return int(fields[2]), int(fields[3])
    except (IndexError, ValueError):
        return None


def _cgroup_of(pid: int, proc: Path) -> str | None:
    """The process's cgroup v2 path (the `0::` line of /proc/<pid>/cgroup)."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text(errors="replace").splitlines()
    except OSError:
        return None
    return next((line[3:] for line in lines if line.startswith("0::/")), None)


@functools.lru_cache(maxsize=4)
def _cgroup_mount(proc: Path) -> Path | None:
    """Where cgroup2 is mounted (read once: a host does not move it under a running agent)."""
    try:
        return cgroup2_mount((proc / "self" / "mountinfo").read_text(errors="replace"))
    except OSError:
        return None


def _in_cgroup(path: str, job_cgroup: str, mount: Path) -> bool:
    """Whether the cgroup `path` (as /proc names it, under the cgroup2 `mount`) is the job's
    directory or one below it."""
    where, job = mount / path.lstrip("/"), Path(job_cgroup)
    return where == job or job in where.parents


def owner_of(pid: int, jobs: Sequence[JobProcesses], proc: Path = PROC) -> str | None:
    """The id of the job whose process `pid` is, or None (not a paika job's, or gone)."""
    for job in jobs:
        if pid == job.pid:
            return job.job_id
    ids = _session_and_group(pid, proc)
    if ids is not None:
        for job in jobs:
            if job.pid in ids:
                return job.job_id
    mount = _cgroup_mount(proc) if any(job.cgroup for job in jobs) else None
    path = _cgroup_of(pid, proc) if mount is not None else None
    if mount is not None and path is not None:
        for job in jobs:
            if job.cgroup and _in_cgroup(path, job.cgroup, mount):
                return job.job_id
    return None


def _sm(card: GpuInfo, own: Sequence[GpuProcess]) -> tuple[int | None, bool]:
    """The job's SM busy % on the card, and whether it is the job's own (else the card's)."""
    if any(p.sm_pct is not None for p in card.processes):
        return min(100, sum(p.sm_pct or 0 for p in own)), True
    return card.utilization_pct, False


def _memory(own: Sequence[GpuProcess]) -> int | None:
    """The job's memory on the card: 0 with no process there yet, None where NVML cannot say."""
    known = [p.used_memory_mib for p in own if p.used_memory_mib is not None]
    return sum(known) if known or not own else None


class Sampler:
    """Samples each running job on each of its cards, keeping each run's peak memory."""

    def __init__(self, proc: Path = PROC) -> None:
        self._proc = proc
        self._peaks: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    def samples(self, gpus: Sequence[GpuInfo], jobs: Sequence[JobProcesses]) -> list[JobSample]:
        """One sample per running job and card it holds (a card the reader does not list has
        none), in the order of `jobs` and their cards."""
        cards = {card.index: card for card in gpus}
        owners = self._owners((p.pid for card in gpus for p in card.processes), jobs)
        holders: dict[int, list[JobProcesses]] = {}
        for job in jobs:
            for index in job.gpus:
                holders.setdefault(index, []).append(job)
        with self._lock:
            taken = [
                self._sample(job, cards[index], owners, holders[index])
                for job in jobs
                for index in job.gpus
                if index in cards
            ]
            running = {job.job_id for job in jobs}
            for key in [key for key in self._peaks if key[0] not in running]:
                del self._peaks[key]
        return taken

    def _owners(self, pids: Iterable[int], jobs: Sequence[JobProcesses]) -> dict[int, str]:
        found = {pid: owner_of(pid, jobs, self._proc) for pid in set(pids)}
        return {pid: job for pid, job in found.items() if job is not None}

    def _sample(
        self,
        job: JobProcesses,
        card: GpuInfo,
        owners: Mapping[int, str],
        holders: Sequence[JobProcesses],
    ) -> JobSample:
        alone = job.container and len(holders) == 1
        own = [
            p
            for p in card.processes
            if owners.get(p.pid) == job.job_id or (alone and p.pid not in owners)
        ]
        memory = _memory(own)
        key = (job.job_id, card.index)
        if memory is not None:
            self._peaks[key] = max(memory, self._peaks.get(key, 0))
        sm, sm_own = _sm(card, own)
        return JobSample(
            job_id=job.job_id,
            gpu=card.index,
            memory_mib=memory,
            memory_peak_mib=self._peaks.get(key),
            sm_pct=sm,
            sm_own=sm_own,
            memory_busy_pct=card.memory_busy_pct,
            pcie_mbps=card.pcie_mbps,
            dram_bw_pct=card.dram_bw_pct,
        )
