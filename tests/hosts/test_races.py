"""Users and the scheduling cycle racing on the same jobs, against real agents over HTTP.

Threads fire `submit`, `cancel`, `done`, `ready` and `bump` as owners and an approver at
random moments while another thread runs the cycle in a loop (the manual clock moving a
little each time), some starts losing their answer and some stops getting lost on the way.
Then everything stops, the cycles settle (no job left on a host), and the database and the
agents are audited:

- no allocation is left open, none ever leaked while it ran, no GPU had two at once;
- every run an agent knows belongs to a job started at least that many times, no run id is
  on two agents, and no job ever had two runs going at once (by the agents' own clocks);
- every job charged in the ledger was known to an agent; one charged for time really ran;
- whoever was told "Cancelled." has a cancelled job; whoever was told "Stopping" too,
  unless a `done` on the same job was the later of the two (then it succeeded): the last
  owner's word decides, and a job only marked done succeeds (or, when its start was refused,
  is cancelled as never having run).

- no command fails on the database (a deadlock): a lost race is run again.

Only on PostgreSQL and MariaDB: SQLite serialises writers, so nothing would race. The second
test races `paika cmd "cancel …"` in other processes against the cycle in this one. The third
makes one interleaving certain: the owner's `done` arriving while the cycle settles the same
job, which on MariaDB once deadlocked (the cycle share-locked the job's row through the
ledger's key checks before updating it).
Seeds: PAIKA_RACE_SEED; rounds: PAIKA_RACE_CYCLES (printed with -s).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from agent_world import TOKEN, Agent, make_cycle, ok, until
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from scheduler.agent.jobs import JobStore
from scheduler.agent.protocol import JobInfo
from scheduler.app import Paika, Reply
from scheduler.clock import ManualClock
from scheduler.cycle import Cycle
from scheduler.dispatch import AgentDispatcher, DispatchError, StartOrder
from scheduler.ledger import close_allocations_at
from scheduler.notices.events import RecordingObserver
from scheduler.service.jobs import SubmitResult
from storage.models import (
    ON_HOST_STATES,
    TERMINAL_STATES,
    Allocation,
    AuditEvent,
    Job,
    JobEvent,
    JobState,
    LedgerEntry,
)
from storage.queries import cluster as cluster_queries
from storage.queries import jobs as job_queries

CYCLES = int(os.environ.get("PAIKA_RACE_CYCLES", "120"))  # rounds of the cycle per backend
MAX_WAITING = 8  # users submit while fewer jobs wait, so the queue churns instead of growing
USERS = ("UALICE", "UBOB", "UVERA")  # two owners (members) and an approver of team vision
SETTLE_S = 90.0  # bound on the real time the cycles may take to settle (a slow box is slow)


def _servers_only(paika: Paika) -> None:
    if paika.engine.dialect.name == "sqlite":
        pytest.skip("SQLite serialises writers; the race needs a server (PostgreSQL, MariaDB)")


# ---------------------------------------------------------------- what happened


@dataclass(frozen=True)
class Said:
    """One command a user ran: what, on which job, between which moments, and the reply."""

    user: str
    verb: str
    job: int
    began: float
    ended: float
    ok: bool
    text: str


@dataclass
class Board:
    """What the users aim at, refreshed by the cycle thread after each cycle: the jobs on
    hosts (where cancel and done race the cycle hardest) and the ones waiting."""

    on_host: list[int]
    waiting: list[int]
    recent: list[int]

    def refresh(self, paika: Paika) -> None:
        with Session(paika.engine) as session:
            rows = session.execute(sa_select(col(Job.id), col(Job.state))).all()
        self.on_host = [i for i, state in rows if state in ON_HOST_STATES]
        self.waiting = [i for i, state in rows if state not in ON_HOST_STATES | TERMINAL_STATES]


class FlakyDispatcher(AgentDispatcher):
    """Real agents over HTTP, but some starts lose their answer (delivered or not) and some
    stops never arrive: the cycle has to find out from the agents what really happened."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__(TOKEN, timeout=5.0)
        self.rng, self.lock = rng, threading.Lock()
        self.dropped = self.unanswered = self.lost_stops = 0

    def _roll(self) -> float:
        with self.lock:  # starts go out from the cycle's thread pool
            return self.rng.random()

    def start(self, order: StartOrder) -> None:
        roll = self._roll()
        if roll < 0.07:
            self.dropped += 1
            raise DispatchError(order.host, order.job_id, "ReadTimeout (dropped)", known=False)
        super().start(order)
        if roll < 0.14:
            self.unanswered += 1
            raise DispatchError(order.host, order.job_id, "ReadTimeout (answer lost)", known=False)

    def stop(self, host: str, url: str, agent_job: str, grace_s: float) -> None:
        if self._roll() < 0.1:
            self.lost_stops += 1
            raise DispatchError(host, int(agent_job.split(".")[0]), "ConnectError (stop lost)")
        super().stop(host, url, agent_job, grace_s)


# ---------------------------------------------------------------- reading the world


def runs_of(agents: dict[str, Agent]) -> dict[str, list[JobInfo]]:
    """Every run each agent knows (tombstones too), by agent name."""
    found: dict[str, list[JobInfo]] = {}
    for name, agent in agents.items():
        if agent.store is not None:
            found[name] = agent.store.all_jobs()
        else:
            with JobStore(agent.state_dir) as store:
                found[name] = store.all_jobs()
    return found


def all_jobs(paika: Paika) -> dict[int, Job]:
    with Session(paika.engine) as session:
        return {job.id or 0: job for job in session.exec(select(Job))}


def leaks_and_doubles(paika: Paika) -> tuple[list[Any], list[Any]]:
    """Open allocations of jobs that hold no GPUs; GPUs with two open allocations."""
    with Session(paika.engine) as session:
        leaks = job_queries.allocation_leaks(session=session)
        doubles = cluster_queries.overbooked_gpus(session=session)
    return [tuple(row) for row in leaks], [tuple(row) for row in doubles]


def settle(
    paika: Paika,
    cycle: Cycle,
    clock: ManualClock,
    cancel_pending: bool,
    advance: Callable[[], object],
) -> None:
    """Run cycles until no job is on a host and none waits; waiting leftovers are cancelled
    by an admin (a running one is left to end: cancelling it would overrule its owner)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        jobs = all_jobs(paika)
        pending = [i for i, j in jobs.items() if j.state not in TERMINAL_STATES | ON_HOST_STATES]
        if cancel_pending:
            for job_id in pending:
                paika.run(f"cancel #{job_id}", "UADMIN")
        if all(j.state in TERMINAL_STATES for j in all_jobs(paika).values()):
            return
        assert time.monotonic() < deadline, {
            i: (j.state, j.stop_reason) for i, j in all_jobs(paika).items()
        }
        advance()
        cycle.run_once()
        time.sleep(0.05)


def audit_world(paika: Paika, agents: dict[str, Agent]) -> dict[str, int]:
    """The invariants that must hold once everything has settled; returns a few counts."""
    jobs = all_jobs(paika)
    leaks, doubles = leaks_and_doubles(paika)
    assert leaks == [] and doubles == [], (leaks, doubles)
    with Session(paika.engine) as session:
        still_open = session.exec(select(Allocation).where(col(Allocation.ended_at).is_(None)))
        assert list(still_open) == []
        ledger = list(session.exec(select(LedgerEntry)))
        leak_closed = session.exec(
            select(AuditEvent).where(AuditEvent.action == "allocation.leak_closed")
        ).all()
    assert leak_closed == [], [(a.target_id, a.detail) for a in leak_closed]
    assert all(j.state in TERMINAL_STATES for j in jobs.values())

    runs = runs_of(agents)
    where: dict[str, str] = {}
    launched: dict[int, list[JobInfo]] = {}
    known: dict[int, set[str]] = {}
    for agent, infos in runs.items():
        for info in infos:
            assert info.state != "running", (agent, info.job_id)  # nothing left running
            job_id, attempt = (int(part) for part in info.job_id.split("."))
            assert job_id in jobs, info.job_id
            assert jobs[job_id].attempts >= attempt, (info.job_id, jobs[job_id].attempts)
            known.setdefault(job_id, set()).add(info.job_id)
            if info.pid is not None:  # really launched (not a tombstone)
                assert info.job_id not in where, (info.job_id, where.get(info.job_id), agent)
                where[info.job_id] = agent
                launched.setdefault(job_id, []).append(info)
    for job_id, infos in launched.items():  # never two runs of one job at once
        spans = sorted(
            (i.started_at, i.ended_at or datetime.max.replace(tzinfo=UTC)) for i in infos
        )
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert end <= start, (job_id, [(i.job_id, i.started_at, i.ended_at) for i in infos])

    charged: dict[int, set[datetime]] = {}
    for entry in ledger:
        assert entry.job_id in known, (entry.job_id, entry.gpu_hours)
        if entry.gpu_hours > 0:
            charged.setdefault(entry.job_id, set()).add(entry.started_at)
    for job_id, starts in charged.items():  # each charged run really ran on a host
        assert len(starts) <= len(launched.get(job_id, [])), _story(paika, job_id, runs)
    return {
        "jobs": len(jobs),
        "runs launched": sum(len(v) for v in launched.values()),
        "tombstones": sum(len(v) for v in known.values()) - sum(len(v) for v in launched.values()),
        **{
            state: sum(j.state == state for j in jobs.values())
            for state in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
        },
    }


def _story(paika: Paika, job_id: int, runs: dict[str, list[JobInfo]]) -> str:
    """A job's history, ledger and runs, for a failure message."""
    with Session(paika.engine) as session:
        events = session.exec(select(JobEvent).where(JobEvent.job_id == job_id)).all()
        entries = session.exec(select(LedgerEntry).where(LedgerEntry.job_id == job_id)).all()
    lines = [f"job #{job_id}:"]
    lines += [
        f"  {e.at:%H:%M:%S} {e.from_state} -> {e.to_state} ({e.actor}): {e.reason}" for e in events
    ]
    lines += [
        f"  ledger {e.started_at:%H:%M:%S}-{e.ended_at:%H:%M:%S} {e.gpu_hours:.6f} h"
        for e in entries
    ]
    lines += [
        f"  {agent}: {i.job_id} {i.state} pid={i.pid} {i.started_at:%H:%M:%S.%f}-{i.ended_at}"
        for agent, infos in runs.items()
        for i in infos
        if i.job_id.split(".")[0] == str(job_id)
    ]
    return "\n".join(lines)


def check_cancel_and_done_replies(jobs: dict[int, Job], said: list[Said]) -> dict[str, int]:
    """The owner's last word decides how a job ends."""
    counts = {"cancelled at once": 0, "stopping": 0, "done with stop": 0}
    by_job: dict[int, list[Said]] = {}
    for s in said:
        if s.ok and s.verb in ("cancel", "done"):
            by_job.setdefault(s.job, []).append(s)
    for job_id, words in by_job.items():
        job = jobs[job_id]
        at_once = [s for s in words if s.verb == "cancel" and "Cancelled." in s.text]
        stopping = [s for s in words if s.verb == "cancel" and "Stopping" in s.text]
        stop_done = [s for s in words if s.verb == "done" and "asked to stop it" in s.text]
        counts["cancelled at once"] += len(at_once)
        counts["stopping"] += len(stopping)
        counts["done with stop"] += len(stop_done)
        why = (job_id, job.state, job.state_reason, [(s.verb, s.text[:60]) for s in words])
        if at_once or (stopping and not stop_done):
            assert job.state == JobState.CANCELLED, why
        elif stop_done and not stopping:
            assert job.state == JobState.SUCCEEDED or (
                job.state == JobState.CANCELLED and "never ran" in (job.state_reason or "")
            ), why
        elif stopping and stop_done:
            assert job.state in (JobState.CANCELLED, JobState.SUCCEEDED), why
            # When one word was surely the later (the other's commands had all returned before
            # it was given), it decides; overlapping ones may land in either order.
            if all(s.ended < max(c.began for c in stopping) for s in stop_done):
                assert job.state == JobState.CANCELLED, why
            if all(c.ended < max(s.began for s in stop_done) for c in stopping):
                assert job.state == JobState.SUCCEEDED or "never ran" in (job.state_reason or ""), (
                    why
                )
    return counts


# ---------------------------------------------------------------- the tests


def test_users_and_the_cycle_racing_leave_no_job_half_done(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    _servers_only(world)
    ok(world, "UADMIN", "admin member add <@UBOB> team=vision")
    seed = int(os.environ.get("PAIKA_RACE_SEED", random.randrange(1 << 30)))
    print(f"race seed {seed} ({world.engine.dialect.name})")
    dispatcher = FlakyDispatcher(random.Random(seed))
    cycle = make_cycle(world, RecordingObserver())
    cycle.dispatcher = dispatcher
    said: list[Said] = []
    board = Board([], [], [])
    cycle_errors: list[str] = []
    seen_leaks: list[object] = []
    done = threading.Event()
    crashed: list[BaseException] = []

    def user(name: str, rng: random.Random) -> None:
        try:
            while not done.is_set():
                _act(world, name, rng, said, board)
                time.sleep(rng.uniform(0.01, 0.05))
        except BaseException as exc:  # reported by the main thread
            crashed.append(exc)

    threads = [
        threading.Thread(target=user, args=(name, random.Random(seed + i)), daemon=True)
        for i, name in enumerate(USERS)
    ]
    for thread in threads:
        thread.start()
    rng = random.Random(seed - 1)
    started = time.monotonic()
    try:
        for _ in range(CYCLES):
            clock.advance(timedelta(seconds=rng.choice((1, 2, 5, 10))))
            result = cycle.run_once()
            cycle_errors += result.errors
            leaks, doubles = leaks_and_doubles(world)
            if leaks or doubles:
                seen_leaks.append((leaks, doubles))
            board.refresh(world)
            time.sleep(rng.uniform(0, 0.03))
    finally:
        done.set()
        for thread in threads:
            thread.join(timeout=60)
    raced_s = time.monotonic() - started
    assert crashed == [], crashed
    settle(world, cycle, clock, True, lambda: clock.advance(timedelta(seconds=5)))

    assert cycle_errors == [], cycle_errors
    assert seen_leaks == [], seen_leaks[:3]
    counts = audit_world(world, agents)
    replies = check_cancel_and_done_replies(all_jobs(world), said)
    # A lost race is run again (and reported as such only after three losses in a row); the
    # database itself never fails a command (a deadlock, a lock timeout).
    broken = [s for s in said if "database did not complete" in s.text]
    replies["kept changing"] = sum("kept changing" in s.text for s in said)
    print(
        f"{world.engine.dialect.name}: {CYCLES} cycles and {len(said)} commands in {raced_s:.1f} s;"
        f" {counts}; {replies}; starts dropped {dispatcher.dropped}, answers lost"
        f" {dispatcher.unanswered}, stops lost {dispatcher.lost_stops}"
    )
    assert broken == [], broken[:3]
    assert counts["runs launched"] > 0 and len(said) > CYCLES  # the race really happened


def _act(paika: Paika, user: str, rng: random.Random, said: list[Said], board: Board) -> None:
    """One random command by `user`, mostly on a job that is on a host right now."""
    verb = rng.choice(("submit", "submit", "cancel", "cancel", "done", "done", "ready", "bump"))
    if verb == "submit" and len(board.waiting) >= MAX_WAITING:
        verb = rng.choice(("cancel", "done"))
    pool = board.on_host if board.on_host and rng.random() < 0.7 else board.recent[-10:]
    if not pool:
        verb = "submit"
    job = rng.choice(pool) if pool else 0
    if verb == "submit":
        cmd = rng.choice(("sleep 0.3", "sleep 0.8", "sleep 1.5", "sleep 2.5", "exit 1"))
        priority = rng.choice(("normal", "normal", "idle", "core" if user == "UVERA" else "normal"))
        data = "ready" if rng.random() < 0.8 else "pending"
        card = rng.choice(("", "", "type=A100-80GB"))  # else the cheapest fit: T4
        text = (
            f"submit name=r{len(board.recent)} gpus={rng.choice((1, 1, 2))} hours=1"
            f' priority={priority} data={data} cmd="{cmd}" {card}'
        )
    elif verb == "cancel":
        text = f"cancel #{job}"
    elif verb == "done":
        text = f'done #{job} output="s3://ckpt/{job}" metric=loss:0.1'
    elif verb == "ready":
        text = f"ready #{job}"
    else:
        to = rng.choice(("core", "normal", "idle"))
        text = f'bump #{job} to={to} reason="deadline friday"'
    began = time.monotonic()
    reply: Reply = paika.run(text, user)
    if verb == "submit" and reply.ok and isinstance(reply.result, SubmitResult):
        job = reply.result.view.job.id or 0
        board.recent.append(job)
        board.waiting.append(job)
    said.append(Said(user, verb, job, began, time.monotonic(), reply.ok, reply.text))


def _paika_command() -> list[str]:
    script = Path(sys.executable).with_name("paika")
    if script.exists():
        return [str(script)]
    found = shutil.which("paika")
    return [found] if found else [sys.executable, "-c", "from bot.cli import main; main()"]


def test_cancels_from_other_processes_race_the_cycle(
    world: Paika, clock: ManualClock, agents: dict[str, Agent], tmp_path: Path
) -> None:
    """`paika cmd "cancel N"` in separate processes (their own engine, the system clock)
    while this process runs the cycle: each cancel is honoured, nothing is left behind."""
    _servers_only(world)

    # The other processes read the system clock: this one's follows it from here on.
    def follow() -> None:
        clock.advance(datetime.now(UTC) - clock.now())

    follow()
    cycle = make_cycle(world, RecordingObserver())
    ids = []
    for i in range(6):
        reply = world.run(
            f'submit name=p{i} gpus=1 hours=1 priority=normal data=ready cmd="sleep 20"', "UALICE"
        )
        assert reply.ok and isinstance(reply.result, SubmitResult), reply.text
        ids.append(reply.result.view.job.id or 0)
    env = {
        **os.environ,
        "PAIKA_DATABASE_URL": world.engine.url.render_as_string(hide_password=False),
        "PAIKA_ADMINS": ",".join(world.settings.admins),
        "PAIKA_DATA_DIR": str(tmp_path / "paika-data"),
    }
    env.pop("PAIKA_CONFIG", None)  # the bundled policy, as the test's core uses
    done = threading.Event()
    errors: list[str] = []

    def cycles() -> None:
        while not done.is_set():
            follow()
            errors.extend(cycle.run_once().errors)
            time.sleep(0.05)

    runner = threading.Thread(target=cycles, daemon=True)
    runner.start()
    began = time.monotonic()
    rng = random.Random(int(os.environ.get("PAIKA_RACE_SEED", random.randrange(1 << 30))))
    replies: dict[int, subprocess.CompletedProcess[str]] = {}
    try:
        # Each cancel sets off at its own moment: some find their job queued, some starting,
        # some running (the cycle keeps going meanwhile).
        procs: dict[int, subprocess.Popen[str]] = {}
        for job_id, delay in sorted(
            ((job_id, rng.uniform(0, 3.0)) for job_id in ids), key=lambda pair: pair[1]
        ):
            time.sleep(max(0.0, delay - (time.monotonic() - began)))
            procs[job_id] = subprocess.Popen(
                [*_paika_command(), "cmd", f"cancel #{job_id}", "--user", "UALICE"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        for job_id, proc in procs.items():
            out, err = proc.communicate(timeout=120)
            replies[job_id] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        done.set()
        runner.join(timeout=60)
    settle(world, cycle, clock, False, follow)

    assert errors == [], errors
    jobs = all_jobs(world)
    for job_id, answer in replies.items():
        job = jobs[job_id]
        if answer.returncode == 0:  # told it is cancelled, or being stopped: it ends cancelled
            assert "Cancelled." in answer.stdout or "Stopping" in answer.stdout, answer.stdout
            assert job.state == JobState.CANCELLED, (job_id, job.state, job.state_reason)
        else:  # refused only because it had already ended by itself
            assert "cannot become cancelled" in answer.stderr, (job_id, answer.stderr)
            assert job.state in (JobState.SUCCEEDED, JobState.FAILED), (job_id, job.state)
    assert sum(answer.returncode == 0 for answer in replies.values()) >= len(ids) // 2
    words = [a.stdout.split(": ", 1)[-1].split(":")[0].strip() for a in replies.values()]
    print(f"{world.engine.dialect.name}: cancels from other processes said {sorted(words)}")
    audit_world(world, agents)


def test_a_done_while_the_cycle_settles_the_same_job_is_carried_out(
    world: Paika,
    clock: ManualClock,
    agents: dict[str, Agent],
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """The interleaving that once deadlocked on MariaDB, made certain: the cycle has written the ledger of a
    cancelled job's run (not yet its state) when the owner's `done` for it comes in. Either
    may win the job, but the owner's command must be carried out or refused for a reason,
    never fail on the database."""
    _servers_only(world)
    cycle = make_cycle(world, RecordingObserver())
    ok(world, "UALICE", 'submit name=slow gpus=1 hours=1 priority=normal data=ready cmd="sleep 60"')
    cycle.run_once()
    assert "Stopping" in ok(world, "UALICE", "cancel slow")
    slow = all_jobs(world)[1]
    clock.advance(timedelta(seconds=5))
    cycle.run_once()  # the stop goes out; the job is settled by the next cycle
    deadline = time.monotonic() + 30
    while any(i.state == "running" for infos in runs_of(agents).values() for i in infos):
        assert time.monotonic() < deadline, runs_of(agents)
        time.sleep(0.05)

    charged = threading.Event()

    def charge_then_linger(*args: Any, **kwargs: Any) -> Any:
        entries = close_allocations_at(*args, **kwargs)  # ledger written, job not yet updated
        charged.set()
        time.sleep(1.0)  # the owner's command comes in now
        return entries

    monkeypatch.setattr("scheduler.hosts.reconcile.close_allocations_at", charge_then_linger)
    replies: list[Reply] = []

    def owner() -> None:
        if charged.wait(30):
            replies.append(world.run(f'done #{slow.id} output="s3://ckpt/slow"', "UALICE"))

    thread = threading.Thread(target=owner)
    thread.start()
    clock.advance(timedelta(seconds=5))
    result = cycle.run_once()
    thread.join(timeout=60)
    monkeypatch.undo()
    until(cycle, clock, lambda: all_jobs(world)[1].state in TERMINAL_STATES)
    assert charged.is_set() and len(replies) == 1, "the cycle did not settle the job"
    [reply] = replies
    assert reply.ok, reply.text  # MariaDB: "paika's database did not complete this command"
    final = all_jobs(world)[1]
    # Whichever came first: done won the job (succeeded), or it was over (cancelled, and the
    # output is recorded all the same).
    assert final.state in (JobState.SUCCEEDED, JobState.CANCELLED), final.state
    assert final.output == "s3://ckpt/slow"
    assert result.errors == []
