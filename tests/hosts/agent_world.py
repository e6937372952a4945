"""A world of simulated GPU host agents served over real HTTP on loopback, registered with
a paika core whose database times follow a manual clock; the jobs are real processes."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import uvicorn
from sqlmodel import Session, select

from scheduler.agent.app import build_app
from scheduler.agent.jobs import JobStore
from scheduler.agent.simulated import SimulatedReader
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.cycle import Cycle, CycleResult
from scheduler.dispatch import AgentDispatcher
from scheduler.hosts.poll import Target, poll_all_sync
from scheduler.hosts.report import HostReport
from scheduler.notices.events import RecordingObserver
from scheduler.serving import serve_in_thread, stop_server
from storage.models import Job

TOKEN = "test-token-0123456789"


@dataclass
class Agent:
    """One simulated GPU host agent served over real HTTP."""

    name: str
    spec: str
    state_dir: Path
    port: int = 0
    server: uvicorn.Server | None = None
    store: JobStore | None = None
    thread: object = None
    # Tests run as root on CI: their jobs may run as root only when the agent is told so.
    allow_root_jobs: bool = True

    def start(self) -> None:
        self.store = JobStore(
            self.state_dir, allow_root_jobs=self.allow_root_jobs, simulated_gpus=True
        )
        reader = SimulatedReader(self.spec, host=self.name, loads=self.store)
        self.server, self.thread, self.port = serve_in_thread(
            build_app(reader, self.store, TOKEN, host=self.name), port=self.port
        )

    def stop(self) -> None:
        if self.server is not None:
            stop_server(self.server, self.thread)  # type: ignore[arg-type]
            self.server = None
        if self.store is not None:
            self.store.close()
            self.store = None

    def stop_all_jobs(self) -> None:
        """Stop every run the agent's state knows, even while the agent is not serving."""
        store = self.store or JobStore(self.state_dir)
        for run in store.all_jobs():
            if run.state == "running":
                store.stop(run.job_id, 0.1)
        if self.store is None:
            store.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def ok(paika: Paika, user: str, text: str) -> str:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply.text


def make_cycle(paika: Paika, notifier: RecordingObserver, poller: object = None) -> Cycle:
    def poll(targets: Sequence[Target]) -> Mapping[str, HostReport]:
        return poll_all_sync(targets, TOKEN, timeout=2.0)

    return Cycle(
        paika.engine,
        paika.policy,
        paika.clock,
        AgentDispatcher(TOKEN, timeout=2.0),
        notifier,
        poller or poll,
    )  # type: ignore[arg-type]


def job(paika: Paika, name: str) -> Job:
    with Session(paika.engine) as session:
        return session.exec(select(Job).where(Job.name == name)).one()


def submit(
    paika: Paika,
    name: str,
    cmd: str,
    *,
    gpus: int = 1,
    hours: float = 1,
    priority: str = "normal",
    user: str = "UALICE",
    extra: str = "",
) -> None:
    ok(
        paika,
        user,
        f'submit name={name} gpus={gpus} hours={hours} priority={priority} data=ready cmd="{cmd}" {extra}',
    )


def until(
    cycle: Cycle,
    clock: ManualClock,
    done: object,
    *,
    step: timedelta = timedelta(seconds=5),
    timeout: float = 60.0,
) -> CycleResult:
    """Run cycles (moving the clock) until `done()` holds; real time passes for the processes,
    so the wait is bounded in real time (generous: a busy machine is slow, not wrong)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        clock.advance(step)
        result = cycle.run_once()
        if done():  # type: ignore[operator]
            return result
        time.sleep(0.1)
    raise AssertionError(f"condition not reached within {timeout:g} s")
