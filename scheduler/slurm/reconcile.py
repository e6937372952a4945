"""A Slurm pool's nodes and paika's runs on them, read once per cycle (one `sinfo --json`,
one `squeue --json`) into the same host reports an agent's poll gives: the cycle then
applies and reconciles them exactly as it does an agent's (scheduler/hosts/).

- Each node of the pool is a host; its GPUs are its GRES, numbered as Slurm numbers them
  (the order of the node's `Gres=`, as its gres.conf lists the devices; the numbers a job
  finds in CUDA_VISIBLE_DEVICES). A card held by a paika run names that run; one held by
  any other Slurm job is taken.
- A card may be shared through the site's sharing GRES (`shard`, `mps`: a pool's `shares`):
  they are parts of the node's cards, never cards of their own ("shard:a100:16" in `Gres=`
  adds no card), and the card a share is on is the index Slurm gives it ("shard:a100:3(IDX:0)":
  shards of card 0, as gres.conf lists one sharing line per card in the cards' order). A card
  paika runs share names one of them (the first); one whose shares any other Slurm job holds
  is taken, as a card held whole is.
- A node Slurm drains, or finds down or not responding, or one in an active reservation
  (paika submits into none), is unhealthy: it takes no new job, its runs are still
  reconciled, and the reason is kept on the host.
- A paika run is a Slurm job named `<prefix><job>.<attempt>.<node>` (the dispatcher names
  it so): one still on its node, or PENDING, is running (it keeps the cards paika booked
  for it); one Slurm ended is exited (with its batch
  shell's exit code) or killed (with Slurm's state: a time limit …); one its node's failure
  or Slurm's own preemption ended is lost (queued again, as an agent's lost run); one
  squeue no longer lists is looked up in slurmdbd (sacct), and is lost only if it is not
  there either.
- A run Slurm still holds PENDING `pending_timeout_seconds` after its submission (another
  Slurm job took its cards between paika's read and its sbatch, a reservation began) is
  cancelled (scancel, only while it is still PENDING); once Slurm shows it ended that way
  it is lost, never having run (queued again, nothing charged). Nothing is concluded
  before Slurm shows the end: a cancel that fails is sent again next cycle.
- The ledger charges a run Slurm ended for Slurm's own start to end (squeue's times, the
  ones slurmctld sends slurmdbd: `sacct` shows the same elapsed time), not paika's clock.
- Utilization: Slurm reports none for GPUs, so none is given here; a pool with
  `utilization: agents` has it laid over these reports from the report-only agents on its
  nodes (scheduler/slurm/utilization.py, by scheduler/pools.py).
- When slurmctld does not answer (or answers nonsense), nothing is concluded: every host
  of the pool is reported silent but `patient` (its runs are neither failed nor started
  again, however long it lasts) and, after the policy's failed polls, down (the admins'
  host-down alert).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduler.config import PolicyConfig, SlurmPool
from scheduler.dispatch import agent_job_id
from scheduler.hosts.poll import Target
from scheduler.hosts.report import PENDING_TOO_LONG, AgentJobState, GpuReading, HostReport
from scheduler.slurm.commands import SlurmCommands
from scheduler.slurm.errors import SlurmError, SlurmProblem
from scheduler.slurm.models import EndedRun, Node, QueuedJob

log = logging.getLogger(__name__)

# Node states and flags (sinfo) in which a node must get no new paika job. RESERVED: an
# active reservation holds it (a MAINTENANCE one too), and paika submits into none: a run
# sent there would only pend.
UNHEALTHY_STATES = frozenset(
    {"down", "drained", "draining", "fail", "failing", "unknown", "reserved"}
)
UNHEALTHY_FLAGS = frozenset({"DRAIN", "DOWN", "NOT_RESPONDING", "FAIL", "MAINTENANCE", "RESERVED"})

# The Slurm endings the faces have their own words for (any other is told by its state).
ENDINGS_TOLD = ("timeout", "cancelled", "out_of_memory")
# Endings that are no fault of the run: lost (queued again as a new attempt), not failed.
LOST_ENDINGS = frozenset({"NODE_FAIL", "PREEMPTED", "BOOT_FAIL"})
_FORGET_CANCELS_AFTER_S = 24 * 3600

_GRES = re.compile(r"^(?P<name>[^:(]+)(?::(?P<type>[^:(]+))?:(?P<count>\d+)")
# The GRES that are parts of a node's cards (Slurm's GPU sharing), not cards of their own.
SHARING_GRES = frozenset({"shard", "mps"})
_IDX = re.compile(r"IDX:(?P<idx>[0-9,\-]+)")


@dataclass(frozen=True)
class Card:
    """One GRES device of a node: its number there and its Slurm GPU type."""

    index: int
    slurm_type: str


def node_cards(gres: str) -> tuple[Card, ...]:
    """A node's GPUs from its `gres` string ("gpu:a100:2,gpu:t4:2(S:0)"), numbered from 0
    in the order it lists them."""
    cards: list[Card] = []
    for part in _split_gres(gres):
        found = _GRES.match(part)
        if found is None or found["name"] != "gpu":
            continue
        kind = found["type"] or "gpu"
        cards += [Card(len(cards) + i, kind) for i in range(int(found["count"]))]
    return tuple(cards)


def used_indices(gres: str) -> frozenset[int]:
    """The GPU numbers a `gres_used` or `gres_detail` string says are held whole."""
    return _indices(gres, frozenset({"gpu"}))


def shared_indices(gres: str) -> frozenset[int]:
    """The GPU numbers a `gres_used` or `gres_detail` string says have shares held
    ("shard:a100:2(IDX:0-1)": shards of cards 0 and 1; "mps:t4:30(IDX:2)")."""
    return _indices(gres, SHARING_GRES)


def _indices(gres: str, names: frozenset[str]) -> frozenset[int]:
    held: set[int] = set()
    for part in _split_gres(gres):
        found = _GRES.match(part)
        if found is None or found["name"] not in names:
            continue
        idx = _IDX.search(part)
        if idx is not None:
            held |= set(_numbers(idx["idx"]))
    return frozenset(held)


def _split_gres(gres: str) -> list[str]:
    """Split at the commas between entries, not those inside an entry's "(IDX:0,2)"."""
    parts, depth, current = [], 0, ""
    for char in gres:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [p.strip() for p in [*parts, current] if p.strip()]


def _numbers(ranges: str) -> Iterable[int]:
    for part in ranges.split(","):
        first, _, last = part.partition("-")
        if first.isdigit():
            yield from range(int(first), int(last if last.isdigit() else first) + 1)


def unhealthy_reason(node: Node) -> str | None:
    """Why paika must start nothing on this node (None: it may)."""
    state = node.state.lower()
    flags = sorted(set(node.state_flags) & UNHEALTHY_FLAGS)
    if state not in UNHEALTHY_STATES and not flags:
        return None
    said = "+".join([state.upper(), *flags])
    reserved = "RESERVED" in flags or state == "reserved"
    reason = node.reason or ("in an active Slurm reservation" if reserved else "")
    return f"Slurm node {said}: {reason}" if reason else f"Slurm node {said}"


def run_of(job: QueuedJob, prefix: str) -> tuple[str, str] | None:
    """(paika run id, node) of a Slurm job paika submitted with this name prefix."""
    return run_of_name(job.name, prefix)


def run_of_name(name: str, prefix: str) -> tuple[str, str] | None:
    """(paika run id, node) of a Slurm job name paika gave, with this prefix."""
    if not name.startswith(prefix):
        return None
    found = re.fullmatch(r"(\d+)\.(\d+)\.(.+)", name[len(prefix) :])
    if found is None:
        return None
    return agent_job_id(int(found[1]), int(found[2])), found[3]


def run_state(
    run: str, job: QueuedJob, *, limit_s: float | None = None, cancelled: bool = False
) -> AgentJobState:
    """A paika run as Slurm shows it, in the words an agent would use. `limit_s`: how long
    the pool lets Slurm hold a run PENDING; `cancelled`: paika cancelled it for that."""
    if not job.ended:
        return AgentJobState(run, "running")  # PENDING too: its cards stay booked
    if _pended_too_long(job.job_state, job.never_ran, job.pending_seconds, limit_s, cancelled):
        reason = job.state_reason if job.state_reason not in ("", "None") else None
        return _pending_lost(run, limit_s, reason)
    ran = (
        float(job.end_time - job.start_time)
        if job.start_time and job.end_time and job.end_time >= job.start_time
        else None
    )
    return _ended(run, job.job_state, job.exit_status, ran)


def recorded_state(
    run: str, record: EndedRun, *, limit_s: float | None = None, cancelled: bool = False
) -> AgentJobState:
    """A run squeue no longer lists, as slurmdbd recorded it (still on, if its end has not
    reached slurmdbd yet). slurmdbd keeps no pending reason."""
    if not record.ended:
        return AgentJobState(run, "running")
    if _pended_too_long(record.state, record.never_ran, record.pending_seconds, limit_s, cancelled):
        return _pending_lost(run, limit_s, None)
    return _ended(run, record.state, record.exit_status, float(record.elapsed_seconds))


def _pended_too_long(
    state: str, never_ran: bool, waited: int | None, limit_s: float | None, cancelled: bool
) -> bool:
    """Whether a run Slurm ended was cancelled for pending past the pool's limit: it was
    cancelled without ever running, and paika says it cancelled it for that or (paika
    restarted since) Slurm held it at least that long by its own clock. A run that started
    before the cancel reached it is not: it ran, and ends as any run Slurm ended."""
    if state.upper() != "CANCELLED" or not never_ran:
        return False
    return cancelled or (limit_s is not None and waited is not None and waited >= limit_s)


def _pending_lost(run: str, limit_s: float | None, reason: str | None) -> AgentJobState:
    """Lost for no fault of its own: Slurm held it pending past the limit, and it never
    ran (nothing to charge)."""
    return AgentJobState(
        run,
        "lost",
        ran_seconds=0.0,
        launched=False,
        ended_by=PENDING_TOO_LONG,
        accounted=True,
        pending_past_s=limit_s,
        pending_reason=reason,
    )


def _ended(run: str, state: str, exit_status: int | None, ran: float | None) -> AgentJobState:
    """An ended run: lost for no fault of its own, exited with its shell's code, or killed
    with Slurm's state. Its time is Slurm's own (what slurmdbd charges), when known."""
    state, accounted = state.upper(), ran is not None
    if state in LOST_ENDINGS:
        ended_by = state.lower()
        return AgentJobState(run, "lost", ran_seconds=ran, ended_by=ended_by, accounted=accounted)
    # A FAILED job whose shell says 0 (one that never launched) did not succeed.
    if exit_status is not None and (state == "COMPLETED" or (state == "FAILED" and exit_status)):
        return AgentJobState(run, "exited", exit_status, ran_seconds=ran, accounted=accounted)
    ended_by = state.lower()
    return AgentJobState(run, "killed", ran_seconds=ran, ended_by=ended_by, accounted=accounted)


class SlurmPoller:
    """Reads each Slurm pool once per round; `commands` makes the clients of a pool (tests
    pass their own); `clock`: the wall clock (Unix seconds) a run's pending time is measured
    on, against Slurm's submit_time.

    The runs it cancelled for pending too long are remembered (a day): Slurm's end of such
    a run says only CANCELLED. After a restart, Slurm's own times tell it instead (a run
    cancelled without ever running, held at least the limit)."""

    def __init__(
        self,
        commands: type[SlurmCommands] = SlurmCommands,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.commands, self.clock = commands, clock
        self._cancelled: dict[tuple[str, int], float] = {}  # (name, Slurm id) → when

    def __call__(
        self, policy: PolicyConfig, pool: SlurmPool, targets: Sequence[Target]
    ) -> dict[str, HostReport]:
        """The report of each of `targets` (all hosts of `pool`)."""
        return self.read(policy, pool, targets)[0]

    def read(
        self, policy: PolicyConfig, pool: SlurmPool, targets: Sequence[Target]
    ) -> tuple[dict[str, HostReport], tuple[QueuedJob, ...] | None]:
        """The report of each of `targets`, and the queue read for them (None: it failed),
        which the pool's dispatcher goes by for this cycle's starts."""
        began = time.perf_counter()
        clients = self.commands(pool.conf, timeout=pool.command_timeout_seconds)
        try:
            nodes = {node.name: node for node in clients.nodes()}
            queue = clients.queue()
        except SlurmError as exc:
            return _away(targets, f"{exc.code.value}: {exc.stderr}", began), None
        self._cancel_overdue(clients, pool, targets, queue)
        cancelled = frozenset(self._cancelled)
        reports: dict[str, HostReport] = {}
        forgotten = _forgotten(pool, targets, queue)
        recorded: dict[str, EndedRun] = {}
        try:
            if forgotten:
                recorded = {r.name: r for r in clients.ended_runs(sorted(forgotten))}
        except SlurmError as exc:  # slurmdbd away: what became of those runs is not known yet
            asked = set(forgotten.values())
            error = f"{exc.code.value}: sacct: {exc.stderr}"
            reports = _away([t for t in targets if t.name in asked], error, began)
        latency = time.perf_counter() - began
        for target in targets:
            node = nodes.get(target.name)
            if target.name not in reports:
                reports[target.name] = node_report(
                    policy, pool, target.name, node, queue, latency, recorded, cancelled
                )
        return reports, queue

    def _cancel_overdue(
        self,
        clients: SlurmCommands,
        pool: SlurmPool,
        targets: Sequence[Target],
        queue: Sequence[QueuedJob],
    ) -> None:
        """Cancel each run paika holds that Slurm has kept PENDING past the pool's limit. A
        cancel that fails is sent again next cycle (the run is still PENDING then); one that
        timed out may have been taken, and is remembered as sent."""
        now = self.clock()
        for key in [k for k, at in self._cancelled.items() if now - at > _FORGET_CANCELS_AFTER_S]:
            del self._cancelled[key]
        held = {f"{pool.job_name_prefix}{run}.{t.name}" for t in targets for run in t.runs}
        for job in queue:
            if job.job_state != "PENDING" or job.name not in held or not job.submit_time:
                continue
            if now - job.submit_time < pool.pending_timeout_seconds:
                continue
            try:
                clients.cancel_pending(job.job_id)
            except SlurmError as exc:
                log.warning(
                    "Slurm job %s (%s) pending past %s s could not be cancelled: %s",
                    job.job_id,
                    job.name,
                    pool.pending_timeout_seconds,
                    exc,
                )
                if exc.code is not SlurmProblem.TIMED_OUT:
                    continue
            log.info(
                "Slurm job %s (%s) was pending past %s s (%s): cancelled",
                job.job_id,
                job.name,
                pool.pending_timeout_seconds,
                job.state_reason,
            )
            self._cancelled[(job.name, job.job_id)] = now


def _away(targets: Sequence[Target], error: str, began: float) -> dict[str, HostReport]:
    """Every host silent but patient: nothing is concluded while Slurm cannot be asked."""
    latency = time.perf_counter() - began
    return {
        t.name: HostReport(t.name, False, error=error, latency_s=latency, patient=True)
        for t in targets
    }


def _forgotten(
    pool: SlurmPool, targets: Sequence[Target], queue: Sequence[QueuedJob]
) -> dict[str, str]:
    """Slurm job name → node of each run paika holds that squeue no longer lists (it ended
    longer ago than MinJobAge): slurmdbd is asked what became of it."""
    listed = {job.name for job in queue}
    names = {
        f"{pool.job_name_prefix}{run}.{target.name}": target.name
        for target in targets
        for run in target.runs
    }
    return {name: node for name, node in names.items() if name not in listed}


def node_report(
    policy: PolicyConfig,
    pool: SlurmPool,
    host: str,
    node: Node | None,
    queue: Iterable[QueuedJob],
    latency_s: float = 0.0,
    recorded: Mapping[str, EndedRun] | None = None,
    cancelled: frozenset[tuple[str, int]] = frozenset(),
) -> HostReport:
    """One node of the pool as a host report; `recorded`: what slurmdbd says of runs squeue
    no longer lists, by Slurm job name; `cancelled`: (name, Slurm id) of the runs paika
    cancelled for pending too long."""
    if node is None:
        return HostReport(host, False, error=f"Slurm has no node {host!r}", latency_s=latency_s)
    runs = _runs_on(host, queue, pool.job_name_prefix)
    holders: dict[int, str] = {}
    for run, job in sorted(runs.items()):
        if job.ended:
            continue
        detail = ",".join(job.gres_detail)
        for index in used_indices(detail) | shared_indices(detail):
            holders.setdefault(index, run)  # a shared card: the first of its paika runs
    taken = (used_indices(node.gres_used) | shared_indices(node.gres_used)) - set(holders)
    types = {slurm: paika for paika, slurm in pool.gres.items()}
    gpus = tuple(
        _reading(policy, card, types.get(card.slurm_type), holders.get(card.index), taken)
        for card in node_cards(node.gres)
    )
    limit = float(pool.pending_timeout_seconds)
    jobs = {
        run: run_state(run, job, limit_s=limit, cancelled=(job.name, job.job_id) in cancelled)
        for run, job in runs.items()
    }
    for name, record in (recorded or {}).items():
        named = run_of_name(name, pool.job_name_prefix)
        if named is not None and named[1] == host and named[0] not in jobs:
            mine = (name, record.job_id) in cancelled
            jobs[named[0]] = recorded_state(named[0], record, limit_s=limit, cancelled=mine)
    return HostReport(
        host, True, gpus=gpus, jobs=jobs, latency_s=latency_s, unhealthy=unhealthy_reason(node)
    )


def _runs_on(host: str, queue: Iterable[QueuedJob], prefix: str) -> dict[str, QueuedJob]:
    """Run id → the Slurm job of that paika run on `host` (of several with one name, the
    one still on, else the latest)."""
    runs: dict[str, QueuedJob] = {}
    for job in sorted(queue, key=lambda j: j.job_id):
        named = run_of(job, prefix)
        if named is None or named[1] != host:
            continue
        run = named[0]
        if run not in runs or runs[run].ended or not job.ended:
            runs[run] = job
    return runs


def _reading(
    policy: PolicyConfig,
    card: Card,
    gpu_type: str | None,
    holder: str | None,
    taken: frozenset[int],
) -> GpuReading:
    # Slurm knows neither a card's memory nor its use: the memory is the catalog's for its
    # type, and no utilization is made up (a node's agent may give it: utilization.py).
    spec = policy.gpu_types.get(gpu_type or "")
    return GpuReading(
        index=card.index,
        uuid=None,
        name=card.slurm_type,
        memory_total_gib=spec.memory_gib if spec is not None else 0.0,
        memory_used_gib=0.0,
        utilization_pct=None,
        holder=holder,
        # A type the pool does not map is no catalog type: paika never plans on it.
        gpu_type=gpu_type or f"slurm:{card.slurm_type}",
        taken=card.index in taken,
    )
