"""The Slurm executor: starts a paika run with sbatch, placed exactly where the policy put
it, and stops it with scancel. paika decides; Slurm only executes.

A run is submitted only when paika starts it, on the node, GPU type and count paika chose:
Slurm's own scheduler finds it startable at once and has nothing left to decide (a job
held in Slurm's queue instead could be released by anyone with `scontrol release`, and
would sit in Slurm's priority order besides paika's). Each run is one Slurm job per host,
named `<prefix><job>.<attempt>.<host>`: the name is how a start sent again is recognised
(never submitted twice, see `SlurmDispatcher.start`) and how a stop finds it.

A run on a shared card (its order's `share`) asks for its part of one card in the site's own
sharing GRES (the pool's `shares`): `--gres=shard:<type>:<n>` or `--gres=mps:<type>:<n>`,
n its declared memory's part of the card in the pool's units, rounded up. Slurm then picks the
card (the first of the type with n left), keeps a card that any share holds from whole-card
jobs, and a card any whole-card job holds from shares.
"""

from __future__ import annotations

import logging
import math
import pwd
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from scheduler.config import SlurmPool, SlurmShares
from scheduler.dispatch import CardShare, DispatchError, StartOrder
from scheduler.slurm.batch import BatchJob
from scheduler.slurm.commands import SlurmCommands
from scheduler.slurm.errors import SlurmError, SlurmProblem
from scheduler.slurm.models import QueuedJob

log = logging.getLogger(__name__)

# How a failed submission is settled (see DispatchError): the job's own matter (it would
# fail the same way anywhere) or the cluster's (queued again, the attempt given back).
_THE_JOBS_OWN = {
    SlurmProblem.UNMAPPED_USER,
    SlurmProblem.UNKNOWN_USER,
    SlurmProblem.IMAGE,
    SlurmProblem.BAD_IMAGE,
}
_FORGET_STOPS_AFTER_S = 24 * 3600


class SlurmDispatcher:
    """Dispatch one pool's runs through Slurm's clients. `monotonic`: the clock a stop's
    grace is measured on (a TERM sent is remembered in memory: after a restart the TERM
    is sent again and the grace starts afresh, which only gives the job longer).
    `card_memory_gib`: each paika GPU type's memory, as the policy's catalog has it (what a
    share of a card is measured against; the executor keeps it current)."""

    def __init__(
        self,
        pool: SlurmPool,
        commands: SlurmCommands | None = None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        card_memory_gib: Mapping[str, float] | None = None,
    ) -> None:
        self.pool = pool
        self.card_memory_gib: Mapping[str, float] = dict(card_memory_gib or {})
        self.commands = commands or SlurmCommands(pool.conf, timeout=pool.command_timeout_seconds)
        self.monotonic = monotonic
        self._term_sent: dict[str, float] = {}
        # This cycle's read (see `start`): the names it lists, and those sent since. None:
        # no read to go by. The cycle sends its starts from several threads at once.
        self._lock = threading.Lock()
        self._listed: frozenset[str] | None = None
        self._sent: set[str] = set()
        self._pending: frozenset[str] = frozenset()  # names the read shows PENDING

    def run_name(self, host: str, agent_job: str) -> str:
        """The Slurm job name of one run (`agent_job`: "<job>.<attempt>") on one host."""
        return f"{self.pool.job_name_prefix}{agent_job}.{host}"

    def adopt(self, earlier: SlurmDispatcher) -> None:
        """Keep the stops an earlier dispatcher of this pool began (their grace counts on)."""
        self._term_sent.update(earlier._term_sent)

    def saw(self, queue: Iterable[QueuedJob] | None) -> None:
        """The pool's queue as this cycle read it (`squeue --json`, before any start is
        sent), or None when the read failed: what `start` goes by until the next read."""
        with self._lock:
            self._listed = (
                None if queue is None else frozenset(j.name for j in queue if not j.refused)
            )
            self._sent = set()
            self._pending = frozenset(j.name for j in queue or () if j.job_state == "PENDING")

    def start(self, order: StartOrder) -> None:
        """Submit the run, unless it is in Slurm already: a start whose answer was lost is
        sent again, and must never be a second run.

        Whether it is there is read from this cycle's read of the queue (`saw`) plus the
        names submitted here since: no call of its own. That is sound because:
        - the read lists every job slurmctld knows, ended ones within MinJobAge included
          (squeue --json ignores filters: the same jobs `squeue --states=all --name` lists);
        - a start is sent again only in a later cycle than the one that sent it (the
          reconcile resends a start whose answer was lost when its host's report does not
          show the run, scheduler/hosts/reconcile.py), so that cycle's read was made after
          the first sbatch and lists the run if slurmctld took it, ended or not; within a
          cycle, what was submitted after the read is in `_sent` (an sbatch that timed out
          too: it may have been taken);
        - a run that ended longer than MinJobAge before the read is not listed, but then
          never resent: the poller asks slurmdbd (sacct) about every run the database holds
          that the read lacks, and the host's report carries what it recorded (running or
          ended); when sacct fails, the run's hosts are reported away (`patient`), and
          nothing is resent for them. Only a cluster without accounting leaves such a run
          unknown, and then `squeue --name` would not list it either.
        A refused submission Slurm still numbered (a GRES no node has: FAILED with reason
        BadConstraints) is no run: the read does not count it, as `ids_named` does not.
        With no read of this cycle (it failed, or no cycle reads for this dispatcher) the
        cluster is asked by name (`squeue --name`)."""
        batch = self._batch(order)
        try:
            if self._submitted(batch.name):
                return  # sent before, its answer lost: it is there already
            try:
                slurm_id = self.commands.submit(batch)
            except SlurmError as exc:
                if exc.code is SlurmProblem.TIMED_OUT:  # it may have been taken
                    self._note(batch.name)
                raise
            self._note(batch.name)
        except SlurmError as exc:
            raise _dispatch_error(order.host, order.job_id, exc) from exc
        log.info(
            "job #%s run %s is Slurm job %s on %s",
            order.job_id,
            order.attempt,
            slurm_id,
            order.host,
            extra={"job_id": order.job_id, "host": order.host},
        )

    def _submitted(self, name: str) -> bool:
        """Whether a run named `name` is in Slurm (see `start`)."""
        with self._lock:
            listed, sent = self._listed, name in self._sent
        if listed is None:
            return bool(self.commands.ids_named(name))
        return sent or name in listed

    def _note(self, name: str) -> None:
        """Remember a name submitted after this cycle's read (none without a read)."""
        with self._lock:
            if self._listed is not None:
                self._sent.add(name)

    def stop(self, host: str, url: str, agent_job: str, grace_s: float) -> None:
        """TERM to the run (its batch shell and children) at the first call; a cancel at
        the first call past the grace. The cycle asks again each cycle until it is gone.
        A run this cycle's read shows PENDING has nothing to TERM (Slurm refuses a signal to
        a pending job): it is cancelled while it is still PENDING, at once."""
        name, now = self.run_name(host, agent_job), self.monotonic()
        self._forget_old(now)
        with self._lock:
            pending = name in self._pending
        try:
            sent = self._term_sent.get(name)
            if pending:
                self.commands.cancel(name, pending_only=True)
            elif sent is None:
                self.commands.signal(name, "TERM")
                self._term_sent[name] = now
            elif now - sent >= grace_s:
                self.commands.cancel(name)
        except SlurmError as exc:
            raise _dispatch_error(host, int(agent_job.split(".")[0]), exc) from exc

    def revoke(self, host: str, url: str, token: str) -> bool:
        """Slurm's nodes hold no paika token: nothing to revoke."""
        return True

    def _forget_old(self, now: float) -> None:
        for name in [n for n, at in self._term_sent.items() if now - at > _FORGET_STOPS_AFTER_S]:
            del self._term_sent[name]

    def _batch(self, order: StartOrder) -> BatchJob:
        """The sbatch submission for one order, or a DispatchError saying what is missing."""

        def refuse(code: SlurmProblem, problem: str) -> DispatchError:
            return DispatchError(
                order.host,
                order.job_id,
                f"{code.value}: {problem}",
                bad_order=code in _THE_JOBS_OWN,
                reached=False,
                code=code.value,
            )

        if order.account is None:  # never as root, nor as whoever runs paika
            raise refuse(SlurmProblem.UNMAPPED_USER, "no Unix account is mapped to its owner")
        container: tuple[str, ...] = ()
        if order.image is not None:
            if self.pool.container is None:
                raise refuse(
                    SlurmProblem.IMAGE,
                    "the pool runs no container images: its policy sets no slurm.container "
                    "(option: --container-image with pyxis, --container for Slurm's OCI)",
                )
            try:
                container = self.pool.container.arguments(order.image)
            except ValueError as exc:
                raise refuse(SlurmProblem.BAD_IMAGE, str(exc)) from None
        gres = self.pool.gres.get(order.gpu_type or "")
        if gres is None:
            raise refuse(SlurmProblem.INVALID_GRES, f"no GRES name for type {order.gpu_type!r}")
        asked = f"gpu:{gres}:{len(order.gpu_indices)}"
        env: dict[str, str] = {}
        if order.share is not None:
            shares = self.pool.shares
            if shares is None:  # the policy took the pool's shares away since it was placed
                raise refuse(
                    SlurmProblem.INVALID_GRES,
                    "a share of a card, and the pool shares none: its policy sets no "
                    "slurm.shares (mode: shard or mps, per_gpu: as the nodes' gres.conf)",
                )
            memory_gib = self.card_memory_gib.get(order.gpu_type or "")
            if not memory_gib:
                raise refuse(
                    SlurmProblem.INVALID_GRES,
                    f"a share of a card of type {order.gpu_type!r}, whose memory the policy's "
                    "catalog does not give",
                )
            count = share_units(order.share.memory_mib, memory_gib, shares.per_gpu)
            asked = f"{shares.mode}:{gres}:{count}" if shares.typed else f"{shares.mode}:{count}"
            env = _share_env(order.share, shares)
        if order.wall_hours is None:
            raise refuse(SlurmProblem.OTHER, "no estimate to set its time limit from")
        try:
            gid = pwd.getpwnam(order.account).pw_gid
        except KeyError:
            raise refuse(SlurmProblem.UNKNOWN_USER, f"no Unix user {order.account!r}") from None
        name = str(order.env.get("PAIKA_JOB_NAME", ""))
        return BatchJob(
            name=self.run_name(order.host, f"{order.job_id}.{order.attempt}"),
            comment=f"paika job={order.job_id} attempt={order.attempt}",
            partition=self.pool.partition,
            node=order.host,
            gres=asked,
            time_minutes=self._minutes(order.wall_hours),
            output=self.pool.log_path.format(
                job_id=order.job_id,
                attempt=order.attempt,
                name=path_name(name),
                account=order.account,
            ),
            uid=order.account,
            gid=gid,
            command=order.command,
            env={
                **order.env,
                **env,
                "PAIKA_JOB_ID": str(order.job_id),
                "PAIKA_ATTEMPT": str(order.attempt),
            },
            workdir=self.pool.workdir,
            container=container,
        )

    def _minutes(self, wall_hours: float) -> int:
        """--time: the estimate times the margin, in whole minutes, never under the floor."""
        minutes = math.ceil(wall_hours * 60 * self.pool.time_margin)
        return max(self.pool.min_time_minutes, minutes)


def share_units(memory_mib: int, card_memory_gib: float, per_gpu: int) -> int:
    """A share's part of one card in the pool's units (shards, or MPS's parts): its declared
    memory over the card's, times the units a card has, rounded up, never under one unit nor
    over the whole card. Rounded before the ceiling so that a part that is exactly whole
    units (20 GiB of 80 in eighths: 2) is not made one more by the float's last digit."""
    exact = memory_mib * per_gpu / (card_memory_gib * 1024)
    return max(1, min(per_gpu, math.ceil(round(exact, 6))))


def _share_env(share: CardShare, shares: SlurmShares) -> dict[str, str]:
    """What a run on a shared card is told, as the agents tell theirs: the memory it declared
    for a framework that caps itself, and how its card is shared. With MPS Slurm sets its SM
    share (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) itself; the memory limit is the job's own MPS
    client setting, on the one card the job sees (device 0)."""
    env = {
        "PAIKA_GPU_MEMORY_MIB": str(share.memory_mib),
        "PAIKA_GPU_SHARE": f"slurm-{shares.mode}",
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    }
    if shares.mode == "mps":
        env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={share.memory_mib}M"
    return env


def path_name(name: str) -> str:
    """A job's name as the {name} of the log path: ASCII that is safe in a file name. A name
    in another script is written as IDNA writes one (xn-- and its Punycode), so 语音组 and
    视觉组 stay two files, and the name can be read back from it."""
    if not name.isascii():
        name = "xn--" + name.encode("punycode").decode("ascii")
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "job"


def _dispatch_error(host: str, job_id: int, exc: SlurmError) -> DispatchError:
    """A failed Slurm command as the cycle settles it: an unanswered one may have taken
    effect (asked again, never started elsewhere); a controller away surely did nothing."""
    return DispatchError(
        host,
        job_id,
        f"{exc.code.value}: {exc.stderr}",
        known=exc.code is not SlurmProblem.TIMED_OUT,
        bad_order=exc.code in _THE_JOBS_OWN,
        reached=exc.code is SlurmProblem.TIMED_OUT,
        code=exc.code.value,
    )
