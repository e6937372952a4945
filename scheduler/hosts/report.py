"""What one poll of one host's agent said, as plain data (independent of the wire format)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU as the agent read it."""

    index: int
    uuid: str | None
    name: str
    memory_total_gib: float
    memory_used_gib: float
    utilization_pct: float | None
    # Memory per process id on this GPU.
    processes: dict[int, float] = field(default_factory=dict)
    holder: str | None = None  # the agent job running on it, if any
    # The catalog type, when the executor knows it (a Slurm GRES type mapped in the policy);
    # None: worked out from `name` and the memory, as NVML names the card.
    gpu_type: str | None = None
    # Held whole by work paika did not start (another Slurm job): the card is busy.
    taken: bool = False


@dataclass(frozen=True, slots=True)
class CardSample:
    """What one run did to one of its cards, as its agent sampled it at this poll. Memory is
    the run's own processes' (MiB; its peak since the agent began watching it); `sm_pct` the
    run's own SM busy % where the card tells processes apart, else the card's; the memory
    controller's busy %, PCIe MB/s and DRAM bandwidth % are the card's. None: not read."""

    run: str  # the agent's id of the run (scheduler.dispatch.agent_job_id)
    gpu: int
    memory_mib: int | None = None
    memory_peak_mib: int | None = None
    sm_pct: float | None = None
    memory_busy_pct: float | None = None
    pcie_mbps: float | None = None
    dram_bw_pct: float | None = None
    sm_own: bool = False  # `sm_pct` is the run's own (the card tells processes apart)


# `AgentJobState.ended_by` of a run its executor (Slurm) held pending past the pool's limit
# and ended for that, before it ever ran.
PENDING_TOO_LONG = "pending"


@dataclass(frozen=True, slots=True)
class AgentJobState:
    """A job as the agent knows it."""

    job_id: str
    state: str  # running | exited | killed | lost (gone, not for anything the run did)
    exit_code: int | None = None
    pids: tuple[int, ...] = ()
    ran_seconds: float | None = None  # for an ended run: from its start to its end, on the host
    launched: bool = True  # False: stopped before its start arrived (the agent's tombstone)
    # The lines the run wrote to its report file that the agent keeps; the first is line
    # number `report_first` (from 1) of the run's file.
    report_lines: tuple[str, ...] = ()
    report_first: int = 1
    # Why the executor ended a killed run, as its own state in lower case (a Slurm
    # "timeout", "node_fail" …); None: killed on its host (the agent's word).
    ended_by: str | None = None
    # `ran_seconds` is the executor's own accounting of the run (Slurm's start to end, as
    # slurmdbd keeps it): the ledger charges that, even for a run paika watched throughout.
    accounted: bool = False
    # A run its executor (Slurm) held pending past the pool's limit, and ended for that:
    # the limit, and why it was held, in the executor's own words ("Resources", …).
    pending_past_s: float | None = None
    pending_reason: str | None = None
    # Why its host's agent stopped it on its own ("over_memory": a run on a shared card past
    # the memory it declared while the card ran short), and the memory it used then (MiB).
    stopped_for: str | None = None
    used_memory_mib: int | None = None


# How `HostReport.unhealthy` of an agent whose disk is low begins: `disk_low: <free> MiB free
# for <path>, reserve <reserve> MiB` (the bot says it in the reader's language).
DISK_LOW = "disk_low"
_DISK_LOW_RE = re.compile(rf"{DISK_LOW}: (\d+) MiB free for (.*), reserve (\d+) MiB")


def disk_low_values(reason: str) -> dict[str, str | int] | None:
    """The numbers of a `disk_low` reason (free_mib, path, reserve_mib); None for another."""
    found = _DISK_LOW_RE.fullmatch(reason)
    if found is None:
        return None
    return {"free_mib": int(found[1]), "path": found[2], "reserve_mib": int(found[3])}


@dataclass(frozen=True, slots=True)
class HostReport:
    """The result of polling one host: its GPUs and jobs, or why it did not answer."""

    host: str
    ok: bool
    error: str | None = None
    gpus: tuple[GpuReading, ...] = ()
    jobs: dict[str, AgentJobState] = field(default_factory=dict)
    agent_version: str | None = None
    latency_s: float = 0.0
    # The poll failed on trust: a certificate that does not verify, a token refused or revoked.
    untrusted: bool = False
    # It answers but takes no new job, and why (a Slurm node drained, down or not
    # responding): its GPUs are unhealthy for paika, its runs are still reconciled.
    unhealthy: str | None = None
    # A failed poll here says nothing of its runs (a Slurm controller away while the nodes
    # run on): they are waited for however long it takes, never given up.
    patient: bool = False
    # The agent had more changes than one round reads (a long backlog after a restart): a
    # run missing from `jobs` may still be on the host; nothing is concluded from its absence.
    partial: bool = False
    # What each running run did to each of its cards at this poll (agents before samples,
    # and other executors: none).
    samples: tuple[CardSample, ...] = ()
