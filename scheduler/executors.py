"""Executors: what starts and stops paika's runs on a pool's hosts, behind one contract.

paika decides where each run goes; an executor only carries it out and says what became of
it. Each pool of the policy file (`pools:`) names its executor, and hosts no pool names are
run by paika's own agents. An executor is:

- an `Executor`: one round's poll of its hosts (a `HostReport` each: their cards, their runs),
  start, stop, revoking a host's old token, and acknowledging ended runs it reported;
- an `ExecutorKind` registered here under its name: how to build one for a pool, the model
  of the pool's section named after it (`slurm:` for `executor: slurm`), which checks the
  pool's settings when the policy file is read, whether its poll needs the runs the
  database holds on each host (a batch system looks up runs it no longer lists), and how a
  run's output is read for `/gpu logs` (asked by the service, not the cycle: a person waits).

Built in: `agents` (scheduler/hosts/executor.py, one executor for every agent host) and
`slurm` (scheduler/slurm/executor.py, one per Slurm pool). A new executor is a package of its
own (its Executor, its settings' model) and one `register` call: the cycle, the pools'
lookup (scheduler/pools.py) and the policy file's checks need no change.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from scheduler.config import POOL_SECTIONS, PolicyConfig, PoolOptions, SlurmPool
from scheduler.dispatch import LogRequest, StartOrder
from scheduler.errors import Problem, UserError
from scheduler.hosts.executor import AgentsExecutor, read_agent_log
from scheduler.hosts.poll import Target
from scheduler.hosts.report import HostReport
from scheduler.slurm.executor import SlurmExecutor, read_slurm_log
from scheduler.slurm.reconcile import SlurmPoller


class Executor(Protocol):
    """What starts and stops runs on some hosts, and says what became of them. Every call
    may come from the cycle's threads (starts are sent from several at once)."""

    def poll(self, targets: Sequence[Target]) -> Mapping[str, HostReport]:
        """One round: a report for each target (a host that could not be asked is reported
        not ok, with why); no exception for one host's trouble."""
        ...

    def start(self, order: StartOrder) -> None:
        """Start one run where the order says (idempotent: an order sent again whose first
        answer was lost starts nothing more); DispatchError says why not."""
        ...

    def stop(self, host: str, url: str, agent_job: str, grace_s: float) -> None:
        """Stop one run, its processes given `grace_s` to end (idempotent)."""
        ...

    def revoke(self, host: str, url: str, token: str) -> bool:
        """Tell a host to refuse its revoked token: True once nothing there takes it."""
        ...

    def acknowledge(self, acks: Mapping[str, Sequence[str]]) -> None:
        """Ended runs whose end the database holds, by host: the executor may forget them."""
        ...

    def follow(self, policy: PolicyConfig) -> None:
        """Take a new policy in force (its timeouts, its catalogue)."""
        ...

    def close(self) -> None:
        """Let go of connections and threads; called once, when the executor is done."""
        ...


@dataclass(frozen=True)
class Wiring:
    """What paika gives an executor it builds for a pool: the agents' executor (a batch
    system's nodes may run report-only agents for their cards' use), the policy in force and
    the monotonic clock a stop's grace is measured on."""

    agents: Executor
    policy: PolicyConfig
    monotonic: Callable[[], float] = time.monotonic


# Builds a pool's executor: (the pool's name, its section as the kind's model read it, wiring).
Build = Callable[[str, PoolOptions | None, Wiring], Executor]


# The last lines of one run's output, or a UserError that says why not and what to do.
ReadLog = Callable[[LogRequest], tuple[str, ...]]


def _no_output(request: LogRequest) -> tuple[str, ...]:
    raise UserError(Problem.LOGS_NOT_READABLE, job_id=request.job_id, host=request.host)


@dataclass(frozen=True)
class ExecutorKind:
    """One executor as paika knows it by name (`executor: <name>` in a pool)."""

    name: str
    build: Build
    # The pool's section named after the executor (None: it takes no settings).
    options: type[PoolOptions] | None = None
    # Its poll needs the runs the database holds on each host (Target.runs).
    holds_runs: bool = False
    # How a run's output is read for `/gpu logs` (the default: it keeps none paika can read).
    read_log: ReadLog = _no_output


_KINDS: dict[str, ExecutorKind] = {}


def register(kind: ExecutorKind) -> None:
    """Make `executor: <kind.name>` mean this executor, its section read by its model."""
    if kind.name in _KINDS and _KINDS[kind.name] != kind:
        raise ValueError(f"executor {kind.name!r} is registered already")
    POOL_SECTIONS[kind.name] = kind.options
    _KINDS[kind.name] = kind


def unregister(name: str) -> None:
    """Take an executor out again (a plugin unloaded); the built-in ones stay."""
    if name in BUILT_IN:
        raise ValueError(f"executor {name!r} is built in")
    _KINDS.pop(name, None)
    POOL_SECTIONS.pop(name, None)


def kind_of(name: str) -> ExecutorKind:
    """The executor registered as `name` (a policy read with it loaded names only those)."""
    try:
        return _KINDS[name]
    except KeyError:
        known = ", ".join(_KINDS)
        raise LookupError(f"no executor {name!r} is registered (known: {known})") from None


def _the_agents(name: str, options: PoolOptions | None, wiring: Wiring) -> Executor:
    """An `executor: agents` pool is run as every agent host is: by the one agents' executor."""
    return wiring.agents


def slurm_kind(reader: SlurmPoller | None = None) -> ExecutorKind:
    """Slurm as an executor, one per pool; `reader`: how its pools are read (by default
    Slurm's own clients; a test or a bench brings its own)."""

    def build(name: str, options: PoolOptions | None, wiring: Wiring) -> Executor:
        assert isinstance(options, SlurmPool)  # its section, as its model read it
        return SlurmExecutor(
            options, wiring.agents, wiring.policy, reader=reader, monotonic=wiring.monotonic
        )

    return ExecutorKind("slurm", build, SlurmPool, holds_runs=True, read_log=read_slurm_log)


BUILT_IN = {
    "agents": ExecutorKind("agents", _the_agents, read_log=read_agent_log),
    "slurm": slurm_kind(),
}
for _kind in BUILT_IN.values():
    register(_kind)

__all__ = [
    "AgentsExecutor",
    "Build",
    "Executor",
    "ExecutorKind",
    "LogRequest",
    "ReadLog",
    "SlurmExecutor",
    "Wiring",
    "kind_of",
    "register",
    "slurm_kind",
    "unregister",
]
