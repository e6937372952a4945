"""Idle-GPU reclaim end to end: simulated agents over real HTTP whose GPUs report idle, the
real cycle under a manual clock, the owner asked once, then the policy's action (or none,
when they answer "still using"). Database times follow the manual clock; the jobs are real
processes on the agents, so a stop is confirmed by the host before the GPUs are freed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path

import pytest
import uvicorn
from sqlmodel import Session, col, select

from bot.notice_words import sentence
from scheduler.agent.app import build_app
from scheduler.agent.gpus import GpuLoad
from scheduler.agent.jobs import JobStore
from scheduler.agent.simulated import SimulatedReader
from scheduler.alerts.idle import (
    ACTION_KIND,
    ASK_KIND,
    NOT_IDLE,
    RELEASE,
    STILL_USING,
    STILL_USING_QUIET,
    act_on_idle,
    answer_idle,
    check_idle,
    idle_hours,
)
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.cycle import Cycle
from scheduler.dispatch import AgentDispatcher, StartOrder
from scheduler.hosts.poll import poll_all_sync
from scheduler.notices.events import RecordingObserver
from scheduler.notices.outbox import Announcement, RecordingAnnouncer, deliver_pending
from scheduler.serving import serve_in_thread, stop_server
from storage.db import session_scope
from storage.models import Allocation, AuditEvent, Job, JobEvent, JobState, LedgerEntry, Notice

TOKEN = "test-token-idle-0123456789"
IDLE_MINUTES = 10
GRACE_MINUTES = 5
STEP = timedelta(seconds=60)  # one cycle per sampling period


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
    # Runs whose GPUs read this utilization from now on, whatever they started with.
    overrides: dict[str, float] = field(default_factory=dict)

    def start(self) -> None:
        self.store = JobStore(self.state_dir, allow_root_jobs=True)  # CI runs as root
        reader = SimulatedReader(self.spec, host=self.name, loads=_Overridden(self))
        self.server, self.thread, self.port = serve_in_thread(
            build_app(reader, self.store, TOKEN, host=self.name), port=self.port
        )

    def stop(self, *, end_jobs: bool = False) -> None:
        """Stop serving (the jobs run on, as when only the agent restarts), or end it all."""
        if self.store is not None and end_jobs:
            for job in self.store.all_jobs():
                if job.state == "running":
                    self.store.stop(job.job_id, 0.1)
        if self.server is not None:
            stop_server(self.server, self.thread)  # type: ignore[arg-type]
            self.server = None
        if self.store is not None:
            self.store.close()
            self.store = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def run_state(self, run: str) -> str | None:
        assert self.store is not None
        return next((j.state for j in self.store.all_jobs() if j.job_id == run), None)


class _Overridden:
    """The agent's loads, with the utilization of some runs replaced (a job busy again)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def gpu_loads(self) -> list[GpuLoad]:
        assert self.agent.store is not None
        return [
            replace(load, utilization_pct=self.agent.overrides[load.job_id])
            if load.job_id in self.agent.overrides
            else load
            for load in self.agent.store.gpu_loads()
        ]


class SimulatedLoad(AgentDispatcher):
    """Starts each job with its GPUs reporting the utilization a test chose for it (the
    simulated agent's PAIKA_SIM_UTILIZATION), idle unless told otherwise."""

    def __init__(self) -> None:
        super().__init__(TOKEN, timeout=2.0)
        self.busy: set[int] = set()

    def start(self, order: StartOrder) -> None:
        utilization = "95" if order.job_id in self.busy else "1"
        super().start(replace(order, env={**order.env, "PAIKA_SIM_UTILIZATION": utilization}))


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    started = Agent("gpu-a", "2xA100-80GB", tmp_path / "gpu-a")
    started.start()
    yield started
    started.stop(end_jobs=True)


def ok(paika: Paika, user: str, text: str) -> str:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply.text


@dataclass
class World:
    """paika with one agent, the cycle, and the alert steps periodic work runs after it."""

    paika: Paika
    clock: ManualClock
    cycle: Cycle
    load: SimulatedLoad
    agent: Agent
    announcer: RecordingAnnouncer

    def tick(self) -> list[Announcement]:
        """One cycle, then the idle checks and delivery, as periodic work runs them."""
        self.clock.advance(STEP)
        self.cycle.run_once()
        now, engine, policy = self.clock.now(), self.paika.engine, self.paika.policy
        raised = check_idle(engine, policy, now) + act_on_idle(engine, policy, now)
        deliver_pending(engine, self.announcer, now)
        return raised

    def ticks(self, n: int) -> list[Announcement]:
        return [a for _ in range(n) for a in self.tick()]

    def until(self, done: Callable[[], bool], tries: int = 40) -> None:
        """Cycles until `done()`; the host's real process needs a moment to stop."""
        for _ in range(tries):
            self.tick()
            if done():
                return
            time.sleep(0.1)
        raise AssertionError("condition not reached")

    def job(self, name: str) -> Job:
        with Session(self.paika.engine) as session:
            return session.exec(select(Job).where(Job.name == name)).one()

    def submit(self, name: str, priority: str = "normal") -> Job:
        ok(
            self.paika,
            "UALICE",
            f'submit name={name} gpus=1 hours=8 priority={priority} data=ready cmd="sleep 600" type=A100-80GB',
        )
        return self.job(name)

    def asks(self) -> list[Announcement]:
        return [a for a in self.announcer.announcements if a.kind == ASK_KIND]

    def actions(self) -> list[Announcement]:
        return [a for a in self.announcer.announcements if a.kind == ACTION_KIND]

    def audit(self, action: str) -> list[AuditEvent]:
        with Session(self.paika.engine) as session:
            return list(session.exec(select(AuditEvent).where(AuditEvent.action == action)).all())

    def history(self, job: Job) -> list[str]:
        with Session(self.paika.engine) as session:
            events = session.exec(
                select(JobEvent).where(JobEvent.job_id == job.id).order_by(col(JobEvent.id))
            ).all()
        return [e.to_state for e in events]


@pytest.fixture
def world(paika: Paika, clock: ManualClock, agent: Agent) -> World:
    policy = paika.policy
    paika.policy = policy.model_copy(
        update={
            "scheduler": policy.scheduler.model_copy(update={"headroom": {}}),
            "reclaim": policy.reclaim.model_copy(
                update={"idle_minutes": IDLE_MINUTES, "grace_minutes": GRACE_MINUTES}
            ),
        }
    )
    ok(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    ok(paika, "UADMIN", "admin member add <@UVERA> team=vision role=approver")
    ok(paika, "UADMIN", "admin member add <@UNLP> team=nlp")
    ok(paika, "UADMIN", f"admin host add {agent.name} url={agent.url}")
    load = SimulatedLoad()

    def poll(targets: object) -> object:
        return poll_all_sync(targets, TOKEN, timeout=2.0)  # type: ignore[arg-type]

    cycle = Cycle(paika.engine, paika.policy, clock, load, RecordingObserver(), poll)  # type: ignore[arg-type]
    return World(paika, clock, cycle, load, agent, RecordingAnnouncer())


def _started(world: World, name: str, priority: str = "normal") -> Job:
    job = world.submit(name, priority)
    world.cycle.run_once()  # starts it at the current moment
    started = world.job(name)
    assert started.state == JobState.RUNNING and world.agent.run_state(f"{job.id}.1") == "running"
    return started


def test_an_idle_normal_job_is_asked_once_then_stopped_and_queued_again(world: World) -> None:
    job = _started(world, "notebook")
    assert world.ticks(IDLE_MINUTES - 1) == []  # held for less than the window: never idle
    [ask] = world.tick()
    assert ask.key == f"idle:{job.id}:1:1" and ask.to_users == ("UALICE",)
    assert ask.detail["action"] == "requeue" and ask.detail["peak_pct"] < 5
    assert world.ticks(GRACE_MINUTES - 1) == []  # asked once; the grace runs
    [action] = world.tick()
    assert action.kind == ACTION_KIND and action.key == f"reclaim:{job.id}:1:1"
    assert action.to_users == ("UALICE",) and "queued again" in sentence("en", action)
    assert world.job("notebook").stop_reason == "reclaim"
    world.until(lambda: world.job("notebook").attempts == 2)
    assert world.agent.run_state(f"{job.id}.1") != "running"  # the host confirmed the stop
    assert world.history(world.job("notebook"))[-4:] == [
        "running",
        "preempted",
        "queued",
        "running",
    ]
    [reclaim] = world.audit("job.reclaim")
    assert reclaim.actor == "scheduler" and reclaim.detail == {
        "action": "requeue",
        "alert": ask.key,
        "idle_minutes": IDLE_MINUTES,
        "by": None,
    }
    assert [a.key for a in world.asks()] == [ask.key] and [a.key for a in world.actions()] == [
        action.key
    ]
    # The new run is a new occasion: asked again once it has been idle a whole window.
    world.ticks(IDLE_MINUTES + 1)
    assert [a.key for a in world.asks()] == [ask.key, f"idle:{job.id}:2:1"]


def test_an_idle_class_job_is_released_and_its_gpus_freed(world: World) -> None:
    job = _started(world, "sweep", priority="idle")
    world.ticks(IDLE_MINUTES + GRACE_MINUTES)
    [action] = world.actions()
    assert action.detail["action"] == "release" and "GPUs released" in sentence("en", action)
    world.until(lambda: world.job("sweep").state == JobState.CANCELLED)
    assert world.job("sweep").state_reason == "released: its GPUs sat idle"
    assert world.agent.run_state(f"{job.id}.1") != "running"
    with Session(world.paika.engine) as session:
        open_ = session.exec(select(Allocation).where(col(Allocation.ended_at).is_(None))).all()
    assert open_ == []
    assert [e.detail["action"] for e in world.audit("job.reclaim") if e.detail] == ["release"]
    # The ledger counts the idle time: the whole run sat idle, sample by sample.
    with Session(world.paika.engine) as session:
        [entry] = session.exec(select(LedgerEntry).where(LedgerEntry.job_id == job.id)).all()
    assert entry.gpu_hours > 0
    assert entry.idle_gpu_hours == pytest.approx(entry.gpu_hours, rel=0.1)
    with session_scope(world.paika.engine) as session:
        ask = session.get(Notice, f"idle:{job.id}:1:1")
        assert ask is not None and ask.answer == "timeout" and ask.answered_by == "scheduler"
        start = world.clock.now() - timedelta(hours=1)
        hours = idle_hours(session, world.paika.policy, start, world.clock.now())
    # Idle from its start until its stop: about idle + grace minutes, one GPU.
    assert (IDLE_MINUTES + GRACE_MINUTES - 1) / 60 <= hours[("vision", "A100-80GB")] <= 0.5


def test_still_using_prevents_the_action_and_quiets_the_asks(world: World) -> None:
    job = _started(world, "debugger")
    [ask] = world.ticks(IDLE_MINUTES)
    now = world.clock.now()
    engine, policy, admins = world.paika.engine, world.paika.policy, world.paika.admins
    stranger = answer_idle(engine, policy, admins, ask.key, RELEASE, "UNLP", now)
    assert stranger.known and not stranger.allowed
    answered = answer_idle(engine, policy, admins, ask.key, STILL_USING, "UALICE", now)
    assert answered.changed and answered.answer == STILL_USING and answered.action is None
    late = answer_idle(engine, policy, admins, ask.key, RELEASE, "UVERA", now)
    assert late.allowed and not late.changed and late.answer == STILL_USING
    quiet = IDLE_MINUTES * STILL_USING_QUIET
    assert world.ticks(quiet - 1) == []  # no action, and no new ask, though still idle
    assert world.job("debugger").state == JobState.RUNNING and world.actions() == []
    [again] = world.tick()
    assert again.key == f"idle:{job.id}:1:2"
    assert [e.detail["answer"] for e in world.audit("job.idle_answered") if e.detail] == [
        STILL_USING
    ]


def test_a_release_answer_releases_at_once(world: World) -> None:
    job = _started(world, "forgotten")
    [ask] = world.ticks(IDLE_MINUTES)
    answered = answer_idle(
        world.paika.engine,
        world.paika.policy,
        world.paika.admins,
        ask.key,
        RELEASE,
        "UVERA",  # an approver of the job's team
        world.clock.now(),
    )
    assert answered.changed and answered.action is not None
    assert answered.action.detail["by"] == "UVERA" and "<@UVERA> released" in sentence(
        "en", answered.action
    )
    world.until(lambda: world.job("forgotten").state == JobState.CANCELLED)
    assert world.agent.run_state(f"{job.id}.1") != "running"
    world.ticks(GRACE_MINUTES + 1)
    assert [a.key for a in world.actions()] == [f"reclaim:{job.id}:1:1"]  # delivered once


def test_a_busy_job_is_never_asked(world: World) -> None:
    job = world.submit("training")
    world.load.busy.add(job.id or 0)
    world.cycle.run_once()
    assert world.ticks(IDLE_MINUTES * 3) == []
    assert world.job("training").state == JobState.RUNNING


def test_a_job_busy_again_by_the_deadline_is_left_alone_and_asked_anew(world: World) -> None:
    job = _started(world, "flaky")
    [ask] = world.ticks(IDLE_MINUTES)
    world.agent.overrides[f"{job.id}.1"] = 80.0  # it computes again
    assert world.ticks(GRACE_MINUTES) == []
    with session_scope(world.paika.engine) as session:
        row = session.get(Notice, ask.key)
        assert row is not None and row.answer == NOT_IDLE
    del world.agent.overrides[f"{job.id}.1"]  # idle again: a whole window later, a new ask
    assert world.ticks(IDLE_MINUTES) == []  # the window still reaches the last busy sample
    assert [a.key for a in world.tick()] == [f"idle:{job.id}:1:2"]
    assert world.actions() == [] and world.job("flaky").state == JobState.RUNNING


def test_a_host_that_stops_answering_leaves_a_hole_no_idle_verdict_spans(world: World) -> None:
    _started(world, "remote")
    assert world.ticks(5) == []
    world.agent.stop()  # two polls fail: three minutes between this GPU's samples
    assert world.ticks(2) == []
    world.agent.start()
    # Without the hole it would be asked at minute 10; a window may not span the hole,
    # so the first one that qualifies starts once the samples resume (minute 16).
    assert world.ticks(8) == []
    assert [a.kind for a in world.tick()] == [ASK_KIND]
