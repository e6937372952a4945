"""Quotas granted by admins, and GPU time charged to them when a job's allocations end."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import Session, select
from test_jobs_flow import gpu, jobs, refused, submit

from scheduler.app import Paika
from scheduler.clock import ManualClock
from storage.models import Allocation, Gpu, Host, Job, JobState, LedgerEntry


@pytest.fixture
def vision(paika: Paika) -> Paika:
    gpu(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    gpu(paika, "UADMIN", "admin member add <@UVERA> team=vision role=approver")
    return paika


def _start_on_two_a100s(paika: Paika, job_name: str, clock: ManualClock) -> None:
    """What the dispatcher will do: hold two GPUs and mark the job running."""
    from scheduler import lifecycle

    with Session(paika.engine) as session:
        host = Host(name="gpu-01", url="http://127.0.0.1:8470", added_at=clock.now())
        session.add(host)
        session.flush()
        cards = [
            Gpu(host_id=host.id, index=i, gpu_type="A100-80GB", memory_gib=80) for i in range(2)
        ]
        session.add_all(cards)
        session.flush()
        job = session.exec(select(Job).where(Job.name == job_name)).one()
        for card in cards:
            session.add(
                Allocation(
                    job_id=job.id, gpu_id=card.id, active_gpu_id=card.id, started_at=clock.now()
                )
            )
        lifecycle.move(session, job, JobState.RUNNING, at=clock.now(), actor="scheduler")
        session.commit()


def _host_reports(paika: Paika, clock: ManualClock, job_name: str, *, state: str) -> None:
    """The cycle's reconcile step, given what gpu-01's agent reports about the job."""
    from scheduler.hosts.reconcile import reconcile
    from scheduler.hosts.report import AgentJobState, HostReport

    job = jobs(paika)[job_name]
    run = f"{job.id}.{job.attempts}"
    report = HostReport("gpu-01", True, jobs={run: AgentJobState(run, state, -15)})
    reconcile(paika.engine, paika.policy, {"gpu-01": report}, clock.now())


def test_admins_grant_quotas_and_members_see_their_own(vision: Paika) -> None:
    assert "Only admins can grant quotas" in refused(
        vision,
        "UVERA",
        "admin quota add team=vision type=A100-80GB hours=500 expires=2027-01-31 owner=<@UVERA>",
    )
    granted = gpu(
        vision,
        "UADMIN",
        "admin quota add team=vision type=A100-80GB hours=500 expires=2027-01-31 owner=<@UVERA>",
    ).text
    assert (
        "#1 vision · A100-80GB · 0.0 of 500 GPU-hours used, 500.0 left · expires 2027-01-31 (in 90 days)"
        in granted
    )
    assert "A100-80GB" in gpu(vision, "UALICE", "quota").text
    assert "own team's quotas" in refused(vision, "UALICE", "quota team=nlp")
    assert "is in the past" in refused(
        vision, "UADMIN", "admin quota add team=vision hours=5 expires=2020-01-01 owner=<@UVERA>"
    )


def test_done_ends_the_run_and_charges_the_ledger_and_quota(
    vision: Paika, clock: ManualClock
) -> None:
    gpu(
        vision,
        "UADMIN",
        "admin quota add team=vision type=any hours=100 expires=2027-06-30 owner=<@UVERA>",
    )
    gpu(
        vision,
        "UADMIN",
        "admin quota add team=vision type=A100-80GB hours=50 expires=2027-03-31 owner=<@UVERA>",
    )
    submit(vision, "UALICE", "bert", gpus=2, hours=6)
    assert "has not run yet" in refused(vision, "UALICE", "done bert output=x")
    _start_on_two_a100s(vision, "bert", clock)
    clock.advance(timedelta(hours=3))

    reply = gpu(
        vision, "UALICE", 'done bert output="s3://ckpt/bert" metric=f1:91.2 metric=loss:0.31'
    ).text
    assert "Recorded what it produced. Its host is asked to stop it" in reply
    assert jobs(vision)["bert"].stop_reason == "done"
    _host_reports(vision, clock, "bert", state="killed")
    job = jobs(vision)["bert"]
    assert job.state == JobState.SUCCEEDED and job.ended_at == clock.now()
    assert job.output == "s3://ckpt/bert" and job.metrics == {"f1": 91.2, "loss": 0.31}
    with Session(vision.engine) as session:
        entries = session.exec(select(LedgerEntry)).all()
        open_allocations = session.exec(
            select(Allocation).where(Allocation.ended_at.is_(None))
        ).all()  # type: ignore[union-attr]
    assert open_allocations == []
    assert [(e.gpu_type, round(e.gpu_hours, 6), round(e.cost, 6), e.quota_id) for e in entries] == [
        ("A100-80GB", 3.0, 6.6, 2)
    ] * 2
    quota = gpu(vision, "UALICE", "quota").text
    assert "6.0 of 50 GPU-hours used" in quota
    status = gpu(vision, "UALICE", f"status #{job.id}").text
    assert "Used 6.00 GPU-hours, cost 13.20" in status and "f1=91.2" in status


def test_cancelling_a_running_job_frees_its_gpus(vision: Paika, clock: ManualClock) -> None:
    submit(vision, "UALICE", "long")
    _start_on_two_a100s(vision, "long", clock)
    clock.advance(timedelta(minutes=30))
    assert "Stopping: its host is asked to stop it" in gpu(vision, "UALICE", "cancel long").text
    with Session(vision.engine) as session:  # held until the host confirms
        assert (
            len(session.exec(select(Allocation).where(Allocation.active_gpu_id.is_not(None))).all())
            == 2
        )  # type: ignore[union-attr]
    assert "Stopping" in gpu(vision, "UALICE", "cancel long").text  # asking twice is harmless
    _host_reports(vision, clock, "long", state="killed")
    assert jobs(vision)["long"].state == JobState.CANCELLED
    with Session(vision.engine) as session:
        assert (
            session.exec(select(Allocation).where(Allocation.active_gpu_id.is_not(None))).all()
            == []
        )  # type: ignore[union-attr]
        assert len(session.exec(select(LedgerEntry)).all()) == 2
