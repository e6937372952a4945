"""The executors' contract as tests: the same scenarios run through the real cycle against
each executor (paika's agents in tests/hosts, Slurm in tests/slurm, and a toy one here).

The toy executor is what adding an executor takes: this one module (its settings' model and
its Executor) and one `register` call; no file of paika changes. It keeps its hosts in memory
and reads a run's command as a script of its own: `exit N` ends with N at the next poll,
anything else runs until stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import Field
from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.config import PolicyConfig, PoolOptions
from scheduler.cycle import Cycle
from scheduler.dispatch import DispatchError, StartOrder, agent_job_id
from scheduler.executors import ExecutorKind, Wiring
from scheduler.hosts.poll import Target
from scheduler.hosts.report import AgentJobState, GpuReading, HostReport
from storage.models import Job, JobState, LedgerEntry


class ToyOptions(PoolOptions):
    """A toy pool's section (`toy:`): how many cards each of its hosts has, of which type."""

    cards: int = Field(default=2, ge=1, le=16)
    gpu_type: str = "A100-80GB"
    memory_gib: float = 80


@dataclass
class ToyRun:
    host: str
    gpus: tuple[int, ...]
    command: str
    state: str = "running"
    exit_code: int | None = None


class ToyExecutor:
    """Runs kept in memory; what the cycle asked of it is kept for the tests to read."""

    def __init__(self, options: ToyOptions) -> None:
        self.options = options
        self.runs: dict[str, ToyRun] = {}
        self.stopped: list[str] = []
        self.closed = False
        self._lock = threading.Lock()

    def poll(self, targets: Sequence[Target]) -> Mapping[str, HostReport]:
        with self._lock:
            for run in self.runs.values():
                if run.state == "running" and run.command.startswith("exit "):
                    run.state, run.exit_code = "exited", int(run.command.split()[1])
            return {target.name: self._report(target.name) for target in targets}

    def _report(self, host: str) -> HostReport:
        mine = {name: run for name, run in self.runs.items() if run.host == host}
        holders = {
            i: name for name, run in mine.items() if run.state == "running" for i in run.gpus
        }
        gpus = tuple(
            GpuReading(
                index=i,
                uuid=f"TOY-{host}-{i}",
                name="Toy GPU",
                memory_total_gib=self.options.memory_gib,
                memory_used_gib=0.0,
                utilization_pct=100.0 if i in holders else 0.0,
                holder=holders.get(i),
                gpu_type=self.options.gpu_type,
            )
            for i in range(self.options.cards)
        )
        jobs = {name: AgentJobState(name, run.state, run.exit_code) for name, run in mine.items()}
        return HostReport(host, True, gpus=gpus, jobs=jobs, agent_version="toy")

    def start(self, order: StartOrder) -> None:
        name = agent_job_id(order.job_id, order.attempt)
        with self._lock:
            if name in self.runs:
                return  # sent again, its first answer lost: nothing more starts
            busy = {i for r in self.runs.values() if r.state == "running" for i in r.gpus}
            if busy & set(order.gpu_indices):
                raise DispatchError(order.host, order.job_id, "cards busy", reached=False)
            self.runs[name] = ToyRun(order.host, order.gpu_indices, order.command)

    def stop(self, host: str, url: str, agent_job: str, grace_s: float) -> None:
        with self._lock:
            run = self.runs.get(agent_job)
            if run is not None and run.state == "running":
                run.state = "killed"
            self.stopped.append(agent_job)

    def revoke(self, host: str, url: str, token: str) -> bool:
        return True  # no tokens here

    def acknowledge(self, acks: Mapping[str, Sequence[str]]) -> None:
        with self._lock:
            for runs in acks.values():
                for name in runs:
                    self.runs.pop(name, None)

    def follow(self, policy: PolicyConfig) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class ToyKind:
    """The toy executor's registration; `built` keeps each executor made, by pool."""

    def __init__(self) -> None:
        self.built: dict[str, ToyExecutor] = {}
        self.kind = ExecutorKind("toy", self._build, ToyOptions)

    def _build(self, name: str, options: PoolOptions | None, wiring: Wiring) -> ToyExecutor:
        assert isinstance(options, ToyOptions)
        self.built[name] = executor = ToyExecutor(options)
        return executor


# --- the scenarios every executor passes -----------------------------------------------------


@dataclass
class Site:
    """paika with one host on the executor under test, and a way to run its cycle."""

    paika: Paika
    cycle: Cycle
    host: str
    # Runs cycles until the condition holds (moving the clock if the executor's world needs).
    until: Callable[[Callable[[], bool]], None]
    # The command that ends with a code, and one that runs until stopped.
    exits: Callable[[int], str]
    runs_on: str


def job(paika: Paika, name: str) -> Job:
    with Session(paika.engine) as session:
        return session.exec(select(Job).where(Job.name == name)).one()


def submit(site: Site, name: str, command: str) -> None:
    reply = site.paika.run(
        f'submit name={name} gpus=1 hours=1 priority=normal data=ready cmd="{command}"',
        "UALICE",
    )
    assert reply.ok, reply.text


def a_run_ends_as_its_command_did(site: Site) -> None:
    """A job that succeeds and one that fails are recorded so, each charged its time."""
    submit(site, "fine", site.exits(0))
    submit(site, "broken", site.exits(3))
    ended = (JobState.SUCCEEDED, JobState.FAILED)
    site.until(lambda: all(job(site.paika, n).state in ended for n in ("fine", "broken")))
    fine, broken = job(site.paika, "fine"), job(site.paika, "broken")
    assert (fine.state, broken.state) == (JobState.SUCCEEDED, JobState.FAILED)
    assert broken.exit_code == 3
    with Session(site.paika.engine) as session:
        charged = {e.job_id for e in session.exec(select(LedgerEntry)).all()}
    assert {fine.id, broken.id} <= charged


def a_cancelled_run_is_stopped_on_its_host(site: Site) -> None:
    """A running job cancelled is stopped by its executor and ends cancelled."""
    submit(site, "long", site.runs_on)
    site.until(lambda: job(site.paika, "long").state == JobState.RUNNING)
    reply = site.paika.run(f"cancel #{job(site.paika, 'long').id}", "UALICE")
    assert reply.ok, reply.text
    site.until(lambda: job(site.paika, "long").state == JobState.CANCELLED)


SCENARIOS = (a_run_ends_as_its_command_did, a_cancelled_run_is_stopped_on_its_host)
