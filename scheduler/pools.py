"""Which executor runs each host: the pool the policy file puts it in (`pools:`), looked up.

A host no pool names is run by paika's own agents, as is one in an `executor: agents` pool;
a host of another pool by that pool's executor, built from the registry
(scheduler/executors.py) the first time it is needed. The cycle sees one `Pools`, as its
dispatcher and its poller both: each round polls every executor once for all its hosts, and
each start, stop or revocation goes to the host's executor.

It follows the policy in force (`follow`): a pool added, moved to another executor or given
other settings takes effect at the next cycle, without a restart (a pool's executor built
anew keeps what the old one had begun: `adopt`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

from scheduler.config import PolicyConfig, Pool
from scheduler.dispatch import StartOrder
from scheduler.executors import Executor, ExecutorKind, Wiring, kind_of
from scheduler.hosts.poll import Target
from scheduler.hosts.report import HostReport

log = logging.getLogger(__name__)


class Pools:
    """Starts, stops and polls each host through its pool's executor.

    `agents`: the agents' executor (hosts in no pool). `monotonic`: the clock stops measure
    their grace on. `kinds`: executors to use instead of the registered ones, by name (a
    test's own Slurm reader)."""

    def __init__(
        self,
        policy: PolicyConfig,
        agents: Executor,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        kinds: Mapping[str, ExecutorKind] | None = None,
    ) -> None:
        self.policy, self.agents, self.monotonic = policy, agents, monotonic
        self.kinds = dict(kinds or {})
        self._built: dict[str, tuple[Pool, Executor]] = {}  # pool name → (as built, executor)

    def follow(self, policy: PolicyConfig) -> None:
        """Take a new policy: its pools, and what the executors are told (timeouts…)."""
        if policy is self.policy:
            return
        self.policy = policy
        self.agents.follow(policy)
        for name in list(self._built):
            pool = policy.pools.get(name)
            built, executor = self._built[name]
            if pool is None or pool.executor != built.executor:  # gone, or another executor
                del self._built[name]
                self._retire(executor)
            elif pool == built:
                executor.follow(policy)
            # Other settings, the same executor: built anew when next needed, adopting this.

    def for_host(self, host: str) -> Executor:
        """The executor of a host's jobs."""
        found = self.policy.pool_of(host)
        if found is None:
            return self.agents
        return self._for_pool(*found)

    def holds_runs(self) -> bool:
        """Whether some pool's executor polls with the runs the database holds there."""
        return any(self._kind(pool.executor).holds_runs for pool in self.policy.pools.values())

    # --- the cycle's dispatcher ------------------------------------------------------------

    def start(self, order: StartOrder) -> None:
        self.for_host(order.host).start(order)

    def stop(self, host: str, url: str, agent_job: str, grace_s: float) -> None:
        self.for_host(host).stop(host, url, agent_job, grace_s)

    def revoke(self, host: str, url: str, token: str) -> bool:
        return self.for_host(host).revoke(host, url, token)

    # --- the cycle's poller ----------------------------------------------------------------

    def __call__(self, targets: Sequence[Target]) -> Mapping[str, HostReport]:
        """One round: each executor polled once, for all its hosts; a pool whose hosts are
        all gone is polled with none (its starts then go by no stale read)."""
        rounds: dict[int, tuple[Executor, list[Target]]] = {id(self.agents): (self.agents, [])}
        for name, pool in self.policy.pools.items():
            executor = self._for_pool(name, pool)
            rounds.setdefault(id(executor), (executor, []))
        for target in targets:
            executor = self.for_host(target.name)
            rounds.setdefault(id(executor), (executor, []))[1].append(target)
        reports: dict[str, HostReport] = {}
        for executor, hosts in rounds.values():
            reports.update(executor.poll(hosts))
        return reports

    def acknowledge(self, acks: Mapping[str, Sequence[str]]) -> None:
        """Ended runs whose end is recorded, by host: told to the executor that reported them."""
        by_executor: dict[int, tuple[Executor, dict[str, Sequence[str]]]] = {}
        for host, runs in acks.items():
            executor = self.for_host(host)
            by_executor.setdefault(id(executor), (executor, {}))[1][host] = runs
        for executor, told in by_executor.values():
            executor.acknowledge(told)

    def close(self) -> None:
        """Let every executor go (the agents' connections with them)."""
        for _, executor in self._built.values():
            self._retire(executor)
        self._built.clear()
        self.agents.close()

    def _for_pool(self, name: str, pool: Pool) -> Executor:
        found = self._built.get(name)
        if found is not None and found[0] == pool:
            return found[1]
        executor = self._kind(pool.executor).build(
            name, pool.options, Wiring(self.agents, self.policy, self.monotonic)
        )
        if found is not None:  # settings changed under the same executor: carry on its work
            adopt = getattr(executor, "adopt", None)
            if callable(adopt):
                adopt(found[1])
            self._retire(found[1])
        self._built[name] = (pool, executor)
        return executor

    def _kind(self, name: str) -> ExecutorKind:
        return self.kinds.get(name) or kind_of(name)

    def _retire(self, executor: Executor) -> None:
        """Close an executor no pool uses any more (never the agents' own, shared by all)."""
        if executor is self.agents:
            return
        try:
            executor.close()
        except Exception:  # one executor's trouble closing never stops the others'
            log.exception("closing an executor failed")
