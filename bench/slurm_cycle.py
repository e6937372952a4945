"""paika's cycle driving a real Slurm: 1,000 queued jobs on a one-node Slurm with many fake GPUs.

Start a Slurm of its own beside the test one (its own dir and ports; no slurmdbd), run the
benchmark against it, stop it afterwards:

    SLURM_DIR=/tmp/paika-slurm-bench SLURM_CLUSTER=paika-bench SLURMCTLD_PORT=6827 \\
        SLURMD_PORT=6828 A100_GPUS=128 T4_GPUS=2 NODE_CPUS=256 NODE_MEMORY_MB=64000 \\
        tests/slurm/one-node.sh
    .venv/bin/python bench/slurm_cycle.py --conf /tmp/paika-slurm-bench/etc/slurm.conf \\
        [--jobs 1000] [--sleep 20] [--steady 5] [--anchor 1000]
    SLURM_DIR=/tmp/paika-slurm-bench tests/slurm/one-node-stop.sh

`--jobs` ready paika jobs (one A100 each, `sleep --sleep` seconds) in a SQLite database are
driven through paika's real cycle (the Slurm pool's poller and dispatcher, as `paika up`
builds them) until every one has ended. Every Slurm client call is timed where paika runs
it (`SlurmCommands._answer`, the one seam where a client runs), by command: sbatch, squeue,
sinfo, scancel, sacct. Each cycle's time is split into those calls and paika's own part
(the rest: database, reconciling, the policy, building submissions). Measured:
- every cycle until all jobs ended: starts per second over the whole run, and paika's own
  part against the Slurm calls' time (goal: paika adds <= 20% to the Slurm calls' time);
- `--steady` cycles at 1,000 jobs right after the first start cycle, when every card is
  held and the rest wait (a cycle that reads the pool, reconciles every run and plans the
  whole queue, starting nothing; goal: < 2 s);
- the anchor: Slurm's own sbatch rate, `--anchor` plain `sbatch --wrap` submissions one
  after the other in the same run (held, so that they take no card; cancelled afterwards).
A start cycle's length is bounded by sbatch: each start is one `sbatch` (whether a start
sent again is there already is read from the cycle's own `squeue --json`, no call of its
own), so paika's start rate is at most about the anchor's.

Prints its figures and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from scheduler.app import Paika
from scheduler.clock import SystemClock
from scheduler.config import PolicyConfig
from scheduler.cycle import Cycle
from scheduler.dispatch import AgentDispatcher
from scheduler.hosts.executor import AgentsExecutor
from scheduler.hosts.poll import Target
from scheduler.hosts.report import HostReport
from scheduler.notices.events import RecordingObserver
from scheduler.pools import Pools
from scheduler.settings import Settings
from scheduler.slurm.commands import SlurmCommands
from storage.models import Job, JobState

NODE = "localhost"
ANCHOR_NAME = "bench-anchor"
ENDED = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


class SlurmCalls:
    """Times every Slurm client call paika makes, by command, while installed. The cycle
    sends its starts in parallel: the time a cycle spends in Slurm is the wall time while
    at least one call was under way, not the calls' sum."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)
        self.spans: list[tuple[float, float]] = []
        self._lock = threading.Lock()
        self._answer = SlurmCommands._answer

    def install(self) -> None:
        timed, original = self, self._answer

        def answer(
            commands: SlurmCommands, args: list[str], *, stdin: str | None = None
        ) -> tuple[str, str]:
            began = time.perf_counter()
            try:
                return original(commands, args, stdin=stdin)
            finally:
                timed.add(args, began, time.perf_counter())

        SlurmCommands._answer = answer  # type: ignore[method-assign, assignment]

    def add(self, args: list[str], began: float, ended: float) -> None:
        name = " ".join(args[:2]) if args[0] == "scontrol" else args[0]
        with self._lock:
            self.seconds[name] += ended - began
            self.counts[name] += 1
            self.spans.append((began, ended))

    def uninstall(self) -> None:
        SlurmCommands._answer = self._answer  # type: ignore[method-assign]

    def wall_since(self, since: float) -> float:
        """Seconds since `since` during which at least one call was under way."""
        with self._lock:
            spans = sorted(span for span in self.spans if span[0] >= since)
        covered, reach = 0.0, since
        for began, ended in spans:
            began = max(began, reach)
            if ended > began:
                covered += ended - began
                reach = ended
        return covered

    def snapshot(self) -> tuple[dict[str, float], dict[str, int]]:
        return dict(self.seconds), dict(self.counts)


def no_agents(targets: Sequence[Target]) -> Mapping[str, HostReport]:
    raise AssertionError(f"no host here has an agent: {targets}")


def bench_paika(folder: Path, conf: str, jobs: int, sleep: float) -> Paika:
    """paika on SQLite with the Slurm node as its one host (a Slurm pool) and `jobs` ready."""
    settings = Settings(
        data_dir=folder, database_url=f"sqlite:///{folder / 'paika.db'}", admins=("UADMIN",)
    )
    paika = Paika.start(settings, clock=SystemClock())
    raw = paika.policy.model_dump(mode="json", exclude_unset=True)
    raw["scheduler"] = {**raw.get("scheduler", {}), "headroom": {}}
    raw["pools"] = {
        "cluster": {
            "executor": "slurm",
            "hosts": [NODE],
            "slurm": {
                "partition": "debug",
                "gres": {"A100-80GB": "a100", "T4-16GB": "t4"},
                "min_time_minutes": 10,
                "log_path": "/dev/null",
                "workdir": "/tmp",
                # A run's own: Slurm keeps an earlier run's job names (MinJobAge), and paika
                # never submits a name Slurm still knows.
                "job_name_prefix": f"bench{uuid.uuid4().hex[:6]}-",
                "conf": conf,
            },
        }
    }
    paika.policy = PolicyConfig.model_validate(raw)
    for text in (
        "admin member add <@UALICE> team=vision",
        "admin account set <@UALICE> account=nobody force=yes",
        f"admin host add {NODE} url=http://{NODE}:8700",
    ):
        assert paika.run(text, "UADMIN").ok, text
    for index in range(jobs):
        reply = paika.run(
            f"submit name=j{index} gpus=1 hours=1 priority=normal type=A100-80GB data=ready "
            f'cmd="sleep {sleep:g}"',
            "UALICE",
        )
        assert reply.ok, reply.text
    return paika


def slurm_cycle(paika: Paika) -> Cycle:
    """The cycle as `paika up` builds it for a policy whose only pool runs on Slurm."""
    policy = paika.policy
    pools = Pools(policy, AgentsExecutor(no_agents, AgentDispatcher("no-agent-here", timeout=2.0)))
    return Cycle(paika.engine, policy, paika.clock, pools, RecordingObserver(), pools)


def timed_cycle(cycle: Cycle, calls: SlurmCalls) -> dict[str, Any]:
    """One cycle: its time, the part of it spent in Slurm calls, what it started and its
    steps' times."""
    began = time.perf_counter()
    result = cycle.run_once()
    total = time.perf_counter() - began
    slurm = calls.wall_since(began)
    if result.errors:
        print("cycle errors:", result.errors)
    return {
        "total": total,
        "slurm": slurm,
        "own": total - slurm,
        "started": len(result.started),
        "steps": dict(result.timings),
    }


def ended(paika: Paika) -> int:
    with Session(paika.engine) as session:
        query = select(func.count()).select_from(Job).where(col(Job.state).in_(ENDED))
        return int(session.exec(query).one())


def drive(
    paika: Paika, calls: SlurmCalls, jobs: int, steady: int, timeout: float
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float]:
    """Cycles until every job ended: every cycle's figures, the steady cycles' (right after
    the first start cycle) and the whole run's wall time."""
    cycle = slurm_cycle(paika)
    cycles: list[dict[str, Any]] = []
    steady_cycles: list[dict[str, Any]] = []
    began = time.perf_counter()
    deadline = time.monotonic() + timeout
    try:
        while ended(paika) < jobs:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {ended(paika)} of {jobs} jobs ended in {timeout:g} s")
            cycles.append(timed_cycle(cycle, calls))
            if len(cycles) == 1:
                # The first start cycle filled every card: the queue waits, the runs go on.
                steady_cycles = [timed_cycle(cycle, calls) for _ in range(steady)]
            if cycles[-1]["started"] == 0:
                time.sleep(0.2)  # nothing freed yet: give the runs time to end
    finally:
        cycle.close()
    return cycles, steady_cycles, time.perf_counter() - began


def sbatch_rate(conf: str, count: int) -> float:
    """Plain `sbatch --wrap` submissions per second, one after the other (held, then
    cancelled: they take no card and leave nothing behind)."""
    env = {**os.environ, "SLURM_CONF": conf}
    began = time.perf_counter()
    for _ in range(count):
        subprocess.run(
            ["sbatch", "--parsable", "--hold", f"--job-name={ANCHOR_NAME}", "--wrap", "true"],
            capture_output=True,
            env=env,
            timeout=60,
            check=True,
        )
    rate = count / (time.perf_counter() - began)
    subprocess.run(["scancel", f"--name={ANCHOR_NAME}"], env=env, timeout=60, check=True)
    return rate


def figures_of(
    args: argparse.Namespace,
    cycles: list[dict[str, Any]],
    steady: list[dict[str, Any]],
    wall: float,
    calls: SlurmCalls,
    anchor_rate: float,
) -> dict[str, Any]:
    seconds, counts = calls.snapshot()
    slurm = sum(c["slurm"] for c in cycles + steady)
    own = sum(c["own"] for c in cycles + steady)
    started = sum(c["started"] for c in cycles + steady)
    start_cycles = [c for c in cycles + steady if c["started"]]
    steady_total = statistics.median(c["total"] for c in steady) if steady else float("nan")
    start_time = sum(c["total"] for c in start_cycles)
    start_rate = started / start_time if start_time else 0.0
    steps = sorted({step for c in steady for step in c["steps"]})
    return {
        "jobs": args.jobs,
        "gpus": args.gpus,
        "job_sleep_s": args.sleep,
        "cycles": len(cycles),
        "start_cycles": len(start_cycles),
        "started": started,
        "run_wall_s": round(wall, 1),
        "start_cycles_s": round(start_time, 1),
        "starts_per_s": round(start_rate, 1),
        "sbatch_anchor_per_s": round(anchor_rate, 1),
        "starts_vs_sbatch_anchor": round(start_rate / anchor_rate, 2),
        "first_cycle_ms": round(cycles[0]["total"] * 1000, 1),
        "first_cycle_slurm_ms": round(cycles[0]["slurm"] * 1000, 1),
        "first_cycle_own_ms": round(cycles[0]["own"] * 1000, 1),
        "steady_cycles": len(steady),
        "steady_cycles_started": sum(c["started"] for c in steady),
        "steady_cycle_ms_median": round(steady_total * 1000, 1),
        "steady_cycle_slurm_ms_median": _ms_median(steady, "slurm"),
        "steady_cycle_own_ms_median": _ms_median(steady, "own"),
        "steady_cycle_step_ms_median": {
            step: round(statistics.median(c["steps"].get(step, 0.0) for c in steady) * 1000, 1)
            for step in steps
        },
        "cycle_ms_median": _ms_median(cycles, "total"),
        "cycle_ms_max": round(max(c["total"] for c in cycles) * 1000, 1),
        "slurm_calls_s": round(slurm, 2),
        "paika_own_s": round(own, 2),
        "paika_adds_pct": round(100 * own / slurm, 1),
        "slurm_calls_by_command_s": {k: round(v, 2) for k, v in sorted(seconds.items())},
        "slurm_calls_by_command_n": dict(sorted(counts.items())),
        "goal_paika_adds_le_20pct": own <= 0.2 * slurm,
        "goal_cycle_at_1000_jobs_lt_2s": steady_total < 2.0,
    }


def _ms_median(cycles: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(c[key] for c in cycles) * 1000, 1) if cycles else float("nan")


def node_gpus(conf: str) -> int:
    """The a100 cards the bench node declares."""
    out = subprocess.run(
        ["sinfo", "--noheader", "--Node", "--format=%G"],
        capture_output=True,
        text=True,
        env={**os.environ, "SLURM_CONF": conf},
        timeout=30,
        check=True,
    ).stdout
    for part in out.strip().split(","):
        if part.startswith("gpu:a100:"):
            return int(part.split(":")[2].split("(")[0])
    raise SystemExit(f"the Slurm at {conf} declares no a100 cards: {out!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conf", default="/tmp/paika-slurm-bench/etc/slurm.conf")
    parser.add_argument("--jobs", type=int, default=1000)
    # Longer than a start cycle: the steady cycles after the first find every card held.
    parser.add_argument("--sleep", type=float, default=20.0, help="each job's run, seconds")
    parser.add_argument("--steady", type=int, default=5, help="cycles timed at a full node")
    parser.add_argument("--anchor", type=int, default=None, help="plain sbatch (default: --jobs)")
    parser.add_argument("--timeout", type=float, default=1800.0)
    args = parser.parse_args()
    args.gpus = node_gpus(args.conf)
    folder = Path(tempfile.mkdtemp(prefix="paika-bench-slurm-"))
    began = time.perf_counter()
    paika = bench_paika(folder, args.conf, args.jobs, args.sleep)
    print(f"queued {args.jobs} jobs in {time.perf_counter() - began:.1f} s")
    calls = SlurmCalls()
    calls.install()
    try:
        cycles, steady, wall = drive(paika, calls, args.jobs, args.steady, args.timeout)
    finally:
        calls.uninstall()
    paika.engine.dispose()
    anchor = sbatch_rate(args.conf, args.anchor or args.jobs)
    _print(figures_of(args, cycles, steady, wall, calls, anchor))


def _print(figures: dict[str, Any]) -> None:
    width = max(len(key) for key in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    for goal in ("goal_paika_adds_le_20pct", "goal_cycle_at_1000_jobs_lt_2s"):
        print(f"{goal}: {'MET' if figures[goal] else 'MISSED'}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
