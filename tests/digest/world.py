"""Builders for a cluster's day: hosts, runs of jobs on their GPUs, utilization samples.

Waiting jobs are submitted through the `/gpu` grammar like users do; what happened
before (jobs that ran, the samples the cycle kept) is written as the scheduler writes
it: allocations opened and closed through the ledger service, samples one per GPU per
minute. Times are hours relative to the test's now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import insert
from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.ledger import close_allocations_at
from storage.models import Allocation, Gpu, GpuSample, Host, Job, JobState, Quota, Team

SAMPLE = timedelta(seconds=60)  # the bundled policy samples every 60 s (cycle 10 s)


@dataclass(frozen=True)
class HostSpec:
    name: str
    gpu_type: str
    count: int
    memory_gib: float
    # Hours (from, to) without answers; to=None: down now.
    down: tuple[tuple[float, float | None], ...] = ()
    added_h: float = -72


@dataclass(frozen=True)
class Run:
    name: str
    owner: str
    team: str
    host: str
    gpus: tuple[int, ...]
    start_h: float
    end_h: float | None = None  # None: still running
    util: float = 90.0
    idle: tuple[tuple[float, float], ...] = ()  # hours (from, to) it read 1% utilization
    priority: str = "normal"
    est_gpu_hours: float | None = None


@dataclass(frozen=True)
class Waiting:
    name: str
    owner: str
    gpus: int
    hours: float
    priority: str = "normal"
    data: str = "ready"
    submitted_h: float = -0.5
    type: str | None = None
    team: str | None = None


PEOPLE = {"UALICE": "vision", "UBOB": "vision", "UNICK": "nlp", "USARA": "speech"}


def people(paika: Paika) -> None:
    ok(paika, "UADMIN", "admin team add speech")
    for user, team in PEOPLE.items():
        ok(paika, "UADMIN", f"admin member add <@{user}> team={team}")


def ok(paika: Paika, user: str, text: str) -> object:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply.result


def at(now: datetime, hours: float) -> datetime:
    return now + timedelta(hours=hours)


def build(
    paika: Paika,
    hosts: Sequence[HostSpec],
    runs: Sequence[Run],
    *,
    samples_from_h: float,
    quotas: Sequence[tuple[str, str | None, float, int]] = (),
) -> dict[str, int]:
    """Hosts, quotas (team, type, hours, days to expiry), the runs and the samples; the job
    id of each run by name."""
    now = paika.clock.now()
    ids: dict[str, int] = {}
    with Session(paika.engine) as session:
        teams = {t.name: t.id or 0 for t in session.exec(select(Team)).all()}
        for team, gpu_type, hours, days in quotas:
            session.add(
                Quota(
                    team_id=teams[team],
                    gpu_type=gpu_type,
                    gpu_hours=hours,
                    expires_on=(now + timedelta(hours=8) + timedelta(days=days)).date(),
                    owner="UADMIN",
                    created_by="UADMIN",
                    created_at=at(now, -200),
                )
            )
        gpus: dict[tuple[str, int], Gpu] = {}
        for spec in hosts:
            down_now = any(to is None for _, to in spec.down)
            host = Host(
                name=spec.name,
                url=f"http://{spec.name}:8470",
                state="down" if down_now else "up",
                added_at=at(now, spec.added_h),
                state_since=at(now, next(f for f, to in spec.down if to is None))
                if down_now
                else at(now, spec.added_h),
            )
            session.add(host)
            session.flush()
            for index in range(spec.count):
                gpu = Gpu(
                    host_id=host.id or 0,
                    index=index,
                    gpu_type=spec.gpu_type,
                    memory_gib=spec.memory_gib,
                )
                session.add(gpu)
                gpus[(spec.name, index)] = gpu
        session.flush()
        holders: dict[int, list[tuple[datetime, datetime, Run, int]]] = {}
        for run in sorted(runs, key=lambda r: r.start_h):
            job = Job(
                name=run.name,
                owner=run.owner,
                team_id=teams[run.team],
                priority=run.priority,
                gpus=len(run.gpus),
                est_gpu_hours=run.est_gpu_hours
                or len(run.gpus) * ((run.end_h if run.end_h is not None else 4) - run.start_h),
                command="python train.py",
                state=JobState.RUNNING,
                submitted_at=at(now, run.start_h - 0.5),
                started_at=at(now, run.start_h),
                attempts=1,
            )
            session.add(job)
            session.flush()
            ids[run.name] = job.id or 0
            for index in run.gpus:
                gpu = gpus[(run.host, index)]
                session.add(
                    Allocation(
                        job_id=job.id or 0,
                        gpu_id=gpu.id or 0,
                        active_gpu_id=gpu.id,
                        started_at=at(now, run.start_h),
                    )
                )
                end = at(now, run.end_h) if run.end_h is not None else now
                holders.setdefault(gpu.id or 0, []).append(
                    (at(now, run.start_h), end, run, job.id or 0)
                )
            session.flush()
            if run.end_h is not None:
                close_allocations_at(session, paika.policy, job, at(now, run.end_h))
                job.state = JobState.SUCCEEDED
                job.ended_at = at(now, run.end_h)
                session.add(job)
                session.flush()
        rows = []
        for spec in hosts:
            for index in range(spec.count):
                gpu = gpus[(spec.name, index)]
                gpu.utilization_pct = None
                moment = at(now, samples_from_h)
                while moment < now:
                    hours = (moment - now).total_seconds() / 3600
                    if not any(f <= hours < (to if to is not None else 0.1) for f, to in spec.down):
                        util, job_id = 0.0, None
                        for start, end, run, held_by in holders.get(gpu.id or 0, []):
                            if start <= moment < end:
                                job_id = held_by
                                idle = any(f <= hours < to for f, to in run.idle)
                                util = 1.0 if idle else run.util - (index * 7 + int(hours)) % 9
                        gpu.utilization_pct, gpu.last_seen_at = util, moment
                        rows.append(
                            {
                                "gpu_id": gpu.id,
                                "at": moment,
                                "utilization_pct": util,
                                "memory_used_gib": 20.0 if job_id else 0.0,
                                "job_id": job_id,
                            }
                        )
                    moment += SAMPLE
                session.add(gpu)
        session.execute(insert(GpuSample), rows)
        session.commit()
    return ids


def submit(paika: Paika, clock: ManualClock, jobs: Sequence[Waiting]) -> dict[str, int]:
    """Waiting jobs submitted at their times (the clock is moved there and back)."""
    ids = {}
    now = clock.now()
    for job in sorted(jobs, key=lambda j: j.submitted_h):
        clock.advance(at(now, job.submitted_h) - clock.now())
        text = (
            f"submit name={job.name} gpus={job.gpus} hours={job.hours:g} priority={job.priority}"
            f' data={job.data} cmd="python train.py"'
        )
        if job.type:
            text += f" type={job.type}"
        if job.team:
            text += f" team={job.team}"
        result = ok(paika, job.owner, text)
        ids[job.name] = result.view.job.id  # type: ignore[attr-defined]
    clock.advance(now - clock.now())
    return ids


# -- a realistic 24-GPU day, for the picture --------------------------------------------

BIG_HOSTS = (
    HostSpec("gpu-01", "A100-80GB", 8, 80),
    HostSpec("gpu-02", "A100-40GB", 8, 40),
    HostSpec("gpu-03", "T4-16GB", 4, 16, down=((-9.0, -6.5),)),
    HostSpec("gpu-04", "H100-80GB", 4, 80, added_h=-15),
)

BIG_RUNS = (
    Run("llama-sft", "UNICK", "nlp", "gpu-01", (0, 1, 2, 3), -30, None, util=94, est_gpu_hours=160),
    Run("vit-large", "UALICE", "vision", "gpu-01", (4, 5), -26, -11, util=88, idle=((-25, -23),)),
    Run(
        "detr-ablate",
        "UBOB",
        "vision",
        "gpu-01",
        (4, 5),
        -10,
        None,
        util=80,
        idle=((-4, -1.5),),
        est_gpu_hours=30,
    ),
    Run("clip-eval", "UALICE", "vision", "gpu-01", (6,), -20, -17, util=60),
    Run(
        "stalled-nb",
        "UBOB",
        "vision",
        "gpu-01",
        (7,),
        -7,
        None,
        util=40,
        idle=((-6.5, 0.0),),
        est_gpu_hours=12,
    ),
    Run("whisper-ft", "USARA", "speech", "gpu-02", (0, 1, 2, 3), -22, -3, util=91),
    Run("asr-small", "USARA", "speech", "gpu-02", (4,), -18, -12, util=70),
    Run("bert-distill", "UNICK", "nlp", "gpu-02", (4, 5), -9, None, util=85, est_gpu_hours=24),
    Run("seg-tiny", "UALICE", "vision", "gpu-03", (0,), -23, -19, util=75),
    Run("ocr-test", "UBOB", "vision", "gpu-03", (1, 2), -14, -10, util=66, idle=((-13, -12),)),
    Run("tts-ref", "USARA", "speech", "gpu-03", (0, 1), -5, None, util=72, est_gpu_hours=12),
    Run(
        "moe-pretrain",
        "UNICK",
        "nlp",
        "gpu-04",
        (0, 1, 2, 3),
        -12,
        None,
        priority="core",
        util=97,
        est_gpu_hours=80,
    ),
)

BIG_WAITING = (
    Waiting("rlhf-reward", "UNICK", 4, 32, type="A100-80GB", submitted_h=-3),
    Waiting("vit-huge", "UALICE", 2, 20, type="A100-40GB", submitted_h=-2),
    Waiting("kws-tiny", "USARA", 1, 2, type="T4-16GB", submitted_h=-1),
    Waiting("copy-coco", "UBOB", 2, 16, data="pending", submitted_h=-30),
    Waiting("speech-lm", "USARA", 4, 40, data="pending", submitted_h=-5),
    Waiting("nightly-eval", "UALICE", 1, 3, priority="idle", submitted_h=-0.5),
)


# -- a 64-GPU day on long-named hosts, one of them down, for the picture at size ---------

WIDE_DOMAIN = ".cluster.example"
WIDE_HOSTS = tuple(
    HostSpec(
        f"gpu-node-rack12-slot{slot:02d}{WIDE_DOMAIN}",
        "A100-80GB" if slot <= 4 else "H100-80GB",
        8,
        80,
        # The last host sorts last: before, it was the one cut off at 48 rows.
        down=((-3.0, None),) if slot == 8 else (),
    )
    for slot in range(1, 9)
)

WIDE_RUNS = tuple(
    Run(
        f"train-{slot}",
        "UNICK" if slot % 2 else "UALICE",
        "nlp" if slot % 2 else "vision",
        f"gpu-node-rack12-slot{slot:02d}{WIDE_DOMAIN}",
        tuple(range(8)),
        -20 + slot,
        None,
        util=90,
        # Every card of a host comes free within minutes of the others' (its estimate ends
        # then), so the queue's runs are planned close together, back to back on a row.
        est_gpu_hours=8 * (20 - slot + 0.1 + 0.02 * slot),
    )
    for slot in range(1, 8)
)

WIDE_WAITING = tuple(
    Waiting(f"mm{n:02d}", "UALICE", 1, 2.2, type="H100-80GB", submitted_h=-3 + n * 0.05)
    for n in range(40)
) + tuple(
    Waiting(f"eval-{n}", "UNICK", 2, 3, type="A100-80GB", submitted_h=-1 + n * 0.1)
    for n in range(4)
)
