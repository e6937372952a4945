"""Soak: a month of a busy team's jobs through a real `paika up`, and whether paika is as fast
and as small at the end as at the start.

    .venv/bin/python bench/soak.py --database postgresql://postgres@127.0.0.1/postgres
        [--agents 32] [--spec 4xA100-80GB,4xT4-16GB] [--jobs 20000] [--job-seconds 0.2:2]
        [--report-lines 20] [--log-kib 32] [--cycle-seconds 1] [--window 1000] [--keep]

Everything lives in a temporary folder (and a fresh database on the server named, dropped
after; SQLite without --database). It starts `--agents` real `paika agent --simulate`
processes and `paika up` (console mode, with its HTTP side for /metrics and reports), and
keeps the queue fed from this process (in-process `submit`s on the same database, several
owners and teams, 1 to 8 GPUs) until `--jobs` jobs have been submitted. Each job writes
`--report-lines` report lines to its report file and `--log-kib` KiB to its log, sleeps a
little and exits (one in twenty fails). At a month of a busy team's pace (a job every ~2
minutes on 256 GPUs) 20,000 jobs are a month; here they run back to back.

Measured in two windows of `--window` ended jobs — the first after a warm-up of one window,
the last before the end — and printed side by side:
- jobs ended a second; cycle phases (p50/p99 from /metrics' histograms, per phase, over the
  window), their mean sum a cycle, and the cycles' time per ended job (the figure to compare:
  a saturated machine runs fewer, longer cycles that each settle and start more jobs);
- resident memory of `paika up` and of all agents together (MiB);
- the database's size and the rows of its biggest tables (the ledger keeps every run);
- the agents' state and report folders on disk (MiB), and the largest whole status answer
  (GET /v1/status without a cursor, what a scheduler older than the agents would read;
  paika polls with a cursor and gets the changes only), bytes and seconds. Agents keep an
  acknowledged run `--keep-ended-s` (an hour) before they forget it, so a soak shorter than
  that sees this grow up to an hour's runs.
A figure that grows with history between the windows is what this bench is for. The last line
is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, inspect, text
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, col, select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from fault_injection import (  # noqa: E402
    ADMIN,
    TOKEN,
    AgentProc,
    Proc,
    World,
    child_env,
    database,
    free_port,
    kill_job_processes,
    paika_argv,
    say,
    simulated_agent,
    wait_for,
    write_policy,
)

from scheduler.app import Paika  # noqa: E402
from scheduler.clock import SystemClock  # noqa: E402
from scheduler.settings import Settings  # noqa: E402
from storage.db import make_engine, normalize_url  # noqa: E402
from storage.models import TERMINAL_STATES, Job  # noqa: E402

OWNERS = {f"USOAK{i:02d}": ("vision", "nlp")[i % 2] for i in range(8)}
JOB_SCRIPT = """#!/bin/sh
# One soak job: report lines, a log, a short sleep, an exit status.
lines="$1"; kib="$2"; seconds="$3"; status="$4"
i=0
while [ "$i" -lt "$lines" ]; do
  echo "metric=loss:0.$i metric=step:$i" >> "$PAIKA_REPORT_FILE"
  i=$((i + 1))
done
head -c "$((kib * 1024))" /dev/zero | tr '\\0' 'x' | fold -w 100
sleep "$seconds"
exit "$status"
"""
METRICS_PHASE = "paika_cycle_phase_seconds"


# ---------------------------------------------------------------- measuring


def rss_mib(pid: int | None) -> float:
    """Resident memory of a process (MiB), 0 when it is gone."""
    if pid is None:
        return 0.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def folder_mib(path: Path) -> float:
    total = 0
    if path.exists():
        for item in path.rglob("*"):
            try:
                if item.is_file() and not item.is_symlink():
                    total += item.stat().st_size
            except OSError:
                continue
    return total / 2**20


def database_size(engine: Engine) -> tuple[float, dict[str, int]]:
    """The database's size (MiB) and the row counts of its five biggest tables."""
    backend = engine.dialect.name
    with engine.connect() as conn:
        if backend == "postgresql":
            size = conn.execute(text("SELECT pg_database_size(current_database())")).scalar()
        elif backend == "mysql":
            size = conn.execute(
                text(
                    "SELECT SUM(data_length + index_length) FROM information_schema.tables"
                    " WHERE table_schema = DATABASE()"
                )
            ).scalar()
        else:
            database = make_url(str(engine.url)).database or ""
            size = Path(database).stat().st_size if database else 0
        rows = {
            name: int(conn.execute(text(f"SELECT COUNT(*) FROM {name}")).scalar() or 0)
            for name in inspect(engine).get_table_names()
        }
    biggest = dict(sorted(rows.items(), key=lambda item: -item[1])[:6])
    return round(float(size or 0) / 2**20, 1), biggest


def poll_sizes(agents: list[AgentProc]) -> tuple[int, float]:
    """The largest /v1/status answer of the agents (bytes) and the slowest (seconds)."""
    largest, slowest = 0, 0.0
    with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        for agent in agents:
            began = time.perf_counter()
            try:
                answer = client.get(f"{agent.url}/v1/status")
            except httpx.HTTPError:
                continue
            slowest = max(slowest, time.perf_counter() - began)
            largest = max(largest, len(answer.content))
    return largest, round(slowest, 3)


def scrape(url: str) -> dict[str, dict[str, float]]:
    """The cycle-phase histogram from /metrics: phase → {le or 'sum'/'count': value}."""
    try:
        body = httpx.get(f"{url}/metrics", timeout=10).text
    except httpx.HTTPError:
        return {}
    phases: dict[str, dict[str, float]] = {}
    for line in body.splitlines():
        if not line.startswith(METRICS_PHASE):
            continue
        name, _, value = line.rpartition(" ")
        labels = dict(
            part.split("=", 1) for part in name[name.index("{") + 1 : -1].split(",") if "=" in part
        )
        phase = labels.get("phase", "").strip('"')
        key = labels["le"].strip('"') if "le" in labels else name.split("{")[0].rsplit("_", 1)[1]
        if key == "created":
            continue
        phases.setdefault(phase, {})[key] = float(value)
    return phases


def quantile(buckets: dict[str, float], q: float) -> float | None:
    """The upper bound of the bucket holding the q-quantile (a histogram's resolution)."""
    bounds = sorted(
        ((float(le), count) for le, count in buckets.items() if le not in ("sum", "count")),
        key=lambda item: item[0],
    )
    total = bounds[-1][1] if bounds else 0
    if total <= 0:
        return None
    for bound, count in bounds:
        if count >= q * total:
            return bound
    return None


def phase_figures(
    before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]
) -> dict[str, Any]:
    """Per phase over a window: p50, p99 (bucket bounds, s) and mean (ms); and the cycles."""
    figures: dict[str, Any] = {}
    cycles = 0.0
    mean_sum = 0.0
    for phase, values in after.items():
        old = before.get(phase, {})
        delta = {key: value - old.get(key, 0.0) for key, value in values.items()}
        count = delta.get("count", 0.0)
        if count <= 0:
            continue
        cycles = max(cycles, count)
        mean = delta.get("sum", 0.0) / count
        mean_sum += mean
        figures[phase] = {
            "p50_s": quantile(delta, 0.5),
            "p99_s": quantile(delta, 0.99),
            "mean_ms": round(mean * 1000, 1),
        }
    total = sum(
        values.get("sum", 0.0) - before.get(phase, {}).get("sum", 0.0)
        for phase, values in after.items()
    )
    return {
        "cycles": int(cycles),
        "cycle_mean_ms": round(mean_sum * 1000, 1),
        "cycle_s_total": round(total, 1),
        "phases": figures,
    }


@dataclass
class Window:
    name: str
    ended_from: int
    began: float = 0.0
    metrics_before: dict[str, dict[str, float]] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)


def snapshot(world: World, engine: Engine) -> dict[str, Any]:
    assert world.up is not None and world.up.popen is not None
    size, tables = database_size(engine)
    largest, slowest = poll_sizes(world.agents)
    return {
        "paika_up_rss_mib": round(rss_mib(world.up.popen.pid), 1),
        "agents_rss_mib": round(
            sum(rss_mib(a.popen.pid if a.popen else None) for a in world.agents), 1
        ),
        "database_mib": size,
        "rows": tables,
        "agent_disk_mib": round(
            sum(
                folder_mib(a.state_dir) + folder_mib(Path(f"{a.state_dir}-reports"))
                for a in world.agents
            ),
            1,
        ),
        "largest_poll_bytes": largest,
        "slowest_poll_s": slowest,
    }


# ---------------------------------------------------------------- the work


def ended(engine: Engine) -> int:
    with Session(engine) as session:
        return int(
            session.exec(select(func.count()).where(col(Job.state).in_(TERMINAL_STATES))).one()
        )


class Feeder(threading.Thread):
    """Keeps about `backlog` jobs waiting until `total` have been submitted."""

    def __init__(self, paika: Paika, args: argparse.Namespace, script: Path, backlog: int) -> None:
        super().__init__(name="soak-feeder", daemon=True)
        self.paika, self.args, self.script, self.backlog = paika, args, script, backlog
        self.rng = random.Random(args.seed)
        self.submitted = 0
        self.refused: Counter[str] = Counter()
        self.stop = threading.Event()

    def waiting(self) -> int:
        with Session(self.paika.engine) as session:
            return int(
                session.exec(
                    select(func.count()).where(col(Job.state).in_(("queued", "waiting_data")))
                ).one()
            )

    def run(self) -> None:
        low, _, high = self.args.job_seconds.partition(":")
        owners = list(OWNERS)
        while not self.stop.is_set() and self.submitted < self.args.jobs:
            room = self.backlog - self.waiting()
            for _ in range(max(0, min(room, self.args.jobs - self.submitted))):
                if self.stop.is_set():
                    return
                seconds = self.rng.uniform(float(low), float(high or low))
                gpus = self.rng.choice((1, 1, 1, 1, 2, 2, 4, 8))
                hours = max(0.01, round(gpus * seconds * 3 / 3600, 2))
                status = 1 if self.rng.random() < 0.05 else 0
                reply = self.paika.run(
                    f"submit name=soak-{self.submitted} gpus={gpus} hours={hours}"
                    f" priority={self.rng.choice(('normal', 'normal', 'idle'))} data=ready"
                    f' cmd="sh {self.script} {self.args.report_lines} {self.args.log_kib}'
                    f' {seconds:.2f} {status}"',
                    self.rng.choice(owners),
                )
                if not reply.ok:
                    self.refused[reply.text.splitlines()[0][:60]] += 1
                self.submitted += 1
            self.stop.wait(0.5)


def start_agents(world: World, count: int, spec: str) -> None:
    paika = paika_argv()
    for i in range(count):
        name = f"soak-{i + 1:02d}"
        state_dir = world.folder / name
        state_dir.mkdir()
        port = free_port()
        argv = simulated_agent(paika, name, spec, port, state_dir, grace_s=2)
        agent = AgentProc(name, argv, world.env, world.folder / f"{name}.log", port=port)
        agent.state_dir = state_dir
        agent.start()
        world.agents.append(agent)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--database", help="SQLAlchemy URL of a PostgreSQL/MySQL server")
    parser.add_argument("--agents", type=int, default=32)
    parser.add_argument("--spec", default="4xA100-80GB,4xT4-16GB", help="each agent's GPUs")
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--job-seconds", default="0.2:2", help="how long a job sleeps: LOW:HIGH")
    parser.add_argument("--report-lines", type=int, default=20)
    parser.add_argument("--log-kib", type=int, default=32)
    parser.add_argument("--cycle-seconds", type=float, default=1.0)
    parser.add_argument("--window", type=int, default=1000, help="ended jobs a window measures")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (and database)")
    args = parser.parse_args(argv)
    if args.jobs < 4 * args.window:
        parser.error("--jobs must be at least 4 windows (a warm-up, two windows, a gap)")
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _interrupted)
    folder = Path(tempfile.mkdtemp(prefix="paika-soak-"))
    say(f"everything under {folder}")
    began = time.monotonic()
    figures: dict[str, Any] = {}
    try:
        with database(args.database, folder, args.keep) as url:
            policy = write_policy(folder, args.cycle_seconds)
            env = child_env(url, policy, folder / "paika-data")
            port = free_port()
            env.update(PAIKA_HTTP_PORT=str(port), PAIKA_LOG_LEVEL="WARNING")
            world = World(folder, url, env)
            try:
                figures = soak(world, args, url, policy, f"http://127.0.0.1:{port}")
            finally:
                for proc in world.all_processes():
                    proc.stop()
                kill_job_processes(world)
                if world.engine is not None:
                    world.engine.dispose()
    except KeyboardInterrupt:
        say("interrupted: every process it started is stopped")
        return 130
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    figures.update(
        database=make_url(normalize_url(url)).get_backend_name(),
        agents=args.agents,
        spec=args.spec,
        wall_s=round(time.monotonic() - began, 1),
    )
    report(figures)
    return 0


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def soak(
    world: World, args: argparse.Namespace, url: str, policy: Path, up_url: str
) -> dict[str, Any]:
    script = world.folder / "job.sh"
    script.write_text(JOB_SCRIPT, encoding="utf-8")
    settings = Settings(
        data_dir=world.folder / "feeder-data",
        database_url=url,
        config=policy,
        admins=(ADMIN,),
        agent_token=TOKEN,
    )
    paika = Paika.start(settings, clock=SystemClock())
    world.engine = engine = make_engine(url)
    for owner, team in OWNERS.items():
        assert paika.run(f"admin member add <@{owner}> team={team}", ADMIN).ok
    start_agents(world, args.agents, args.spec)
    for agent in world.agents:
        wait_for(lambda a=agent: poll_sizes([a])[0] > 0, 60, f"{agent.name} to answer")
        assert paika.run(f"admin host add {agent.name} url={agent.url}", ADMIN).ok
    world.up = Proc("paika up", [*paika_argv(), "up"], world.env, world.folder / "paika-up.log")
    world.up.start()
    wait_for(lambda: bool(scrape(up_url)) or _answers(up_url), 60, "paika up to serve /metrics")
    gpus = args.agents * sum(
        int(part.split("x")[0]) if "x" in part else 1 for part in args.spec.split(",")
    )
    feeder = Feeder(paika, args, script, backlog=2 * gpus)
    feeder.start()
    say(f"{args.agents} agents ({gpus} GPUs) and paika up started; feeding {args.jobs} jobs")
    windows = [
        Window("first", args.window),
        Window("last", args.jobs - 2 * args.window),
    ]
    figures: dict[str, Any] = {}
    try:
        for window in windows:
            wait_until_ended(engine, window.ended_from, feeder, world)
            window.began = time.monotonic()
            window.metrics_before = scrape(up_url)
            wait_until_ended(engine, window.ended_from + args.window, feeder, world)
            seconds = time.monotonic() - window.began
            phases = phase_figures(window.metrics_before, scrape(up_url))
            window.figures = {
                "ended_per_s": round(args.window / seconds, 1),
                # What the cycles cost per job: comparable between windows, where the cycle
                # mean is not (a saturated machine runs fewer, longer cycles of more jobs).
                "cycle_ms_per_ended_job": round(1000 * phases["cycle_s_total"] / args.window, 1),
                **phases,
                **snapshot(world, engine),
            }
            figures[window.name] = window.figures
            say(f"window {window.name}: {json.dumps(window.figures)}")
    finally:
        feeder.stop.set()
        feeder.join()  # before the database goes: a submit in flight ends first
        paika.engine.dispose()
    figures["submitted"] = feeder.submitted
    figures["refused_submits"] = dict(feeder.refused)
    figures["ended"] = ended(engine)
    return figures


def _answers(up_url: str) -> bool:
    try:
        return httpx.get(f"{up_url}/healthz", timeout=2).status_code < 500
    except httpx.HTTPError:
        return False


def wait_until_ended(engine: Engine, count: int, feeder: Feeder, world: World) -> None:
    """Wait until `count` jobs have ended, saying how far it is every half minute."""
    said = time.monotonic()
    while (done := ended(engine)) < count:
        if not feeder.is_alive() and feeder.submitted < count:
            raise RuntimeError(f"the feeder stopped after {feeder.submitted} submits")
        if world.up is not None and not world.up.alive:
            raise RuntimeError(f"paika up exited: see {world.up.log}")
        if time.monotonic() - said > 30:
            say(f"{done} of {count} jobs ended ({feeder.submitted} submitted)")
            said = time.monotonic()
        time.sleep(1)


def report(figures: dict[str, Any]) -> None:
    first, last = figures.get("first", {}), figures.get("last", {})
    print()
    print(
        f"soak on {figures['database']}: {figures['agents']} agents ({figures['spec']}), "
        f"{figures.get('submitted')} jobs submitted, {figures.get('ended')} ended, "
        f"{figures['wall_s']} s in all"
    )
    rows = (
        ("jobs ended / s", "ended_per_s"),
        ("cycles in the window", "cycles"),
        ("cycle mean (ms, sum of phases)", "cycle_mean_ms"),
        ("cycle time per ended job (ms)", "cycle_ms_per_ended_job"),
        ("paika up RSS (MiB)", "paika_up_rss_mib"),
        ("agents' RSS (MiB, all)", "agents_rss_mib"),
        ("database (MiB)", "database_mib"),
        ("agents' state + reports (MiB)", "agent_disk_mib"),
        ("whole status answer (bytes, no cursor)", "largest_poll_bytes"),
        ("slowest poll (s)", "slowest_poll_s"),
    )
    print(f"  {'':34} {'first window':>14} {'last window':>14}")
    for label, key in rows:
        print(f"  {label:34} {first.get(key, '-')!s:>14} {last.get(key, '-')!s:>14}")
    for phase in sorted(set(first.get("phases", {})) | set(last.get("phases", {}))):
        a = first.get("phases", {}).get(phase, {})
        b = last.get("phases", {}).get(phase, {})
        print(
            f"  phase {phase:28} p99 {a.get('p99_s', '-')!s:>6} s / {b.get('p99_s', '-')!s:>6} s"
            f"   mean {a.get('mean_ms', '-')!s:>7} / {b.get('mean_ms', '-')!s:>7} ms"
        )
    print(f"  rows (first): {first.get('rows')}")
    print(f"  rows (last):  {last.get('rows')}")
    print(json.dumps(figures, default=str))


if __name__ == "__main__":
    sys.exit(main())
