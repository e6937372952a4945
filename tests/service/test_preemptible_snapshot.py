"""The snapshot tells the policy which jobs checkpoint and resume: their preemptions so far
and their grace (their own, else the policy's default), and a resumed job's estimate is what
is left of it after the GPU-hours its earlier stretches kept."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.snapshots import build_snapshot
from storage.models import Job, JobState, LedgerEntry, Team

EST = 40.0  # GPU-hours


def _job(team_id: int, name: str, state: JobState, **fields: object) -> Job:
    return Job(
        name=name,
        owner="UALICE",
        team_id=team_id,
        gpus=2,
        est_gpu_hours=EST,
        command="python train.py",
        state=state,
        submitted_at=fields.pop("submitted_at"),
        **fields,  # type: ignore[arg-type]
    )


def _stretch(job: Job, hours: float, lost: float, ended: object) -> LedgerEntry:
    return LedgerEntry(
        job_id=job.id or 0,
        team_id=job.team_id,
        gpu_type="A100-80GB",
        gpu_hours=hours,
        lost_gpu_hours=lost,
        cost=0.0,
        started_at=ended - timedelta(hours=hours),  # type: ignore[operator]
        ended_at=ended,  # type: ignore[arg-type]
        recorded_at=ended,  # type: ignore[arg-type]
    )


def test_preemptible_jobs_their_preemptions_grace_and_what_is_left(paika: Paika) -> None:
    now = paika.clock.now()
    assert paika.run("admin member add <@UALICE> team=vision", "UADMIN").ok
    earlier = now - timedelta(hours=5)
    with Session(paika.engine) as session:
        team = session.exec(select(Team).where(Team.name == "vision")).one()
        tid = team.id or 0
        resumed = _job(
            tid, "resumed", JobState.QUEUED, submitted_at=earlier, preemptible=True, preemptions=2
        )
        nearly = _job(
            tid, "nearly", JobState.QUEUED, submitted_at=earlier, preemptible=True, preemptions=1
        )
        plain = _job(tid, "plain", JobState.QUEUED, submitted_at=earlier)
        running = _job(
            tid,
            "running",
            JobState.RUNNING,
            submitted_at=earlier,
            started_at=now - timedelta(hours=1),
            preemptible=True,
            preempt_grace_s=90.0,
            preemptions=1,
        )
        default_grace = _job(
            tid,
            "default",
            JobState.RUNNING,
            submitted_at=earlier,
            started_at=now - timedelta(hours=1),
            preemptible=True,
        )
        steady = _job(
            tid,
            "steady",
            JobState.RUNNING,
            submitted_at=earlier,
            started_at=now - timedelta(hours=1),
        )
        session.add_all([resumed, nearly, plain, running, default_grace, steady])
        session.flush()
        # resumed kept 12 + 6 of 20 charged (2 lost); nearly kept more than its estimate.
        session.add(_stretch(resumed, 12.0, 0.0, earlier))
        session.add(_stretch(resumed, 8.0, 2.0, earlier + timedelta(hours=1)))
        session.add(_stretch(nearly, 50.0, 1.0, earlier))
        # A job not declared preemptible restarts from nothing: its charges do not count.
        session.add(_stretch(plain, 30.0, 0.0, earlier))
        # running kept 10 in its earlier stretch; its current run started an hour ago.
        session.add(_stretch(running, 10.0, 0.0, earlier))
        session.commit()
        snapshot = build_snapshot(session, paika.policy, now)
        ids = {job.name: job.id for job in (resumed, nearly, plain, running, default_grace, steady)}
    pending = {job.id: job for job in snapshot.pending}
    assert pending[ids["resumed"]].est_gpu_hours == pytest.approx(EST - 18.0)
    assert pending[ids["resumed"]].preemptible and pending[ids["resumed"]].preemptions == 2
    assert pending[ids["nearly"]].est_gpu_hours == pytest.approx(EST * 0.1)  # floored
    assert pending[ids["plain"]].est_gpu_hours == EST
    assert not pending[ids["plain"]].preemptible and pending[ids["plain"]].preemptions == 0
    on_hosts = {job.id: job for job in snapshot.running}
    run = on_hosts[ids["running"]]
    assert (run.preemptible, run.preemptions, run.grace_s) == (True, 1, 90.0)
    assert run.started_at == (now - timedelta(hours=1)).timestamp()  # its current run
    # What is left (30 GPU-hours on 2 GPUs) from its current start.
    assert run.expected_end == pytest.approx(run.started_at + 15 * 3600)
    assert on_hosts[ids["default"]].grace_s == 5 * 60  # the policy's default_grace_minutes
    assert on_hosts[ids["steady"]].grace_s is None and not on_hosts[ids["steady"]].preemptible
    assert not run.preempting
