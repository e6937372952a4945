"""`paika demo`: the real service on the embedded default, in accelerated time.

SQLite under ./paika-data/demo, three simulated GPU host agents on loopback ports over real
HTTP, the real cycle under APScheduler, and a mixed workload submitted through the same
`/gpu` grammar Slack uses: core, normal and idle jobs, some whose data arrives later,
different card needs. One real second is `speed` seconds of paika's clock; each job is a
real process that sleeps for its (accelerated) run time. It prints the board as it
changes and a summary at the end.
"""

from __future__ import annotations

import random
import secrets
import shutil
import statistics
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TextIO

import uvicorn
from sqlmodel import Session, col, select

from scheduler.agent.app import build_app
from scheduler.agent.jobs import JobStore
from scheduler.agent.simulated import SimulatedReader
from scheduler.app import Paika, Words, wordless
from scheduler.archive.archiver import Archiver
from scheduler.archive.setup import open_archive
from scheduler.notices.events import RecordingObserver
from scheduler.notices.outbox import Announcer, RecordingAnnouncer
from scheduler.periodic import Periodic
from scheduler.policy.priority_classes import CLASS_NAMES, PriorityClass
from scheduler.runner import agent_cycle
from scheduler.serving import serve_in_thread, stop_server
from scheduler.settings import Settings
from storage.models import (
    Allocation,
    Gpu,
    Host,
    Job,
    JobOutput,
    JobState,
    LedgerEntry,
    OutputSource,
)

ADMIN = "UDEMOADMIN"
HOSTS = (("gpu-a", "4xA100-80GB"), ("gpu-b", "4xT4-16GB"), ("gpu-c", "2xA10-24GB,2xA100-40GB"))
PEOPLE = (
    ("UALICE", "vision", "member"),
    ("UBOB", "vision", "member"),
    ("UVERA", "vision", "approver"),
    ("UNINA", "nlp", "member"),
    ("UNOAH", "nlp", "approver"),
)


class AcceleratedClock:
    """paika's clock in the demo: `speed` seconds pass for every real second."""

    def __init__(self, start: datetime, speed: float) -> None:
        self.start, self.speed, self.began = start, speed, time.monotonic()

    def now(self) -> datetime:
        return self.start + timedelta(seconds=(time.monotonic() - self.began) * self.speed)


@dataclass(frozen=True)
class Planned:
    """A job the demo will submit at `at` (paika time), and when its data will be ready."""

    at: timedelta
    user: str
    text: str
    name: str
    ready_after: timedelta | None


# Each team's project; a job's round is its third of the day. Every job reports what it
# produced through its report file as it ends, as a real training script would.
PROJECTS = {"vision": "detector", "nlp": "llm-pretrain"}
ROUNDS_REPORT = "report by=round project=llm-pretrain metric=top1"


def _reported(seed: int, index: int, name: str) -> str:
    """The words a demo job writes to its report file: two metrics and its checkpoint (later
    rounds do a little better)."""
    rng = random.Random(seed * 1000 + index)  # apart from the workload's draws
    top1 = 60 + 4 * (index // 8) + rng.uniform(0, 6)
    loss = max(0.05, 1.2 - 0.15 * (index // 8) - rng.uniform(0, 0.3))
    return f"metric=top1:{top1:.1f} metric=loss:{loss:.3f} output=s3://ckpt/{name}/final"


def workload(seed: int, speed: float) -> list[Planned]:
    """A mixed day of work, the same for a given seed."""
    rng = random.Random(seed)
    planned = []
    for index in range(24):
        user, team, role = rng.choice(PEOPLE)
        priority = rng.choices(CLASS_NAMES, (15, 65, 20))[0]
        if priority == PriorityClass.CORE and role != "approver":
            user = "UVERA" if team == "vision" else "UNOAH"
        gpus = rng.choice((1, 1, 2, 2, 4))
        need = rng.choice(("", "", "mem=40", "type=T4-16GB", "mem=24"))
        if need.startswith("mem") and gpus == 4:
            gpus = 2  # four cards of 24 GiB or more exist only on gpu-a, where one is headroom
        wall_h = rng.uniform(0.3, 2.0)
        actual_s = wall_h * 3600 * rng.uniform(0.7, 1.2)
        pending = rng.random() < 0.3
        name = f"{team}-{priority}-{index:02d}"
        data = "s3://datasets/" + name if pending else "ready"
        project, run = PROJECTS[team], _reported(seed, index, name)
        text = (
            f"submit name={name} gpus={gpus} hours={gpus * wall_h:.1f} priority={priority} data={data} "
            f"{need} project={project} round={1 + index // 8} "
            f"cmd='sleep {actual_s / speed:.2f} && echo {run} >> \"$PAIKA_REPORT_FILE\"'"
        )
        at = timedelta(minutes=rng.uniform(0, 150) if index > 6 else 0)
        planned.append(
            Planned(
                at, user, text, name, timedelta(minutes=rng.uniform(10, 60)) if pending else None
            )
        )
    return sorted(planned, key=lambda p: p.at)


def run_demo(
    *,
    seconds: float = 55,
    speed: float = 600,
    seed: int = 7,
    out: TextIO,
    quiet: bool = False,
    words: Words = wordless,
    announcer: Announcer | None = None,
) -> dict[str, object]:
    """Run the demo; returns the summary it prints. `words`: how replies read, and
    `announcer`: who tells the notices (the console's, from bot/); unless `quiet`, when
    they are kept and not told."""
    folder = Path("paika-data") / "demo"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    token = secrets.token_urlsafe(24)
    settings = Settings(
        data_dir=folder,
        database_url=f"sqlite:///{folder / 'paika.db'}",
        admins=(ADMIN,),
        agent_token=token,
        config=None,
    )
    clock = AcceleratedClock(datetime.now(UTC).replace(microsecond=0), speed)
    paika = Paika.start(settings, clock=clock, words=words)
    hosts = paika.policy.scheduler.hosts.model_copy(update={"unknown_after_seconds": 3600})
    paika.policy = paika.policy.model_copy(
        update={
            "scheduler": paika.policy.scheduler.model_copy(
                update={"cycle_seconds": 0.5, "hosts": hosts}
            )
        }
    )
    agents = [_agent(folder, name, spec, token) for name, spec in HOSTS]
    recorder = RecordingObserver()
    # The demo's notices go through the outbox like any paika's: printed, or kept quiet.
    teller = RecordingAnnouncer() if quiet or announcer is None else announcer
    # The team's memory goes to a local folder that keeps versions, as on any embedded install.
    archiver = open_archive(settings, paika.engine, clock)
    periodic = Periodic(
        paika.engine,
        paika.policy,
        clock,
        agent_cycle(paika, recorder),
        teller,
        archiver=archiver,
    )
    try:
        _setup(paika, agents, out)
        periodic.start()
        _drive(paika, clock, workload(seed, speed), seconds, out, quiet)
    finally:
        periodic.stop()
        for agent in agents:
            for job in agent.store.all_jobs():
                if job.state == "running":
                    agent.store.stop(job.job_id, 0.5)
            stop_server(agent.server, agent.thread)
            agent.store.close()
    summary = _summary(paika, clock)
    # The ledger's own report of one project's rounds, as a team lead asks it in Slack (the
    # demo's clock runs ahead of the wall clock, so it is asked here, at the demo's time).
    summary["rounds_report"] = paika.run(ROUNDS_REPORT, "UNOAH").text
    summary["archive"] = _archived(archiver)
    _print_summary(summary, out)
    paika.engine.dispose()
    return summary


def _archived(archiver: Archiver) -> dict[str, object]:
    """What the demo left in its object store, by the store's top-level folders."""
    store = archiver.shipper.store
    counts = {
        folder: len(store.keys(folder + "/"))
        for folder in ("config", "templates", "specs", "snapshots", "decisions", "digests", "audit")
    }
    return {
        "where": store.where,
        "objects": {folder: n for folder, n in counts.items() if n},
        "waiting": len(archiver.spool),
    }


@dataclass
class DemoAgent:
    """One simulated GPU host: its agent's server, thread, job store and URL."""

    server: uvicorn.Server
    thread: threading.Thread
    store: JobStore
    url: str


def _agent(folder: Path, name: str, spec: str, token: str) -> DemoAgent:
    # The demo's jobs are its own `sleep`s on the user's own machine: as root, too.
    store = JobStore(folder / "agents" / name, allow_root_jobs=True, simulated_gpus=True)
    reader = SimulatedReader(spec, host=name, loads=store)
    server, thread, port = serve_in_thread(build_app(reader, store, token, host=name))
    return DemoAgent(server, thread, store, f"http://127.0.0.1:{port}")


def _setup(paika: Paika, agents: list[DemoAgent], out: TextIO) -> None:
    commands = [
        f"admin member add <@{user}> team={team} role={role}" for user, team, role in PEOPLE
    ]
    commands += [
        f"admin host add {name} url={agent.url}"
        for (name, _), agent in zip(HOSTS, agents, strict=True)
    ]
    commands += [
        "admin quota add team=vision type=any hours=400 expires=2099-12-31 owner=<@UVERA>",
        "admin quota add team=nlp type=any hours=300 expires=2099-12-31 owner=<@UNOAH>",
    ]
    for text in commands:
        reply = paika.run(text, ADMIN)
        if not reply.ok:
            raise RuntimeError(f"demo setup failed on {text!r}: {reply.text}")
    print(
        f"paika demo: 3 simulated GPU hosts on loopback ({', '.join(spec for _, spec in HOSTS)}), SQLite in paika-data/demo.",
        file=out,
    )


def _drive(
    paika: Paika,
    clock: AcceleratedClock,
    plan: list[Planned],
    seconds: float,
    out: TextIO,
    quiet: bool,
) -> None:
    began, board = time.monotonic(), ""
    submitted: dict[str, datetime] = {}
    readies = []
    while time.monotonic() - began < seconds:
        elapsed = clock.now() - clock.start
        while plan and plan[0].at <= elapsed:
            item = plan.pop(0)
            reply = paika.run(item.text, item.user)
            print(
                f"  /gpu {item.text.split(' cmd=')[0]}  ({item.user}) → {reply.text.splitlines()[0]}",
                file=out,
            )
            submitted[item.name] = clock.now()
            if item.ready_after is not None:
                readies.append((elapsed + item.ready_after, item))
        for due, item in [r for r in readies if r[0] <= elapsed]:
            readies.remove((due, item))
            reply = paika.run(f"ready {item.name}", item.user)
            print(
                f"  /gpu ready {item.name}  ({item.user}) → {reply.text.splitlines()[0]}", file=out
            )
        current = render_board(paika, clock)
        if current.split("\n", 1)[1] != board and not quiet:
            print(current, file=out)
            board = current.split("\n", 1)[1]
        if not plan and not readies and _all_ended(paika):
            break
        time.sleep(0.25)


def render_board(paika: Paika, clock: AcceleratedClock) -> str:
    """The GPU grid by host, and the queue in one line."""
    with Session(paika.engine) as session:
        open_allocations = select(Allocation).where(col(Allocation.ended_at).is_(None))
        # A shared card holds several jobs: its cell names each ("#3+#4").
        holders: dict[int, list[int]] = defaultdict(list)
        for allocation in session.exec(open_allocations.order_by(col(Allocation.job_id))):
            holders[allocation.gpu_id].append(allocation.job_id)
        lines = [f"── board at {clock.now():%H:%M} (paika time) " + "─" * 30]
        for host in session.exec(select(Host).order_by(col(Host.name))):
            gpus = session.exec(
                select(Gpu).where(Gpu.host_id == host.id).order_by(col(Gpu.index))
            ).all()
            cells = " ".join(
                f"{'+'.join(f'#{job}' for job in holders[g.id or 0]) or '··':>4}" for g in gpus
            )
            kinds = ",".join(sorted({g.gpu_type for g in gpus}))
            lines.append(f"{host.name:<6} {host.state:<8} {cells}   {kinds}")
        jobs = session.exec(select(Job)).all()
        counts: dict[str, int] = defaultdict(int)
        for job in jobs:
            counts[job.state] += 1
        lines.append(
            f"queue: {counts[JobState.QUEUED]} ready to run · {counts[JobState.WAITING_DATA]} waiting for data · "
            f"{counts[JobState.RUNNING]} running · {counts[JobState.SUCCEEDED]} done · {counts[JobState.FAILED]} failed"
        )
    return "\n".join(lines)


def _all_ended(paika: Paika) -> bool:
    with Session(paika.engine) as session:
        return all(
            job.state in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
            for job in session.exec(select(Job))
        )


def _summary(paika: Paika, clock: AcceleratedClock) -> dict[str, object]:
    with Session(paika.engine) as session:
        jobs = session.exec(select(Job)).all()
        ledger = session.exec(select(LedgerEntry)).all()
        reported = len(
            session.exec(select(JobOutput).where(JobOutput.source == OutputSource.FILE)).all()
        )
        gpus = len(session.exec(select(Gpu)).all())
    waits: dict[str, list[float]] = defaultdict(list)
    for job in jobs:
        if job.started_at is not None:
            ready = max(job.submitted_at, job.data_ready_at or job.submitted_at)
            waits[job.priority].append(max(0.0, (job.started_at - ready).total_seconds() / 60))
    span = (clock.now() - clock.start).total_seconds() / 3600
    by_type: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for entry in ledger:
        by_type[entry.gpu_type][0] += entry.gpu_hours
        by_type[entry.gpu_type][1] += entry.cost
    busy = sum(entry.gpu_hours for entry in ledger)
    states: dict[str, int] = defaultdict(int)
    for job in jobs:
        states[str(job.state)] += 1
    cost_of: dict[int, float] = defaultdict(float)
    for entry in ledger:
        cost_of[entry.job_id] += entry.cost
    # What the GPUs bought: per project, the runs that ended well, their cost and the best
    # top1 the jobs reported themselves (no person typed it).
    bought: dict[str, dict[str, float]] = {}
    for job in jobs:
        if job.project is None:
            continue
        line = bought.setdefault(job.project, {"runs": 0, "cost": 0.0, "best_top1": 0.0})
        line["cost"] = round(line["cost"] + cost_of[job.id or 0], 2)
        if job.state == JobState.SUCCEEDED:
            line["runs"] += 1
        top1 = (job.metrics or {}).get("top1")
        if isinstance(top1, int | float):
            line["best_top1"] = max(line["best_top1"], float(top1))
    return {
        "jobs": len(jobs),
        "states": dict(states),
        "mean_wait_min": {cls: round(statistics.mean(v), 1) for cls, v in sorted(waits.items())},
        "gpu_utilization": round(busy / (gpus * span), 3) if gpus and span else 0.0,
        "gpu_hours_and_cost_by_type": {
            t: (round(h, 2), round(c, 2)) for t, (h, c) in sorted(by_type.items())
        },
        "paika_hours_simulated": round(span, 2),
        "bought_by_project": dict(sorted(bought.items())),
        "outputs_reported": reported,
    }


def _print_summary(summary: dict[str, object], out: TextIO) -> None:
    print("── summary " + "─" * 50, file=out)
    archive = summary.get("archive")
    if isinstance(archive, dict):
        kept = ", ".join(f"{n} {folder}" for folder, n in archive["objects"].items()) or "nothing"
        print(f"the team's memory (object store): {archive['where']}: {kept}", file=out)
        print(
            "  see it with: PAIKA_DATA_DIR=paika-data/demo paika state show --at latest", file=out
        )
    print(f"jobs: {summary['jobs']}  {summary['states']}", file=out)
    print(f"mean wait by class (minutes): {summary['mean_wait_min']}", file=out)
    print(
        f"GPU utilization: {summary['gpu_utilization']:.0%} over {summary['paika_hours_simulated']} h of paika time",
        file=out,
    )
    for gpu_type, (hours, cost) in summary["gpu_hours_and_cost_by_type"].items():  # type: ignore[attr-defined]
        print(f"  {gpu_type:<10} {hours:7.2f} GPU-hours  cost {cost:8.2f}", file=out)
    print(
        f"what it bought ({summary['outputs_reported']} outputs reported by the jobs themselves):",
        file=out,
    )
    for project, line in summary["bought_by_project"].items():  # type: ignore[attr-defined]
        print(
            f"  {project:<13} {line['runs']:3d} runs finished  cost {line['cost']:8.2f}  "
            f"best top1 {line['best_top1']:.1f}",
            file=out,
        )
    print(f"/gpu {ROUNDS_REPORT}:", file=out)
    print(summary.get("rounds_report", ""), file=out)
