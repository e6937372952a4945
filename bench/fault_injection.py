"""Fault injection: real agents and a real `paika up`, killed, frozen and restarted at random.

    .venv/bin/python bench/fault_injection.py --jobs 60 --agents 3 --minutes 3
        [--database URL] [--seed N] [--spec 2xA100-80GB,2xT4-16GB] [--job-seconds 10:40]
        [--cancels 6] [--cycle-seconds 2] [--settle-minutes 5] [--exhaustion] [--keep]

Everything lives in a temporary folder: the database (SQLite unless --database names a
PostgreSQL or MySQL/MariaDB server, where a fresh database is created and dropped after),
a policy file with a short cycle, and each agent's state dir. It starts `--agents` real
`paika agent --simulate …` processes (own port and state dir, PAIKA_AGENT_TOKEN) and
`paika up` (console mode), registers the agents with `paika cmd "admin host add …"`,
submits `--jobs` short jobs with `paika cmd` (each a shell script that sleeps a few seconds
and writes when it started and ended to a run log shared by all jobs: the truth of what
ran, whatever the agents and the database say), and then, for `--minutes`, at random:

- SIGKILLs `paika up` and starts it again (mid-cycle: between a start's write and its
  dispatch, between a dispatch and its answer …);
- SIGKILLs an agent and starts it again on the same port and state dir (its jobs live on);
- SIGSTOPs an agent for up to 45 s and SIGCONTs it (polls and starts time out; long
  enough and its jobs become unknown);
- cancels a job with `paika cmd "cancel N"` (a few, `--cancels`).

With `--exhaustion`, faults that exhaust rather than kill join them:

- a connection flood: 1,100 sockets that each send half a request line and then nothing,
  held for 5–20 s, against an agent or against `paika up`'s HTTP side (the report endpoint,
  /healthz); polls, starts and reports must still get through;
- a report flood: one job in five posts reports to `paika up` in a tight loop for its whole
  run, with its own token (as `paika report` does);
- a full disk: one job in five writes `yes` to its log for its whole run; as root, each
  agent's state dir lies on a 64 MiB tmpfs of its own, so the disk really fills (without
  root these jobs are left out: they would fill the machine's disk).

Then everything is restored, the cycles settle (every job ended, or `--settle-minutes`
passed), and an audit is printed from SQL, the agents' own state (over HTTP) and the run log:

- lost: jobs failed as lost (their reason starts with "lost"), or submitted but vanished;
- run twice: a run id that ran twice, a job that ran more runs than it has attempts (or a
  run of an attempt it never reached), a run id launched on two agents, or two runs of one
  job going at the same time;
- leaked: open allocations of jobs not running/unknown, GPUs with two open allocations, and
  runs an agent still runs for jobs that ended;
- not finished: jobs still waiting or on a host after the settle;
- succeeded / failed / cancelled jobs, attempts, requeued attempts, faults injected.

The last line is one JSON object of the figures. The exit status is 1 when anything was
lost, run twice or leaked. Every process it started is stopped at the end, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import Engine, create_engine, func, text
from sqlalchemy.engine import make_url
from sqlmodel import Session, col, select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scheduler.agent.client import AgentClient  # noqa: E402
from scheduler.agent.errors import AgentError  # noqa: E402
from scheduler.agent.protocol import JobInfo  # noqa: E402
from scheduler.settings import BUNDLED_POLICY  # noqa: E402
from storage.db import make_engine, normalize_url  # noqa: E402
from storage.models import (  # noqa: E402
    ON_HOST_STATES,
    TERMINAL_STATES,
    AuditEvent,
    Job,
    JobEvent,
    JobState,
)
from storage.queries import cluster as cluster_queries  # noqa: E402
from storage.queries import jobs as job_queries  # noqa: E402

TOKEN = "fault-injection-token-0123456789"
ADMIN, OWNER = "UADMIN", "UFAULT01"
JOB_SCRIPT = """#!/bin/sh
# One job of the fault-injection run: says in the shared run log when it started and ended.
# Its third word: plain (sleeps), reports (posts reports in a loop: "$4" is the flood's
# Python, "$5" its script) or disk (writes `yes` to its log).
log="$1"; seconds="$2"; mode="${3:-plain}"
trap 'echo "stop $PAIKA_JOB_ID $(date +%s.%N)" >> "$log"; exit 143' TERM INT
echo "start $PAIKA_JOB_ID $(date +%s.%N)" >> "$log"
case "$mode" in
  reports) "$4" -I "$5" "$seconds" & ;;
  disk) timeout "$seconds" yes & ;;
  *) sleep "$seconds" & ;;
esac
wait $!
echo "end $PAIKA_JOB_ID $(date +%s.%N)" >> "$log"
"""


# A job of the report flood: posts a report as fast as paika answers, for `seconds`.
REPORT_FLOOD = """import json, os, sys, time, urllib.error, urllib.request
url = os.environ["PAIKA_REPORT_URL"].rstrip("/")
job = os.environ["PAIKA_JOB_ID"].split(".")[0]
request = urllib.request.Request(
    f"{url}/v1/jobs/{job}/report",
    data=json.dumps({"metrics": {"loss": 0.5}}).encode(),
    method="POST",
    headers={"Authorization": "Bearer " + os.environ["PAIKA_JOB_TOKEN"],
             "Content-Type": "application/json"},
)
end, answers = time.monotonic() + float(sys.argv[1]), {}
while time.monotonic() < end:
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            code = response.status
    except urllib.error.HTTPError as exc:
        code = exc.code
    except OSError:
        code = 0
    answers[code] = answers.get(code, 0) + 1
print("report flood answers:", answers, flush=True)
"""
FLOOD_CONNECTIONS = 1100
SMALL_DISK_MIB = 64


def say(message: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {message}", flush=True)


# ---------------------------------------------------------------- processes


def paika_argv() -> list[str]:
    """The `paika` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("paika")
    if script.exists():
        return [str(script)]
    found = shutil.which("paika")
    return [found] if found else [sys.executable, "-c", "from bot.cli import main; main()"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Proc:
    """A child process we start, kill, freeze and start again; its output goes to a file."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    frozen: bool = False

    def start(self) -> None:
        with self.log.open("ab") as out:
            out.write(f"\n===== {datetime.now():%H:%M:%S} start\n".encode())
            out.flush()
            self.popen = subprocess.Popen(
                self.argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C in the terminal reaches us, not them
            )
        self.frozen = False

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, signum: int) -> None:
        if self.alive and self.popen is not None:
            with suppress(ProcessLookupError):
                self.popen.send_signal(signum)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        if self.popen is not None:
            with suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=10)
        self.frozen = False

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (after SIGCONT), then SIGKILL if it does not go."""
        if not self.alive or self.popen is None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self.frozen = False


@dataclass
class AgentProc(Proc):
    port: int = 0
    state_dir: Path = Path()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


# ---------------------------------------------------------------- the world


@dataclass
class World:
    """The temporary folder, the database and every process of one run."""

    folder: Path
    database_url: str
    env: dict[str, str]
    agents: list[AgentProc] = field(default_factory=list)
    up: Proc | None = None
    engine: Engine | None = None
    up_port: int = 0
    exhaustion: bool = False
    mounts: list[Path] = field(default_factory=list)

    @property
    def run_log(self) -> Path:
        return self.folder / "runs.log"

    @property
    def job_script(self) -> Path:
        return self.folder / "job.sh"

    @property
    def flood_script(self) -> Path:
        return self.folder / "report_flood.py"

    def paika(self, text_: str, user: str = ADMIN) -> tuple[int, str]:
        """`paika cmd TEXT --user USER`: its exit status and reply."""
        done = subprocess.run(
            [*paika_argv(), "cmd", text_, "--user", user],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return done.returncode, (done.stdout + done.stderr).strip()

    def all_processes(self) -> list[Proc]:
        return [*self.agents, *([self.up] if self.up else [])]


def child_env(database_url: str, policy: Path, data_dir: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PAIKA_", "SLACK_"))
    }  # no Slack: console mode; nothing of the caller's paika settings
    env.update(
        PAIKA_DATABASE_URL=database_url,
        PAIKA_CONFIG=str(policy),
        PAIKA_ADMINS=ADMIN,
        PAIKA_AGENT_TOKEN=TOKEN,
        PAIKA_DATA_DIR=str(data_dir),
        PYTHONUNBUFFERED="1",
    )
    return env


def write_policy(folder: Path, cycle_seconds: float) -> Path:
    """The bundled policy with a short cycle and quick host knobs (no reclaim, no digest)."""
    policy = yaml.safe_load(BUNDLED_POLICY.read_text(encoding="utf-8"))
    knobs = policy["scheduler"]
    knobs["cycle_seconds"] = cycle_seconds
    knobs["hosts"].update(poll_timeout_seconds=1.5, unknown_after_seconds=15)
    knobs["headroom"] = {}
    knobs["matching"]["costlier_after_minutes"] = 0
    knobs["preemption"]["idle_grace_minutes"] = 0.1
    policy["reclaim"]["enabled"] = False
    policy["digest"]["enabled"] = False
    path = folder / "policy.yml"
    path.write_text(yaml.safe_dump(policy, sort_keys=False), encoding="utf-8")
    return path


@contextmanager
def database(url: str | None, folder: Path, keep: bool) -> Iterator[str]:
    """The run's database URL: SQLite in the folder, or a fresh database on a server."""
    if url is None or make_url(normalize_url(url)).get_backend_name() == "sqlite":
        yield url or f"sqlite:///{folder / 'paika.db'}"
        return
    admin = create_engine(normalize_url(url), isolation_level="AUTOCOMMIT")
    name = f"paika_fault_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    say(f"created database {name} on {admin.url.render_as_string()}")
    try:
        yield admin.url.set(database=name).render_as_string(hide_password=False)
    finally:
        if keep:
            say(f"kept database {name}")
        else:
            force = " WITH (FORCE)" if admin.dialect.name == "postgresql" else ""
            with suppress(Exception), admin.connect() as conn:
                conn.execute(text(f"DROP DATABASE {name}{force}"))
        admin.dispose()


# ---------------------------------------------------------------- the run


@dataclass
class Chaos:
    """The faults injected, and what is due to be undone when."""

    rng: random.Random
    world: World
    counts: Counter[str] = field(default_factory=Counter)
    due: list[tuple[float, str, Callable[[], None]]] = field(default_factory=list)
    job_ids: list[int] = field(default_factory=list)
    cancels_left: int = 0
    exhaustion: bool = False

    def later(self, seconds: float, what: str, action: Callable[[], None]) -> None:
        self.due.append((time.monotonic() + seconds, what, action))

    def run_due(self, everything: bool = False) -> None:
        now = time.monotonic()
        keep = []
        for when, what, action in sorted(self.due, key=lambda item: item[0]):
            if everything or when <= now:
                say(f"  {what}")
                action()
            else:
                keep.append((when, what, action))
        self.due = keep

    def unfinished(self) -> list[int]:
        """The jobs not ended yet (a cancel aimed at them races the faults)."""
        assert self.world.engine is not None
        with Session(self.world.engine) as session:
            rows = session.exec(select(Job.id).where(col(Job.state).not_in(TERMINAL_STATES)))
            return [job_id for job_id in rows if job_id is not None]

    def busy(self) -> set[str]:
        return {what.split()[-1] for _, what, _ in self.due}

    def strike(self) -> None:
        """One fault at random, on a process that is not already down or frozen."""
        world, rng = self.world, self.rng
        idle_agents = [a for a in world.agents if a.name not in self.busy() and a.alive]
        choices = ["kill-up"] if world.up and world.up.alive else []
        choices += ["kill-agent", "freeze-agent", "freeze-agent"] if idle_agents else []
        choices += ["cancel"] if self.cancels_left > 0 and self.job_ids else []
        if self.exhaustion:
            choices += ["flood-agent"] if idle_agents else []
            choices += (
                ["flood-up"] if world.up and world.up.alive and "up" not in self.busy() else []
            )
        if not choices:
            return
        choice = rng.choice(choices)
        self.counts[choice] += 1
        if choice == "kill-up" and world.up is not None:
            up = world.up
            say("SIGKILL paika up")
            up.kill()
            self.later(rng.uniform(0.5, 8), "restart paika up", up.start)
        elif choice == "kill-agent":
            agent = rng.choice(idle_agents)
            say(f"SIGKILL {agent.name}")
            agent.kill()
            self.later(rng.uniform(0.5, 10), f"restart {agent.name}", agent.start)
        elif choice == "freeze-agent":
            agent = rng.choice(idle_agents)
            seconds = rng.uniform(3, 45)
            say(f"SIGSTOP {agent.name} for {seconds:.0f} s")
            agent.signal(signal.SIGSTOP)
            agent.frozen = True
            self.later(seconds, f"SIGCONT {agent.name}", functools.partial(_thaw, agent))
        elif choice in ("flood-agent", "flood-up"):
            target = rng.choice(idle_agents) if choice == "flood-agent" else None
            port = target.port if target is not None else world.up_port
            name = target.name if target is not None else "up"
            seconds = rng.uniform(5, 20)
            flood = Flood(port)
            opened = flood.open(FLOOD_CONNECTIONS)
            say(f"connection flood on {name}: {opened} half-sent requests for {seconds:.0f} s")
            self.later(seconds, f"end the flood on {name}", flood.close)
        else:
            self.cancels_left -= 1
            job_id = rng.choice(self.unfinished() or self.job_ids)
            status, reply = world.paika(f"cancel #{job_id}", OWNER)
            say(f"cancel #{job_id}: {reply.splitlines()[0] if reply else status}")


def _thaw(agent: AgentProc) -> None:
    agent.signal(signal.SIGCONT)
    agent.frozen = False


class Flood:
    """Sockets that each send half a request line and then nothing: what one idle client,
    or a job on the host, can open against an HTTP server."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sockets: list[socket.socket] = []

    def open(self, count: int) -> int:
        for _ in range(count):
            sock = socket.socket()
            sock.settimeout(2)
            try:
                sock.connect(("127.0.0.1", self.port))
                sock.send(b"GET /v1/sta")
            except OSError:
                sock.close()
                continue
            self.sockets.append(sock)
        return len(self.sockets)

    def close(self) -> None:
        for sock in self.sockets:
            with suppress(OSError):
                sock.close()
        self.sockets.clear()


def raise_file_limit(needed: int) -> None:
    """Room for a flood's sockets in this process (the soft limit up to the hard one)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, hard), hard))


def small_disk(folder: Path) -> bool:
    """Mount a small tmpfs on `folder` (root only): a job that fills it fills a real disk."""
    if os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SMALL_DISK_MIB}m,mode=0755", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def simulated_agent(
    paika: list[str], name: str, spec: str, port: int, state_dir: Path, *, grace_s: float
) -> list[str]:
    """`paika agent --simulate` on a loopback port, as a bench's rig runs it: its jobs are
    the bench's own shell scripts, also as root."""
    return [
        *paika,
        *("agent", "--simulate", spec, "--port", str(port), "--host", "127.0.0.1"),
        *("--state-dir", str(state_dir), "--name", name),
        *("--allow-root-jobs", "--grace-s", f"{grace_s:g}"),
    ]


def start_world(world: World, count: int, spec: str) -> None:
    paika = paika_argv()
    for i in range(count):
        name = f"fault-{i + 1}"
        state_dir = world.folder / name
        state_dir.mkdir()
        on_small_disk = world.exhaustion and small_disk(state_dir)
        if on_small_disk:
            world.mounts.append(state_dir)
            state_dir = state_dir / "state"  # its reports folder is state-reports beside it
            state_dir.mkdir()
        port = free_port()
        argv = simulated_agent(paika, name, spec, port, state_dir, grace_s=5)
        if on_small_disk:  # the defaults (a 512 MiB reserve) are for a real host's disk
            argv += ["--disk-reserve-mib", str(SMALL_DISK_MIB // 8)]
            argv += ["--log-max-mib", str(SMALL_DISK_MIB // 8)]
            argv += ["--keep-ended-s", "5"]  # acknowledged runs (and their logs) go soon
        agent = AgentProc(name, argv, world.env, world.folder / f"{name}.log", port=port)
        agent.state_dir = state_dir
        agent.start()
        world.agents.append(agent)
    for agent in world.agents:
        wait_for(functools.partial(_answers, agent), 30, f"{agent.name} to answer")
    status, reply = world.paika(f"admin member add <@{OWNER}> team=vision")
    assert status == 0, reply
    for agent in world.agents:
        status, reply = world.paika(f"admin host add {agent.name} url={agent.url}")
        assert status == 0, reply
    world.up = Proc("paika up", [*paika, "up"], world.env, world.folder / "paika-up.log")
    world.up.start()


def _answers(agent: AgentProc) -> bool:
    try:
        with AgentClient(agent.url, TOKEN, timeout=2) as client:
            client.health()
        return True
    except AgentError:
        return False


def wait_for(done: Callable[[], bool], seconds: float, what: str) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(0.5)
    say(f"gave up waiting for {what} after {seconds:g} s")
    return False


def submit_jobs(
    world: World, count: int, rng: random.Random, seconds: tuple[float, float]
) -> list[int]:
    """Submit the jobs with `paika cmd`, a few at a time; returns their ids."""

    modes = ["plain"] * 3
    if world.exhaustion:
        modes += ["reports"] + (["disk"] if world.mounts else [])
    drawn = [
        (rng.uniform(*seconds), rng.choice((1, 1, 2)), rng.choice(modes)) for _ in range(count)
    ]

    def one(i: int) -> int | None:
        secs, gpus, mode = drawn[i]
        extra = f" {sys.executable} {world.flood_script}" if mode == "reports" else ""
        status, reply = world.paika(
            f"submit name=fault-{i} gpus={gpus} hours=1 priority=normal data=ready"
            f' cmd="sh {world.job_script} {world.run_log} {secs:.1f} {mode}{extra}"',
            OWNER,
        )
        if status != 0 or not reply.startswith("Queued job #"):
            say(f"submit {i} failed: {reply}")
            return None
        return int(reply.split("#", 1)[1].split()[0])

    with ThreadPoolExecutor(max_workers=4) as pool:
        ids = [i for i in pool.map(one, range(count)) if i is not None]
    return ids


# ---------------------------------------------------------------- the audit


def read_run_log(path: Path) -> dict[str, list[tuple[str, float]]]:
    """Run id → its (event, time) lines: start, end, stop."""
    runs: dict[str, list[tuple[str, float]]] = {}
    if not path.exists():
        return runs
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 3:
            with suppress(ValueError):
                runs.setdefault(parts[1], []).append((parts[0], float(parts[2])))
    return runs


def agent_runs(world: World) -> dict[str, list[JobInfo]]:
    found: dict[str, list[JobInfo]] = {}
    for agent in world.agents:
        try:
            with AgentClient(agent.url, TOKEN, timeout=10) as client:
                found[agent.name] = client.jobs()
        except AgentError as exc:
            say(f"{agent.name} did not answer the audit: {exc}")
            found[agent.name] = []
    return found


def audit(world: World, submitted: list[int]) -> dict[str, Any]:
    assert world.engine is not None
    with Session(world.engine) as session:
        jobs = {job.id or 0: job for job in session.exec(select(Job))}
        leaks = job_queries.allocation_leaks(session=session)
        doubles = cluster_queries.overbooked_gpus(session=session)
        repaired = session.exec(
            select(func.count()).where(AuditEvent.action == "allocation.leak_closed")
        ).one()
        requeues = session.exec(
            select(func.count()).where(
                col(JobEvent.from_state).in_((JobState.RUNNING, JobState.UNKNOWN)),
                col(JobEvent.to_state).in_((JobState.QUEUED, JobState.WAITING_DATA)),
            )
        ).one()
        unknowns = session.exec(
            select(func.count()).where(JobEvent.to_state == JobState.UNKNOWN)
        ).one()

    lost = sorted(
        i
        for i, j in jobs.items()
        if j.state == JobState.FAILED and (j.state_reason or "").startswith("lost")
    )
    vanished = sorted(set(submitted) - set(jobs))

    # What ran, by the run log (the jobs' own word) and by the agents.
    log = read_run_log(world.run_log)
    runs = agent_runs(world)
    twice: dict[int, list[str]] = {}

    def flag(job_id: int, why: str) -> None:
        twice.setdefault(job_id, []).append(why)

    launched_on: dict[str, list[str]] = {}
    agent_spans: dict[str, tuple[float, float | None]] = {}
    still_running: list[str] = []
    for name, infos in runs.items():
        for info in infos:
            if info.pid is not None:
                launched_on.setdefault(info.job_id, []).append(name)
                end = info.ended_at.timestamp() if info.ended_at else None
                agent_spans[info.job_id] = (info.started_at.timestamp(), end)
            job_id = int(info.job_id.split(".")[0])
            if info.state == "running" and (
                job_id not in jobs or jobs[job_id].state not in ON_HOST_STATES
            ):
                still_running.append(f"{name}:{info.job_id}")
    for run_id, hosts in launched_on.items():
        if len(hosts) > 1:
            flag(int(run_id.split(".")[0]), f"{run_id} launched on {', '.join(hosts)}")
    executed: dict[int, list[tuple[str, float, float]]] = {}
    for run_id, events in log.items():
        job_id, attempt = (int(p) for p in run_id.split("."))
        starts = [t for kind, t in events if kind == "start"]
        if len(starts) > 1:
            flag(job_id, f"{run_id} started {len(starts)} times")
        ends = [t for kind, t in events if kind in ("end", "stop")]
        agent_end = agent_spans.get(run_id, (0.0, None))[1]
        end = max(ends) if ends else agent_end if agent_end is not None else float("inf")
        executed.setdefault(job_id, []).append((run_id, min(starts or [0.0]), end))
        job = jobs.get(job_id)
        if job is None or attempt > job.attempts:
            flag(job_id, f"{run_id} ran but the job has {job.attempts if job else 0} attempts")
    for job_id, spans in executed.items():
        job = jobs.get(job_id)
        if job is not None and len(spans) > job.attempts:
            flag(job_id, f"{len(spans)} runs for {job.attempts} attempts")
        spans.sort(key=lambda span: span[1])
        for (run_a, _, end_a), (run_b, start_b, _) in zip(spans, spans[1:], strict=False):
            if start_b < end_a:
                flag(job_id, f"{run_a} and {run_b} ran at the same time")
    for job_id in {int(r.split(".")[0]) for r in launched_on}:
        per_job = [r for r in launched_on if int(r.split(".")[0]) == job_id]
        job = jobs.get(job_id)
        if job is not None and len(per_job) > job.attempts:
            flag(job_id, f"agents launched {len(per_job)} runs for {job.attempts} attempts")

    not_finished = sorted(i for i, j in jobs.items() if j.state not in TERMINAL_STATES)
    failed_why = Counter(
        (j.state_reason or "?").split(":")[0] for j in jobs.values() if j.state == JobState.FAILED
    )
    return {
        "jobs": len(jobs),
        "lost": len(lost) + len(vanished),
        "lost_jobs": lost,
        "vanished_jobs": vanished,
        "run_twice": len(twice),
        "run_twice_why": {str(k): v for k, v in sorted(twice.items())},
        "leaked": len(leaks) + len(doubles) + len(still_running),
        "leaked_allocations": [list(row) for row in leaks],
        "gpus_doubly_allocated": [list(row) for row in doubles],
        "runs_left_running": still_running,
        "leaks_repaired_by_cycle": int(repaired),
        "not_finished": len(not_finished),
        "not_finished_jobs": {i: jobs[i].state for i in not_finished},
        "succeeded": sum(j.state == JobState.SUCCEEDED for j in jobs.values()),
        "failed": sum(j.state == JobState.FAILED for j in jobs.values()),
        "failed_why": dict(failed_why),
        "cancelled": sum(j.state == JobState.CANCELLED for j in jobs.values()),
        "attempts": sum(j.attempts for j in jobs.values()),
        "requeued_attempts": int(requeues),
        "went_unknown": int(unknowns),
        "runs_executed": sum(len(v) for v in executed.values()),
        "runs_launched_by_agents": len(launched_on),
    }


def kill_job_processes(world: World) -> int:
    """Kill any job process of this run still alive (they are detached from the agents)."""
    marker = str(world.job_script).encode()
    killed = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with suppress(OSError):
            if marker in (proc / "cmdline").read_bytes():
                with suppress(ProcessLookupError, PermissionError):
                    os.killpg(int(proc.name), signal.SIGKILL)
                with suppress(ProcessLookupError, PermissionError):
                    os.kill(int(proc.name), signal.SIGKILL)
                killed += 1
    return killed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--minutes", type=float, default=3.0, help="how long faults are injected")
    parser.add_argument(
        "--database", help="SQLAlchemy URL of a PostgreSQL/MySQL server (default: SQLite)"
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--spec", default="2xA100-80GB,2xT4-16GB", help="each agent's GPUs")
    parser.add_argument("--job-seconds", default="10:40", help="how long a job sleeps: LOW:HIGH")
    parser.add_argument("--cancels", type=int, default=6, help="jobs cancelled during the faults")
    parser.add_argument("--cycle-seconds", type=float, default=2.0)
    parser.add_argument("--settle-minutes", type=float, default=5.0)
    parser.add_argument(
        "--exhaustion",
        action="store_true",
        help="also flood connections, reports and (as root) the agents' disks",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (and database)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    low, _, high = args.job_seconds.partition(":")
    seconds = (float(low), float(high or low))

    for signum in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C or a kill: clean up, then leave
        signal.signal(signum, _interrupted)
    folder = Path(tempfile.mkdtemp(prefix="paika-fault-"))
    say(f"seed {seed}; everything under {folder}")
    started = time.monotonic()
    try:
        with database(args.database, folder, args.keep) as url:
            policy = write_policy(folder, args.cycle_seconds)
            env = child_env(url, policy, folder / "paika-data")
            world = World(folder, url, env, exhaustion=args.exhaustion)
            world.up_port = free_port()
            env["PAIKA_HTTP_PORT"] = str(world.up_port)
            if args.exhaustion:
                raise_file_limit(FLOOD_CONNECTIONS * 2 + 256)
            try:
                figures = run(world, args, rng, seconds)
            finally:
                shut_down(world)
    except KeyboardInterrupt:
        say("interrupted: every process it started is stopped")
        return 130
    finally:
        if args.keep:
            say(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    figures.update(
        seed=seed,
        database=make_url(normalize_url(url)).get_backend_name(),
        agents=args.agents,
        minutes=args.minutes,
        wall_s=round(time.monotonic() - started, 1),
    )
    report(figures)
    bad = figures["lost"] or figures["run_twice"] or figures["leaked"]
    return 1 if bad else 0


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run(
    world: World, args: argparse.Namespace, rng: random.Random, seconds: tuple[float, float]
) -> dict[str, Any]:
    """Start everything, inject faults, restore, settle, audit."""
    world.job_script.write_text(JOB_SCRIPT, encoding="utf-8")
    world.flood_script.write_text(REPORT_FLOOD, encoding="utf-8")
    world.engine = make_engine(world.database_url)
    status, reply = world.paika("help")  # creates and migrates the database
    assert status == 0, reply
    start_world(world, args.agents, args.spec)
    say(f"{args.agents} agents ({args.spec}) and paika up started")
    submitted = submit_jobs(world, args.jobs, rng, seconds)
    say(f"submitted {len(submitted)} jobs")
    chaos = Chaos(
        rng, world, job_ids=submitted, cancels_left=args.cancels, exhaustion=args.exhaustion
    )
    chaos_end = time.monotonic() + args.minutes * 60
    while time.monotonic() < chaos_end:
        time.sleep(min(rng.uniform(2, 8), max(0.0, chaos_end - time.monotonic())))
        chaos.run_due()
        if time.monotonic() < chaos_end:
            chaos.strike()
    say("faults over: every process restored")
    chaos.run_due(everything=True)
    for proc in world.all_processes():
        if not proc.alive:
            proc.start()
    engine = world.engine

    def settled() -> bool:
        with Session(engine) as session:
            left = session.exec(
                select(func.count()).where(col(Job.state).not_in(TERMINAL_STATES))
            ).one()
        return int(left) == 0

    wait_for(settled, args.settle_minutes * 60, "every job to end")
    time.sleep(args.cycle_seconds * 3 + 2)  # a few more cycles: orphans are stopped
    figures = audit(world, submitted)
    figures["faults"] = dict(chaos.counts)
    return figures


def shut_down(world: World) -> None:
    """Stop every process this run started (agents, paika up, and any job still alive)."""
    for proc in world.all_processes():
        proc.stop()
    killed = kill_job_processes(world)
    if killed:
        say(f"killed {killed} job processes still alive")
    for mount in world.mounts:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)
    if world.engine is not None:
        world.engine.dispose()


def report(figures: dict[str, Any]) -> None:
    print()
    print(
        f"fault injection on {figures['database']}: {figures['agents']} agents, "
        f"{figures['minutes']:g} min of faults {figures['faults']}, {figures['wall_s']} s in all"
    )
    print(f"  jobs                 {figures['jobs']}")
    print(
        f"  succeeded / failed / cancelled   {figures['succeeded']} / {figures['failed']} / {figures['cancelled']}   (failed: {figures['failed_why']})"
    )
    print(
        f"  attempts             {figures['attempts']} (requeued {figures['requeued_attempts']}, went unknown {figures['went_unknown']})"
    )
    print(
        f"  runs executed        {figures['runs_executed']} by the run log, {figures['runs_launched_by_agents']} launched by agents"
    )
    print(
        f"  lost                 {figures['lost']}  {figures['lost_jobs'] or ''}{figures['vanished_jobs'] or ''}"
    )
    print(f"  run twice            {figures['run_twice']}  {figures['run_twice_why'] or ''}")
    print(
        f"  leaked               {figures['leaked']}  allocations {figures['leaked_allocations']}, doubly held GPUs {figures['gpus_doubly_allocated']}, runs left running {figures['runs_left_running']}"
    )
    print(f"  leaks the cycle repaired   {figures['leaks_repaired_by_cycle']}")
    print(f"  not finished         {figures['not_finished']}  {figures['not_finished_jobs'] or ''}")
    print(json.dumps(figures, default=str))


if __name__ == "__main__":
    sys.exit(main())
