"""The job life as a state machine, explored by hypothesis on SQLite.

Users submit, mark ready, cancel, mark done and bump jobs through the same commands as Slack;
the real cycle runs against fake agents (a hand-written Dispatcher and Poller) that record
every run they start, report runs running or ended, can go silent, can lose the answer to a
start (delivered or not), can forget their runs, and refuse a start that comes after its
stop. After every step the database and the agents are checked:

- every state change in the jobs' history is one `scheduler.lifecycle.TRANSITIONS` allows,
  and the history chains from the state seen before the step to the state now;
- open allocations exist exactly for jobs in running/unknown (as many as the job's GPUs);
  no GPU has two;
- a job in a terminal state never changes state again; `attempts` never decreases;
- an agent never runs two runs of one job at once, never starts a run after a stop for it,
  and never runs a run of an attempt the job has not reached;
- after a cycle, every run still running on an agent that answered belongs to the current
  attempt of a job that holds GPUs on that agent (any other was stopped in that cycle).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)
from paika_test_time import T0
from sqlalchemy import Engine, text
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from scheduler.app import Paika, Reply
from scheduler.clock import ManualClock
from scheduler.config import PolicyConfig, load_policy
from scheduler.cycle import Cycle, CycleResult
from scheduler.dispatch import DispatchError, StartOrder, agent_job_id
from scheduler.hosts.poll import Target
from scheduler.hosts.report import AgentJobState, GpuReading, HostReport
from scheduler.lifecycle import TRANSITIONS
from scheduler.notices.events import RecordingObserver
from scheduler.service.jobs import SubmitResult
from scheduler.settings import BUNDLED_POLICY, Settings
from storage.db import make_engine, upgrade
from storage.models import ON_HOST_STATES, TERMINAL_STATES, Allocation, Gpu, Host, Job, JobEvent
from storage.models.base import metadata
from storage.queries import cluster as cluster_queries

USERS = ("UALICE", "UVERA", "UADMIN")  # member, approver, admin (in no team)
HOSTS = {"fake-a": ("A100-80GB", 80.0), "fake-b": ("T4-16GB", 16.0)}
GPUS_PER_HOST = 2
MAX_JOBS = 6  # jobs per example: few enough that commands and cycles meet on them


# ---------------------------------------------------------------- the fake agents


@dataclass
class FakeRun:
    """One run as a fake agent knows it."""

    run_id: str
    job_id: int
    attempt: int
    gpus: tuple[int, ...]
    started_at: datetime
    state: str = "running"  # running | exited | killed
    exit_code: int | None = None
    ended_at: datetime | None = None
    tombstone: bool = False


@dataclass
class FakeAgent:
    """A GPU host agent in memory: what it runs, and what the scheduler asked of it."""

    name: str
    model: str
    memory_gib: float
    clock: ManualClock
    runs: dict[str, FakeRun] = field(default_factory=dict)
    silent: bool = False
    lose_next_start: str | None = None  # "deliver" (run it, lose the answer) or "drop"
    # What the scheduler asked, kept across `forget` (the checks' memory, not the agent's):
    stopped: set[str] = field(default_factory=set)
    launched: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def running(self) -> list[FakeRun]:
        return [run for run in self.runs.values() if run.state == "running"]

    def report(self) -> HostReport:
        if self.silent:
            return HostReport(self.name, False, error="ReadTimeout: no answer")
        holders = {gpu: run for run in self.running() for gpu in run.gpus}
        readings = []
        for index in range(GPUS_PER_HOST):
            run = holders.get(index)
            readings.append(
                GpuReading(
                    index=index,
                    uuid=f"GPU-{self.name}-{index}",
                    name=f"NVIDIA {self.model}",
                    memory_total_gib=self.memory_gib,
                    memory_used_gib=0.7 * self.memory_gib if run else 0.0,
                    utilization_pct=95.0 if run else 0.0,
                    processes={1000 + run.job_id: 0.7 * self.memory_gib} if run else {},
                    holder=run.run_id if run else None,
                )
            )
        jobs = {}
        for run in self.runs.values():
            ran = (run.ended_at - run.started_at).total_seconds() if run.ended_at else None
            pids = () if run.tombstone or run.state != "running" else (1000 + run.job_id,)
            jobs[run.run_id] = AgentJobState(run.run_id, run.state, run.exit_code, pids, ran)
        return HostReport(self.name, True, gpus=tuple(readings), jobs=jobs, agent_version="fake")

    def start(self, order: StartOrder) -> None:
        if self.silent:  # nothing reached the host (like HostUnreachable)
            raise DispatchError(self.name, order.job_id, "ConnectError: refused")
        lose, self.lose_next_start = self.lose_next_start, None
        if lose == "drop":  # the request never arrived, and no answer came back
            raise DispatchError(self.name, order.job_id, "ReadTimeout", known=False)
        self._start(order)
        if lose == "deliver":  # it arrived and ran, but the answer was lost
            raise DispatchError(self.name, order.job_id, "ReadTimeout", known=False)

    def _start(self, order: StartOrder) -> None:
        run_id = agent_job_id(order.job_id, order.attempt)
        known = self.runs.get(run_id)
        if known is not None and known.tombstone:
            raise DispatchError(self.name, order.job_id, "409: run was stopped before it started")
        if known is not None:
            return  # a start is idempotent: the agent starts a run id once
        if run_id in self.stopped:
            self.violations.append(f"{self.name}: start of {run_id} after a stop for it")
        held = {gpu for run in self.running() for gpu in run.gpus}
        if held & set(order.gpu_indices):
            raise DispatchError(self.name, order.job_id, "409: gpus still held")
        same_job = [r.run_id for r in self.running() if r.job_id == order.job_id]
        if same_job:
            self.violations.append(f"{self.name}: {run_id} started while {same_job} run")
        self.runs[run_id] = FakeRun(
            run_id, order.job_id, order.attempt, order.gpu_indices, self.clock.now()
        )
        self.launched.append(run_id)

    def stop(self, run_id: str) -> None:
        if self.silent:
            raise DispatchError(self.name, int(run_id.split(".")[0]), "ConnectError: refused")
        self.stopped.add(run_id)
        run = self.runs.get(run_id)
        now = self.clock.now()
        if run is None:  # a stop for a run it never saw: a tombstone refuses its start
            job_id, attempt = (int(part) for part in run_id.split("."))
            self.runs[run_id] = FakeRun(
                run_id, job_id, attempt, (), now, "killed", None, now, tombstone=True
            )
        elif run.state == "running":  # SIGTERM: the run ends at once
            run.state, run.ended_at = "killed", now

    def end(self, run: FakeRun, state: str, exit_code: int | None) -> None:
        run.state, run.exit_code, run.ended_at = state, exit_code, self.clock.now()

    def forget(self) -> None:
        """Come back from a wiped disk: every run (and its process) is gone."""
        self.runs.clear()


class FakeDispatcher:
    """scheduler.dispatch.Dispatcher over the fake agents."""

    def __init__(self, agents: Mapping[str, FakeAgent]) -> None:
        self.agents = agents

    def start(self, order: StartOrder) -> None:
        self.agents[order.host].start(order)

    def stop(self, host: str, url: str, agent_job: str, grace_s: float) -> None:
        self.agents[host].stop(agent_job)

    def revoke(self, host: str, url: str, token: str) -> bool:
        return True  # these hosts hold no tokens of their own


class FakePoller:
    """The cycle's Poller over the fake agents."""

    def __init__(self, agents: Mapping[str, FakeAgent]) -> None:
        self.agents = agents

    def __call__(self, targets: Sequence[Target]) -> Mapping[str, HostReport]:
        return {t.name: self.agents[t.name].report() for t in targets if t.name in self.agents}


# ---------------------------------------------------------------- the database


@dataclass(frozen=True)
class Seen:
    """What the checks remember of a job between steps."""

    state: str
    attempts: int
    ended_at: datetime | None


def _policy() -> PolicyConfig:
    policy = load_policy(BUNDLED_POLICY)
    return policy.model_copy(
        update={"scheduler": policy.scheduler.model_copy(update={"headroom": {}})}
    )


def _empty(engine: Engine) -> None:
    with engine.begin() as conn:
        for table in reversed(metadata.sorted_tables):
            conn.execute(text(f"DELETE FROM {table.name}"))


class JobLife(RuleBasedStateMachine):
    """One small cluster (two fake hosts of two GPUs), three users, the real cycle."""

    jobs = Bundle("jobs")

    engine: Engine
    policy: PolicyConfig

    def __init__(self) -> None:
        super().__init__()
        _empty(self.engine)
        self.clock = ManualClock(T0)
        settings_ = Settings(database_url=str(self.engine.url), admins=("UADMIN",))
        self.paika = Paika(settings_, self.policy, self.engine, self.clock)
        self.paika.sync_teams()
        self.agents = {
            name: FakeAgent(name, model, memory, self.clock)
            for name, (model, memory) in HOSTS.items()
        }
        self.cycle = Cycle(
            self.engine,
            self.policy,
            self.clock,
            FakeDispatcher(self.agents),
            RecordingObserver(),
            FakePoller(self.agents),
        )
        self._ok("UADMIN", "admin member add <@UALICE> team=vision")
        self._ok("UADMIN", "admin member add <@UVERA> team=vision role=approver")
        for name in HOSTS:
            self._ok("UADMIN", f"admin host add {name} url=http://{name}.invalid:8470")
        self.seen: dict[int, Seen] = {}
        self.last_event = 0
        self.last_cycle: CycleResult | None = None

    def _ok(self, user: str, command: str) -> None:
        reply = self.paika.run(command, user)
        assert reply.ok, reply.text

    def _run(self, user: str, command: str) -> Reply:
        """A user's command: refused or not, it must never crash."""
        self.last_cycle = None
        return self.paika.run(command, user)

    # -- users

    @precondition(lambda self: len(self.seen) < MAX_JOBS)
    @rule(
        target=jobs,
        user=st.sampled_from(("UALICE", "UVERA")),
        gpus=st.integers(1, GPUS_PER_HOST),
        priority=st.sampled_from(("normal", "normal", "idle", "core")),
        ready=st.sampled_from((True, True, False)),
        card=st.sampled_from(("", "T4-16GB")),  # one host's cards: contention, preemption
    )
    def submit(
        self, user: str, gpus: int, priority: str, ready: bool, card: str
    ) -> MultipleResults[int]:
        data = "ready" if ready else "pending"
        where = f" type={card}" if card else ""
        reply = self._run(
            user,
            f'submit name=j gpus={gpus} hours=1 priority={priority} data={data} cmd="train"{where}',
        )
        assert reply.ok, reply.text
        assert isinstance(reply.result, SubmitResult)
        return multiple(reply.result.view.job.id or 0)

    @rule(user=st.sampled_from(USERS), job=jobs)
    def ready(self, user: str, job: int) -> None:
        self._run(user, f"ready #{job}")

    @rule(user=st.sampled_from(USERS), job=jobs)
    def cancel(self, user: str, job: int) -> None:
        self._run(user, f"cancel #{job}")

    @rule(user=st.sampled_from(USERS), job=jobs)
    def done(self, user: str, job: int) -> None:
        self._run(user, f'done #{job} output="s3://ckpt/{job}"')

    @rule(user=st.sampled_from(USERS), job=jobs, to=st.sampled_from(("core", "normal", "idle")))
    def bump(self, user: str, job: int, to: str) -> None:
        self._run(user, f'bump #{job} to={to} reason="deadline"')

    # -- the scheduler

    @rule(seconds=st.sampled_from((5, 5, 30, 150, 3600, 25 * 3600)))
    def cycle_runs(self, seconds: int) -> None:
        self.clock.advance(timedelta(seconds=seconds))
        result = self.cycle.run_once()
        assert result.errors == [], result.errors
        self.last_cycle = result

    @rule()
    def a_short_cycle(self) -> None:  # cycles are common: a second rule draws them more often
        self.cycle_runs(5)

    # -- the hosts

    @precondition(lambda self: any(agent.running() for agent in self.agents.values()))
    @rule(host=st.sampled_from(tuple(HOSTS)), pick=st.integers(0, 3), code=st.sampled_from((0, 1)))
    def run_exits(self, host: str, pick: int, code: int) -> None:
        agent = self.agents[host]
        running = agent.running()
        if running:
            agent.end(running[pick % len(running)], "exited", code)
        self.last_cycle = None

    @precondition(lambda self: any(agent.running() for agent in self.agents.values()))
    @rule(host=st.sampled_from(tuple(HOSTS)), pick=st.integers(0, 3))
    def run_is_killed(self, host: str, pick: int) -> None:
        agent = self.agents[host]
        running = agent.running()
        if running:
            agent.end(running[pick % len(running)], "killed", None)
        self.last_cycle = None

    @rule(host=st.sampled_from(tuple(HOSTS)))
    def host_goes_silent_or_answers_again(self, host: str) -> None:
        self.agents[host].silent = not self.agents[host].silent
        self.last_cycle = None

    @rule(host=st.sampled_from(tuple(HOSTS)), how=st.sampled_from(("deliver", "drop")))
    def next_start_loses_its_answer(self, host: str, how: str) -> None:
        self.agents[host].lose_next_start = how

    @precondition(lambda self: any(agent.runs for agent in self.agents.values()))
    @rule(host=st.sampled_from(tuple(HOSTS)))
    def agent_forgets_its_runs(self, host: str) -> None:
        self.agents[host].forget()
        self.last_cycle = None

    # -- the checks

    def _jobs(self, session: Session) -> dict[int, Job]:
        return {job.id or 0: job for job in session.exec(select(Job))}

    @invariant()
    def moves_are_legal_and_terminal_jobs_stay_put(self) -> None:
        with Session(self.engine) as session:
            jobs = self._jobs(session)
            events = session.exec(
                select(JobEvent)
                .where(col(JobEvent.id) > self.last_event)
                .order_by(col(JobEvent.id))
            ).all()
        by_job: dict[int, list[JobEvent]] = {}
        for event in events:
            by_job.setdefault(event.job_id, []).append(event)
            self.last_event = max(self.last_event, event.id or 0)
        for job_id, job in jobs.items():
            before = self.seen.get(job_id)
            state = before.state if before else None
            for event in by_job.get(job_id, []):
                assert event.from_state == state, (job_id, state, event.from_state, event.to_state)
                if state is not None:
                    assert event.to_state in TRANSITIONS[state], (job_id, state, event.to_state)
                state = event.to_state
            assert state == job.state, (job_id, state, job.state)
            if before is not None:
                assert job.attempts >= before.attempts, (job_id, before.attempts, job.attempts)
                if before.state in TERMINAL_STATES:
                    assert job.state == before.state and job.ended_at == before.ended_at, job_id
                    assert job.attempts == before.attempts, job_id
            self.seen[job_id] = Seen(job.state, job.attempts, job.ended_at)

    @invariant()
    def allocations_match_jobs_on_hosts(self) -> None:
        with Session(self.engine) as session:
            jobs = self._jobs(session)
            open_ = session.exec(select(Allocation).where(col(Allocation.ended_at).is_(None))).all()
            doubled = cluster_queries.overbooked_gpus(session=session)
        assert doubled == [], doubled
        held: dict[int, int] = {}
        for allocation in open_:
            held[allocation.job_id] = held.get(allocation.job_id, 0) + 1
        on_host = {i: job for i, job in jobs.items() if job.state in ON_HOST_STATES}
        assert set(held) == set(on_host), (held, {i: j.state for i, j in on_host.items()})
        for job_id, job in on_host.items():
            assert held[job_id] == job.gpus, (job_id, held[job_id], job.gpus)

    @invariant()
    def agents_run_each_job_once_and_never_after_its_stop(self) -> None:
        with Session(self.engine) as session:
            attempts = {job.id: job.attempts for job in session.exec(select(Job))}
        for agent in self.agents.values():
            assert agent.violations == [], agent.violations
            jobs = [run.job_id for run in agent.running()]
            assert len(jobs) == len(set(jobs)), (agent.name, [r.run_id for r in agent.running()])
            for run_id in agent.launched:
                job_id, attempt = (int(part) for part in run_id.split("."))
                assert attempts.get(job_id, 0) >= attempt, (agent.name, run_id, attempts)

    @invariant()
    def a_cycle_leaves_no_orphan_running(self) -> None:
        if self.last_cycle is None:
            return
        with Session(self.engine) as session:
            jobs = self._jobs(session)
            hosts_of: dict[int, set[str]] = {}
            rows = session.execute(
                sa_select(col(Allocation.job_id), col(Host.name))
                .join(Gpu, col(Gpu.id) == col(Allocation.gpu_id))
                .join(Host, col(Host.id) == col(Gpu.host_id))
                .where(col(Allocation.ended_at).is_(None))
            ).all()
        for job_id, host in rows:
            hosts_of.setdefault(job_id, set()).add(host)
        for agent in self.agents.values():
            if agent.silent:
                continue
            for run in agent.running():
                job = jobs.get(run.job_id)
                assert job is not None and job.state in ON_HOST_STATES, (run.run_id, job)
                assert job.attempts == run.attempt, (run.run_id, job.attempts)
                assert agent.name in hosts_of.get(run.job_id, set()), (run.run_id, hosts_of)


def test_the_job_life_keeps_its_invariants(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'paika.db'}")
    upgrade(engine)

    class Life(JobLife):
        pass

    Life.engine = engine
    Life.policy = _policy()
    try:
        run_state_machine_as_test(
            Life,
            settings=settings(
                max_examples=60,
                stateful_step_count=60,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow],
            ),
        )
    finally:
        engine.dispose()
