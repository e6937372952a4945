"""The cycle against real simulated agents over HTTP on loopback: start, finish, fail,
lose, recover, requeue, preempt, cancel, restart. Database times follow a manual clock;
the jobs are real processes on the agents."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
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
from scheduler.notify import EventKind, RecordingNotifier
from scheduler.serving import serve_in_thread, stop_server
from storage.models import Allocation, Host, Job, JobState, LedgerEntry, Match

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

    def start(self) -> None:
        self.store = JobStore(self.state_dir)
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

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[dict[str, Agent]]:
    started = {
        name: Agent(name, spec, tmp_path / name)
        for name, spec in [("gpu-a", "2xA100-80GB"), ("gpu-b", "2xT4-16GB")]
    }
    for agent in started.values():
        agent.start()
    yield started
    for agent in started.values():
        if agent.store is not None:
            for job in agent.store.all_jobs():
                if job.state == "running":
                    agent.store.stop(job.job_id, 0.1)
        agent.stop()


def ok(paika: Paika, user: str, text: str) -> str:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply.text


@pytest.fixture
def world(paika: Paika, agents: dict[str, Agent]) -> Paika:
    """Two agents registered as hosts; no headroom, so two-GPU jobs may fill a host."""
    paika.policy = paika.policy.model_copy(
        update={"scheduler": paika.policy.scheduler.model_copy(update={"headroom": {}})}
    )
    ok(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    ok(paika, "UADMIN", "admin member add <@UVERA> team=vision role=approver")
    for agent in agents.values():
        ok(paika, "UADMIN", f"admin host add {agent.name} url={agent.url}")
    return paika


def make_cycle(paika: Paika, notifier: RecordingNotifier, poller: object = None) -> Cycle:
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
    tries: int = 60,
) -> CycleResult:
    """Run cycles (moving the clock) until `done()` holds; real time passes for the processes."""
    for _ in range(tries):
        clock.advance(step)
        result = cycle.run_once()
        if done():  # type: ignore[operator]
            return result
        time.sleep(0.1)
    raise AssertionError("condition not reached")


def test_a_job_starts_on_its_cheapest_card_runs_and_is_charged(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    notifier = RecordingNotifier()
    cycle = make_cycle(world, notifier)
    submit(world, "quick", "sleep 0.3; echo done", gpus=2)
    result = cycle.run_once()
    assert result.started == [job(world, "quick").id]
    running = job(world, "quick")
    assert running.state == JobState.RUNNING and running.attempts == 1
    assert [j.job_id for j in agents["gpu-b"].store.all_jobs()] == [f"{running.id}.1"]  # type: ignore[union-attr]
    with Session(world.engine) as session:
        match = session.exec(select(Match)).one()
    assert match.chosen_type == "T4-16GB"
    until(cycle, clock, lambda: job(world, "quick").state == JobState.SUCCEEDED)
    with Session(world.engine) as session:
        entries = session.exec(select(LedgerEntry)).all()
        assert session.exec(select(Allocation).where(Allocation.ended_at.is_(None))).all() == []  # type: ignore[union-attr]
    assert len(entries) == 2 and all(e.gpu_type == "T4-16GB" and e.gpu_hours > 0 for e in entries)
    assert EventKind.JOB_STARTED in notifier.kinds() and EventKind.JOB_FINISHED in notifier.kinds()


def test_a_failing_job_is_recorded_with_its_exit_code(world: Paika, clock: ManualClock) -> None:
    notifier = RecordingNotifier()
    cycle = make_cycle(world, notifier)
    submit(world, "broken", "exit 3")
    cycle.run_once()
    until(cycle, clock, lambda: job(world, "broken").state == JobState.FAILED)
    failed = job(world, "broken")
    assert failed.exit_code == 3 and "exited with 3" in (failed.state_reason or "")
    assert EventKind.JOB_FAILED in notifier.kinds()


def test_a_dead_agent_takes_its_host_down_loses_the_job_and_recovers(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    notifier = RecordingNotifier()
    cycle = make_cycle(world, notifier)
    submit(world, "long", "sleep 30", gpus=2, extra="type=A100-80GB")
    cycle.run_once()
    assert job(world, "long").state == JobState.RUNNING
    agents["gpu-a"].stop()
    submit(world, "next", "sleep 30", gpus=2, extra="type=A100-80GB")
    for _ in range(3):
        clock.advance(timedelta(seconds=10))
        result = cycle.run_once()
        assert job(world, "next").state == JobState.QUEUED  # never on the down host's GPUs
    with Session(world.engine) as session:
        assert session.exec(select(Host).where(Host.name == "gpu-a")).one().state == "down"
    assert EventKind.HOST_DOWN in notifier.kinds()
    assert job(world, "long").state == JobState.RUNNING  # not lost before the grace period
    clock.advance(timedelta(seconds=121))
    cycle.run_once()
    lost = job(world, "long")
    assert lost.state == JobState.FAILED and (lost.state_reason or "").startswith(
        "lost: its host stopped answering"
    )
    assert EventKind.JOB_LOST in notifier.kinds()
    assert job(world, "next").state == JobState.QUEUED
    agents["gpu-a"].start()  # same state dir, same port
    clock.advance(timedelta(seconds=10))
    result = cycle.run_once()
    assert EventKind.HOST_UP in [e.kind for e in result.events]
    # The old process still runs there but paika no longer does: its cards count as busy,
    # and the cycle asks the agent to stop it; then "next" gets the host.
    until(cycle, clock, lambda: job(world, "next").state == JobState.RUNNING)


def test_a_start_the_host_cannot_take_is_undone_and_requeued(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    notifier = RecordingNotifier()

    def poll_then_die(targets: Sequence[Target]) -> Mapping[str, HostReport]:
        reports = poll_all_sync(targets, TOKEN, timeout=2.0)
        agents["gpu-b"].stop()  # the host dies between the poll and the start
        return reports

    submit(world, "unlucky", "sleep 5")
    result = make_cycle(world, notifier, poll_then_die).run_once()
    assert result.requeued == [job(world, "unlucky").id] and result.started == []
    requeued = job(world, "unlucky")
    assert requeued.state == JobState.QUEUED and "start failed on gpu-b" in (
        requeued.state_reason or ""
    )
    with Session(world.engine) as session:
        assert session.exec(select(Allocation)).all() == []  # no GPU left allocated to it
    assert EventKind.JOB_REQUEUED in notifier.kinds()


def test_restarting_the_scheduler_starts_nothing_twice(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    submit(world, "steady", "sleep 20", gpus=2, extra="type=A100-80GB")
    make_cycle(world, RecordingNotifier()).run_once()
    for _ in range(3):  # a new scheduler process each time: fresh objects, same database
        clock.advance(timedelta(seconds=10))
        make_cycle(world, RecordingNotifier()).run_once()
    assert len(agents["gpu-a"].store.all_jobs()) == 1  # type: ignore[union-attr]
    steady = job(world, "steady")
    assert steady.state == JobState.RUNNING and steady.attempts == 1


def test_an_idle_job_is_preempted_for_core_work_and_requeued(
    world: Paika, clock: ManualClock
) -> None:
    notifier = RecordingNotifier()
    cycle = make_cycle(world, notifier)
    submit(world, "sweep", "sleep 60", gpus=2, priority="idle", extra="type=A100-80GB")
    cycle.run_once()
    submit(
        world, "paper", "sleep 60", gpus=2, priority="core", user="UVERA", extra="type=A100-80GB"
    )
    clock.advance(timedelta(seconds=10))
    result = cycle.run_once()
    assert result.plan is not None
    assert result.preempted == [job(world, "sweep").id], (
        result.plan,
        job(world, "sweep").state,
        job(world, "paper").priority,
    )
    assert job(world, "sweep").stop_reason == "preempt"
    until(cycle, clock, lambda: job(world, "paper").state == JobState.RUNNING)
    sweep = job(world, "sweep")
    assert sweep.state == JobState.QUEUED and sweep.stop_reason is None
    assert EventKind.JOB_PREEMPTED in notifier.kinds()


def test_cancelling_a_running_job_stops_it_on_its_host(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    cycle = make_cycle(world, RecordingNotifier())
    submit(world, "oops", "sleep 60")
    cycle.run_once()
    ok(world, "UALICE", "cancel oops")
    until(cycle, clock, lambda: job(world, "oops").state == JobState.CANCELLED)
    [agent_job] = agents["gpu-b"].store.all_jobs()  # type: ignore[union-attr]
    assert agent_job.state != "running"
