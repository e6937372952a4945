"""Which executor runs each host: the pool the policy file puts it in (`pools:`). A host no
pool names, or one in an `executor: agents` pool, is polled and dispatched through its paika
agent; a host of an `executor: slurm` pool through that pool's Slurm clients. One paika may
run some pools on agents and others on Slurm: the cycle sees one dispatcher and one poller.

A Slurm pool with `utilization: agents` also has each node's report-only agent polled, while
Slurm is read (scheduler/slurm/utilization.py): its cards' use is laid over Slurm's report.

Both follow the policy in force (`follow`): a pool added, moved to Slurm or given another
partition takes effect at the next cycle, without a restart.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from scheduler.config import PolicyConfig, SlurmPool
from scheduler.dispatch import AgentDispatcher, Dispatcher, StartOrder
from scheduler.hosts.poll import Target
from scheduler.hosts.report import HostReport
from scheduler.slurm.dispatcher import SlurmDispatcher
from scheduler.slurm.models import QueuedJob
from scheduler.slurm.reconcile import SlurmPoller
from scheduler.slurm.utilization import with_utilization

log = logging.getLogger(__name__)

AgentPoller = Callable[[Sequence[Target]], Mapping[str, HostReport]]


def slurm_pool_of(policy: PolicyConfig, host: str) -> tuple[str, SlurmPool] | None:
    """The Slurm pool a host is in, by name (None: its agent runs its jobs)."""
    found = policy.pool_of(host)
    if found is None or found[1].executor != "slurm" or found[1].slurm is None:
        return None
    return found[0], found[1].slurm


class PoolDispatcher:
    """Starts and stops each host's jobs through its pool's executor."""

    def __init__(
        self,
        policy: PolicyConfig,
        agents: Dispatcher,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """`monotonic`: the clock Slurm stops measure their grace on."""
        self.policy, self.agents, self.monotonic = policy, agents, monotonic
        self._slurm: dict[str, SlurmDispatcher] = {}

    def follow(self, policy: PolicyConfig) -> None:
        """Take a new policy: its pools, and what the agents are told."""
        self.policy = policy
        if isinstance(self.agents, AgentDispatcher):
            self.agents.containers = policy.containers.options()
            self.agents.timeout = policy.scheduler.hosts.poll_timeout_seconds

    def for_host(self, host: str) -> Dispatcher:
        """The executor of a host's jobs."""
        found = slurm_pool_of(self.policy, host)
        if found is None:
            return self.agents
        return self._for_pool(*found)

    def saw(self, name: str, pool: SlurmPool, queue: Sequence[QueuedJob] | None) -> None:
        """A Slurm pool's queue as this cycle read it (None: the read failed), for its
        starts to go by (SlurmDispatcher.start)."""
        self._for_pool(name, pool).saw(queue)

    def forget_reads(self) -> None:
        """A new cycle's poll begins: no earlier read is gone by any more."""
        for dispatcher in self._slurm.values():
            dispatcher.saw(None)

    def _for_pool(self, name: str, pool: SlurmPool) -> SlurmDispatcher:
        current = self._slurm.get(name)
        if current is None or current.pool != pool:
            # A changed pool gets new clients; a stop's grace already counting is kept.
            fresh = SlurmDispatcher(pool, monotonic=self.monotonic)
            if current is not None:
                fresh.adopt(current)
            current = self._slurm[name] = fresh
        return current

    def start(self, order: StartOrder) -> None:
        self.for_host(order.host).start(order)

    def stop(self, host: str, url: str, agent_job: str, grace_s: float) -> None:
        self.for_host(host).stop(host, url, agent_job, grace_s)

    def revoke(self, host: str, url: str, token: str) -> bool:
        """Tell the host to refuse its revoked token. A Slurm node's only holder of a token
        is its report-only agent (`utilization: agents`), told as any agent is; without one
        Slurm holds no paika token and there is nothing to tell."""
        found = slurm_pool_of(self.policy, host)
        if found is not None and found[1].utilization == "agents":
            return self.agents.revoke(host, url, token)
        return self.for_host(host).revoke(host, url, token)


class PoolPoller:
    """One round over every host: the agents' hosts polled as ever, each Slurm pool read
    once (its nodes and its queue) for all its hosts."""

    def __init__(
        self,
        policy: PolicyConfig,
        agents: AgentPoller,
        slurm: SlurmPoller | None = None,
        *,
        dispatcher: PoolDispatcher | None = None,
    ) -> None:
        """`dispatcher`: the cycle's, told each Slurm pool's queue as read (its starts then
        need no read of their own); None: it asks Slurm itself."""
        self.policy, self.agents, self.dispatcher = policy, agents, dispatcher
        self.slurm = slurm or SlurmPoller()
        self._beside: ThreadPoolExecutor | None = None  # polls the Slurm nodes' agents
        self._answering: dict[str, bool] = {}  # node → whether its agent last answered

    def follow(self, policy: PolicyConfig) -> None:
        """Take a new policy (its pools, and the agents' poll timeout)."""
        self.policy = policy
        if hasattr(self.agents, "timeout"):
            self.agents.timeout = policy.scheduler.hosts.poll_timeout_seconds

    def acknowledge(self, acks: Mapping[str, Sequence[str]]) -> None:
        """Ended runs whose end is recorded, by host: told to the agents that reported them
        (a Slurm pool's runs are Slurm's to keep)."""
        acknowledge = getattr(self.agents, "acknowledge", None)
        if acknowledge is not None:
            acknowledge(
                {h: runs for h, runs in acks.items() if slurm_pool_of(self.policy, h) is None}
            )

    def __call__(self, targets: Sequence[Target]) -> Mapping[str, HostReport]:
        if self.dispatcher is not None:  # a read is of its own cycle only
            self.dispatcher.forget_reads()
        by_pool: dict[str, list[Target]] = {}
        agents: list[Target] = []
        beside: list[Target] = []  # Slurm nodes whose agent gives their cards' use
        for target in targets:
            found = slurm_pool_of(self.policy, target.name)
            if found is None:
                agents.append(target)
            else:  # Slurm's read needs no paika token: a token problem is only its agent's
                by_pool.setdefault(found[0], []).append(target)
                if found[1].utilization == "agents":
                    beside.append(target)
        # The nodes' agents answer while Slurm is read: a dead one costs this poll at most
        # the agents' timeout, alongside the Slurm read, never after it.
        usage = self._poll_beside(beside) if beside else None
        reports = dict(self.agents(agents)) if agents else {}
        for name, hosts in by_pool.items():
            pool = self.policy.pools[name].slurm
            if pool is not None:
                read, queue = self.slurm.read(self.policy, pool, hosts)
                reports.update(read)
                if self.dispatcher is not None:
                    self.dispatcher.saw(name, pool, queue)
        if usage is not None:
            readings = self._readings(usage)
            for target in beside:
                if target.name in reports:
                    reports[target.name] = with_utilization(
                        reports[target.name], readings.get(target.name)
                    )
        return reports

    def _poll_beside(self, nodes: Sequence[Target]) -> Future[Mapping[str, HostReport]]:
        if self._beside is None:
            self._beside = ThreadPoolExecutor(1, thread_name_prefix="paika-node-agents")
        return self._beside.submit(self.agents, nodes)

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

    def close(self) -> None:
        """Let go of the agents' connections (when the agents' poller has any)."""
        if self._beside is not None:
            self._beside.shutdown(wait=True)
            self._beside = None
        close = getattr(self.agents, "close", None)
        if callable(close):
            close()
