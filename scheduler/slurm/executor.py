"""A Slurm pool as an executor: its runs submitted with sbatch and stopped with scancel
(dispatcher.py), its nodes and queue read once a round for all its hosts (reconcile.py).

With `utilization: agents` each node's report-only paika agent is polled while Slurm is read
(utilization.py): its cards' use is laid over Slurm's report. A revoked token is then the
agent's to refuse; without one Slurm holds no paika token and there is nothing to tell.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from scheduler.config import PolicyConfig, SlurmPool
from scheduler.dispatch import LogRequest, StartOrder
from scheduler.errors import Problem, UserError
from scheduler.hosts.poll import Target
from scheduler.hosts.report import HostReport
from scheduler.slurm.dispatcher import SlurmDispatcher, path_name
from scheduler.slurm.reconcile import SlurmPoller
from scheduler.slurm.utilization import with_utilization

log = logging.getLogger(__name__)


class NodeAgents(Protocol):
    """The agents' executor, as a Slurm pool uses it: its nodes' report-only agents."""

    def poll(self, targets: Sequence[Target]) -> Mapping[str, HostReport]: ...

    def revoke(self, host: str, url: str, token: str) -> bool: ...


class SlurmExecutor:
    """One Slurm pool. `reader`: how the pool's nodes and queue are read (tests pass their
    own); `monotonic`: the clock a stop's grace is measured on."""

    def __init__(
        self,
        pool: SlurmPool,
        agents: NodeAgents,
        policy: PolicyConfig,
        *,
        reader: SlurmPoller | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pool, self.agents, self.policy = pool, agents, policy
        self.reader = reader or SlurmPoller()
        self.dispatcher = SlurmDispatcher(
            pool, monotonic=monotonic, card_memory_gib=_card_memory(policy)
        )
        self._beside: ThreadPoolExecutor | None = None  # polls the nodes' agents
        self._answering: dict[str, bool] = {}  # node → whether its agent last answered

    def adopt(self, earlier: object) -> None:
        """Keep what an earlier executor of this pool (before its settings changed) began:
        the stops whose grace counts on, the runs cancelled for pending too long, and
        whether each node's agent answered."""
        if isinstance(earlier, SlurmExecutor):
            self.dispatcher.adopt(earlier.dispatcher)
            self.reader = earlier.reader
            self._answering = dict(earlier._answering)

    def poll(self, targets: Sequence[Target]) -> Mapping[str, HostReport]:
        """The pool read once for all its `targets` (none: only this round's start goes by
        no earlier read); the queue read is what this round's starts go by."""
        if not targets:
            self.dispatcher.saw(None)
            return {}
        # The nodes' agents answer while Slurm is read: a dead one costs this poll at most
        # the agents' timeout, alongside the Slurm read, never after it.
        usage = self._poll_beside(targets) if self.pool.utilization == "agents" else None
        try:
            reports, queue = self.reader.read(self.policy, self.pool, targets)
        except BaseException:
            self.dispatcher.saw(None)
            raise
        self.dispatcher.saw(queue)
        if usage is None:
            return reports
        readings = self._readings(usage)
        return {
            name: with_utilization(report, readings.get(name)) for name, report in reports.items()
        }

    def start(self, order: StartOrder) -> None:
        self.dispatcher.start(order)

    def stop(self, host: str, url: str, agent_job: str, grace_s: float) -> None:
        self.dispatcher.stop(host, url, agent_job, grace_s)

    def revoke(self, host: str, url: str, token: str) -> bool:
        """A node's only holder of a paika token is its report-only agent, told as any
        agent is; without one there is nothing to tell."""
        if self.pool.utilization == "agents":
            return self.agents.revoke(host, url, token)
        return self.dispatcher.revoke(host, url, token)

    def acknowledge(self, acks: Mapping[str, Sequence[str]]) -> None:
        """Nothing to tell: a Slurm pool's ended runs are Slurm's (and slurmdbd's) to keep."""

    def follow(self, policy: PolicyConfig) -> None:
        # Its catalogue: which paika type each GRES type is, and each type's memory (what a
        # share of a card is measured against).
        self.policy = policy
        self.dispatcher.card_memory_gib = _card_memory(policy)

    def close(self) -> None:
        if self._beside is not None:
            self._beside.shutdown(wait=True)
            self._beside = None

    def _poll_beside(self, nodes: Sequence[Target]) -> Future[Mapping[str, HostReport]]:
        if self._beside is None:
            self._beside = ThreadPoolExecutor(1, thread_name_prefix="paika-node-agents")
        return self._beside.submit(self.agents.poll, nodes)

    def _readings(self, usage: Future[Mapping[str, HostReport]]) -> Mapping[str, HostReport]:
        """The nodes' agents' reports (none when their poll failed as a whole); whether each
        answers is logged when it changes (their silence is no host's silence: not the
        cycle's to tell)."""
        try:
            reports = usage.result()
        except Exception:  # no utilization this cycle; Slurm's reports stand
            log.exception("polling the Slurm nodes' agents failed")
            return {}
        for node, report in reports.items():
            if self._answering.get(node, True) and not report.ok:
                log.warning(
                    "the agent on Slurm node %s does not answer (no utilization for its "
                    "cards until it does): %s",
                    node,
                    report.error,
                    extra={"host": node},
                )
            elif report.ok and self._answering.get(node) is False:
                log.info("the agent on Slurm node %s answers again", node, extra={"host": node})
            self._answering[node] = report.ok
        return reports


# The most of a log read to find its last lines: a person asks for at most a few thousand.
TAIL_BYTES = 4 * 1024 * 1024


def _card_memory(policy: PolicyConfig) -> dict[str, float]:
    return {name: spec.memory_gib for name, spec in policy.gpu_types.items()}


def read_slurm_log(request: LogRequest) -> tuple[str, ...]:
    """The run's last lines, from the file its pool's `log_path` names, where this machine
    can read it (a filesystem the cluster shares); else where it is, to read it there."""
    pool = request.options
    assert isinstance(pool, SlurmPool)
    path = pool.log_path.format(
        job_id=request.job_id,
        attempt=request.attempt,
        name=path_name(request.name),
        account=request.account or "",
    )

    def elsewhere(problem: str) -> UserError:
        return UserError(
            Problem.LOGS_ON_CLUSTER,
            job_id=request.job_id,
            host=request.host,
            path=path,
            lines=request.lines,
            problem=problem,
        )

    if "%" in path:  # Slurm's own fields (%j, %u …): only Slurm knows the name it became
        raise elsewhere("Slurm fills in its % fields")
    try:
        with open(path, "rb") as log_file:
            size = log_file.seek(0, os.SEEK_END)
            log_file.seek(max(0, size - TAIL_BYTES))
            text = log_file.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise elsewhere("no such file on this machine") from None
    except OSError as exc:
        raise elsewhere(exc.strerror or str(exc)) from None
    lines = text.splitlines()
    if size > TAIL_BYTES and lines:
        lines = lines[1:]  # the first may be cut
    return tuple(lines[-request.lines :]) if request.lines > 0 else ()
