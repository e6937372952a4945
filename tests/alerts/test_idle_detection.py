"""What counts as idle, from the samples alone: every GPU of the job, every sample of the
window, and samples that cover it; and the idle GPU-hours counted by team and type."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest
from sqlmodel import Session, select

from scheduler import lifecycle
from scheduler.alerts.idle import check_idle, idle_hours, idle_runs
from scheduler.app import Paika
from scheduler.clock import ManualClock
from storage.db import session_scope
from storage.models import Allocation, Gpu, GpuSample, Host, Job, JobState

WINDOW = 60  # the bundled policy's reclaim.idle_minutes


def ok(paika: Paika, user: str, text: str) -> None:
    reply = paika.run(text, user)
    assert reply.ok, reply.text


@pytest.fixture
def vision(paika: Paika) -> Paika:
    ok(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    ok(paika, "UADMIN", "admin member add <@UNLP> team=nlp")
    return paika


def running(
    paika: Paika,
    name: str,
    readings: Sequence[Sequence[float | None]],
    *,
    held_minutes: int = 120,
    user: str = "UALICE",
    gpu_type: str = "A100-80GB",
) -> int:
    """A job holding one GPU per list of readings; reading i was taken i minutes ago."""
    ok(
        paika,
        user,
        f"submit name={name} gpus={len(readings)} hours=8 priority=normal data=ready cmd=x type={gpu_type}",
    )
    now = paika.clock.now()
    with session_scope(paika.engine) as session:
        host = Host(name=f"host-{name}", url="http://127.0.0.1:1", state="up", added_at=now)
        session.add(host)
        session.flush()
        job = session.exec(select(Job).where(Job.name == name)).one()
        for index, series in enumerate(readings):
            gpu = Gpu(host_id=host.id or 0, index=index, gpu_type=gpu_type, memory_gib=80)
            session.add(gpu)
            session.flush()
            session.add(
                Allocation(
                    job_id=job.id or 0,
                    gpu_id=gpu.id or 0,
                    active_gpu_id=gpu.id,
                    started_at=now - timedelta(minutes=held_minutes),
                )
            )
            session.add_all(
                GpuSample(
                    gpu_id=gpu.id or 0,
                    at=now - timedelta(minutes=minutes_ago),
                    utilization_pct=pct,
                    job_id=job.id,
                )
                for minutes_ago, pct in enumerate(series)
                if minutes_ago < held_minutes
            )
        lifecycle.move(session, job, JobState.RUNNING, at=now, actor="scheduler")
        job.attempts = 1
        session.add(job)
        return job.id or 0


def idle_now(paika: Paika) -> set[int]:
    with Session(paika.engine) as session:
        return set(idle_runs(session, paika.policy, paika.clock.now()))


IDLE: list[float | None] = [1.0] * (WINDOW + 5)


def test_every_gpu_of_the_job_must_be_idle(vision: Paika) -> None:
    both = running(vision, "both", [IDLE, IDLE])
    one_busy = running(vision, "one-busy", [IDLE, [1.0] * 30 + [70.0] + [1.0] * 34])
    assert idle_now(vision) == {both}
    assert one_busy not in idle_now(vision)


def test_the_window_must_be_covered_by_samples(vision: Paika) -> None:
    gap: list[float | None] = [1.0] * 20 + [None] + [1.0] * 44  # one reading unknown
    running(vision, "unknown-reading", [gap])
    holed = running(vision, "holed", [[1.0] * 65])
    with session_scope(vision.engine) as session:  # three minutes without a sample
        for sample in session.exec(select(GpuSample).where(GpuSample.job_id == holed)).all():
            if timedelta(minutes=30) <= vision.clock.now() - sample.at <= timedelta(minutes=32):
                session.delete(sample)
    fresh = running(vision, "fresh", [IDLE], held_minutes=WINDOW - 1)
    assert idle_now(vision) == set()
    assert fresh not in idle_now(vision)


def test_a_job_is_asked_about_once_per_occasion(vision: Paika, clock: ManualClock) -> None:
    job_id = running(vision, "notebook", [IDLE])
    [ask] = check_idle(vision.engine, vision.policy, clock.now())
    assert ask.key == f"idle:{job_id}:1:1" and ask.to_users == ("UALICE",)
    assert not ask.to_channel
    assert check_idle(vision.engine, vision.policy, clock.now()) == []


def test_reclaim_can_be_turned_off(vision: Paika, clock: ManualClock) -> None:
    running(vision, "notebook", [IDLE])
    vision.policy = vision.policy.model_copy(
        update={"reclaim": vision.policy.reclaim.model_copy(update={"enabled": False})}
    )
    assert check_idle(vision.engine, vision.policy, clock.now()) == []


def test_idle_gpu_hours_by_team_and_type(vision: Paika, clock: ManualClock) -> None:
    running(vision, "vision-a100", [[1.0] * 30 + [90.0] * 30])  # 30 idle samples
    running(vision, "nlp-t4", [[0.0] * 12], user="UNLP", gpu_type="T4-16GB")
    running(vision, "busy", [[95.0] * 60])
    with Session(vision.engine) as session:
        start, end = clock.now() - timedelta(hours=2), clock.now() + timedelta(minutes=1)
        hours = idle_hours(session, vision.policy, start, end)
        earlier = idle_hours(session, vision.policy, start, clock.now() - timedelta(minutes=40))
    assert earlier == {}  # 40 minutes ago every held GPU was busy
    # One sample a minute (sample_seconds 60, cycles of 10 s): each stands for a minute.
    assert hours == {
        ("vision", "A100-80GB"): pytest.approx(30 / 60),
        ("nlp", "T4-16GB"): pytest.approx(12 / 60),
    }
