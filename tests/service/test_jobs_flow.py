"""Submitting and following jobs, as users do it: through the grammar and the service."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import Session, select

from scheduler.app import Paika, Reply
from scheduler.clock import ManualClock
from storage.models import AuditEvent, BumpRequest, Job, JobEvent, JobState

SUBMIT = 'submit name={name} gpus={gpus} hours={hours} priority={priority} data={data} cmd="python train.py --lr 3e-4"'


def gpu(paika: Paika, user: str, text: str) -> Reply:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply


def refused(paika: Paika, user: str, text: str) -> str:
    reply = paika.run(text, user)
    assert not reply.ok, reply.text
    return reply.text


def submit(
    paika: Paika,
    user: str,
    name: str,
    *,
    gpus: int = 1,
    hours: float = 4,
    priority: str = "normal",
    data: str = "ready",
) -> Reply:
    return gpu(
        paika, user, SUBMIT.format(name=name, gpus=gpus, hours=hours, priority=priority, data=data)
    )


def busy_cluster(paika: Paika, gpus: int = 4, hours_left: float = 2.0) -> None:
    """Host gpu-01 with `gpus` A100-80GB cards, all held by a running job that ends in `hours_left`."""
    from storage.models import Allocation, Gpu, Host, Team

    now = paika.clock.now()
    with Session(paika.engine) as session:
        host = Host(name="gpu-01", url="http://127.0.0.1:8470", state="up", added_at=now)
        team_id = session.exec(select(Team.id).where(Team.name == "vision")).one()
        warmup = Job(
            name="warmup",
            owner="UADMIN",
            team_id=team_id,
            gpus=gpus,
            est_gpu_hours=gpus * hours_left,
            command="true",
            state=JobState.RUNNING,
            submitted_at=now,
            started_at=now,
        )
        session.add_all([host, warmup])
        session.flush()
        cards = [
            Gpu(host_id=host.id or 0, index=i, gpu_type="A100-80GB", memory_gib=80)
            for i in range(gpus)
        ]
        session.add_all(cards)
        session.flush()
        session.add_all(
            [
                Allocation(
                    job_id=warmup.id or 0, gpu_id=c.id or 0, active_gpu_id=c.id, started_at=now
                )
                for c in cards
            ]
        )
        session.commit()


@pytest.fixture
def team(paika: Paika) -> Paika:
    """Vision: alice and bob (members), vera (approver); nlp: nick (member); 4 busy GPUs."""
    busy_cluster(paika)
    for user, team_name, role in [
        ("UALICE", "vision", "member"),
        ("UBOB", "vision", "member"),
        ("UVERA", "vision", "approver"),
        ("UNICK", "nlp", "member"),
    ]:
        gpu(paika, "UADMIN", f"admin member add <@{user}> team={team_name} role={role}")
    return paika


def jobs(paika: Paika) -> dict[str, Job]:
    with Session(paika.engine) as session:
        return {job.name: job for job in session.exec(select(Job)).all()}


def audit_actions(paika: Paika) -> list[str]:
    with Session(paika.engine) as session:
        return [
            event.action for event in session.exec(select(AuditEvent).order_by(AuditEvent.id)).all()
        ]


def test_a_ready_job_is_queued_with_its_place_and_likely_card(team: Paika) -> None:
    reply = submit(team, "UALICE", "bert-ft", gpus=2, hours=12)
    assert "Queued job #2 bert-ft" in reply.text
    assert (
        "Place in queue: 1. Waiting: no A100-80GB free for about 2.0 h. Estimated start: 2026-11-02 19:00 CST."
        in reply.text
    )
    assert "Likely card type: A100-80GB" in reply.text
    job = jobs(team)["bert-ft"]
    assert (job.state, job.gpus, job.est_gpu_hours, job.owner, job.data_ready) == (
        JobState.QUEUED,
        2,
        12,
        "UALICE",
        True,
    )
    assert "job.submit" in audit_actions(team)


def test_a_job_waiting_for_data_keeps_its_place_and_blocks_nobody(
    team: Paika, clock: ManualClock
) -> None:
    submit(team, "UALICE", "copying", data="s3://datasets/imagenet")
    clock.advance(timedelta(minutes=1))
    reply = submit(team, "UBOB", "ready-one")
    assert (
        "Place in queue: 2. Waiting: no A100-80GB free" in reply.text
    )  # not behind the job still copying
    status = gpu(team, "UALICE", "status copying").text
    assert (
        "copying — waiting for data" in status
        and "s3://datasets/imagenet" in status
        and "waiting for its data" in status
    )

    clock.advance(timedelta(minutes=5))
    ready = gpu(team, "UBOB", "ready copying")  # a teammate may mark it
    assert "now competes for GPUs" in ready.text
    job = jobs(team)["copying"]
    assert job.state == JobState.QUEUED and job.data_ready_at == clock.now()
    with Session(team.engine) as session:
        states = [
            e.to_state
            for e in session.exec(
                select(JobEvent).where(JobEvent.job_id == job.id).order_by(JobEvent.id)
            )
        ]
    assert states == [JobState.WAITING_DATA, JobState.QUEUED]
    assert "already marked ready" in gpu(team, "UALICE", f"ready #{job.id}").text


def test_core_goes_before_normal_and_idle_last(team: Paika, clock: ManualClock) -> None:
    submit(team, "UALICE", "idle-sweep", priority="idle")
    clock.advance(timedelta(minutes=1))
    submit(team, "UALICE", "normal-run")
    clock.advance(timedelta(minutes=1))
    submit(team, "UVERA", "core-run", priority="core")  # approvers may use core directly
    queue = gpu(team, "UNICK", "queue").text
    assert queue.index("core-run") < queue.index("normal-run") < queue.index("idle-sweep")
    assert (
        "behind 1 job of higher priority for A100-80GB"
        in gpu(team, "UALICE", "status normal-run").text
    )


def test_a_member_asking_for_core_is_queued_normal_with_a_bump_request(team: Paika) -> None:
    reply = submit(team, "UALICE", "urgent", priority="core")
    assert "queued as normal" in reply.text and "bump request #" in reply.text
    job = jobs(team)["urgent"]
    assert job.priority == "normal"
    with Session(team.engine) as session:
        request = session.exec(select(BumpRequest)).one()
    assert (request.to_priority, request.state) == ("core", "pending")

    assert "Only approvers" in refused(team, "UBOB", f"approve {request.id}")
    assert "Only approvers" in refused(team, "UNICK", f"approve {request.id}")
    assert jobs(team)["urgent"].priority == "normal"

    assert "approved" in gpu(team, "UVERA", f"approve {request.id}").text
    assert jobs(team)["urgent"].priority == "core"
    again = gpu(team, "UVERA", f"approve {request.id}").text
    assert "already approved" in again and "nothing changed" in again
    assert audit_actions(team).count("bump.approved") == 1


def test_bump_down_is_immediate_and_bump_up_waits_for_an_approver(team: Paika) -> None:
    submit(team, "UALICE", "sweep")
    assert "is now idle" in gpu(team, "UALICE", 'bump sweep to=idle reason="can wait"').text
    assert "is now normal" in gpu(team, "UALICE", 'bump sweep to=normal reason="back"').text
    pending = gpu(team, "UALICE", 'bump sweep to=core reason="paper deadline"').text
    assert "waiting for an approver of team vision" in pending
    assert "already has a bump request waiting" in refused(
        team, "UALICE", 'bump sweep to=core reason="again"'
    )
    denied = gpu(team, "UVERA", 'deny 1 reason="not this week"').text
    assert "Bump request #1 denied" in denied
    assert jobs(team)["sweep"].priority == "normal"
    assert "already normal" in refused(team, "UALICE", 'bump sweep to=normal reason="x"')


def test_only_owner_team_approver_or_admin_may_cancel(team: Paika) -> None:
    submit(team, "UALICE", "mine")
    assert "Only the owner" in refused(team, "UBOB", "cancel mine")
    assert "Only the owner" in refused(team, "UNICK", "cancel #2")
    assert jobs(team)["mine"].state == JobState.QUEUED
    assert "Cancelled" in gpu(team, "UVERA", 'cancel #2 reason="wrong data"').text
    assert jobs(team)["mine"].state == JobState.CANCELLED
    again = refused(team, "UALICE", "cancel #2")
    assert "is cancelled; it cannot become cancelled" in again


def test_members_submit_only_for_their_own_team(team: Paika) -> None:
    text = SUBMIT.format(name="x", gpus=1, hours=1, priority="normal", data="ready") + " team=nlp"
    assert "only submit jobs for your own team" in refused(team, "UALICE", text)
    assert "not in a team yet" in refused(
        team, "USTRANGER", SUBMIT.format(name="x", gpus=1, hours=1, priority="normal", data="ready")
    )
    assert set(jobs(team)) == {"warmup"}


def test_submit_checks_the_catalog_and_limits(team: Paika) -> None:
    base = SUBMIT.format(name="x", gpus=1, hours=1, priority="normal", data="ready")
    assert 'Unknown GPU type "V100"' in refused(team, "UALICE", base + " type=V100")
    assert "No GPU type in the catalog" in refused(team, "UALICE", base + " mem=200")
    assert "more than one job may use here (16)" in refused(
        team, "UALICE", base.replace("gpus=1", "gpus=32")
    )
    ok = gpu(team, "UALICE", base.replace("name=x", "name=big") + " mem=40").text
    assert "Likely card type: A100-80GB" in ok  # the only type this cluster has that fits
    assert jobs(team)["big"].min_memory_gib == 40


def test_a_failed_command_changes_nothing(team: Paika) -> None:
    before = audit_actions(team)
    refused(team, "UBOB", "cancel #999")
    refused(team, "UBOB", "submit name=x")
    assert audit_actions(team) == before


def test_two_approvers_clicking_at_once_decide_a_request_once(team: Paika) -> None:
    """Approve and deny race on one request: one decision lands, the other changes nothing."""
    if team.engine.dialect.name == "sqlite":
        pytest.skip("SQLite serialises writers; the race needs a server (PostgreSQL, MariaDB)")
    import threading

    gpu(team, "UADMIN", "admin member add <@UVAL> team=vision role=approver")
    submit(team, "UALICE", "urgent", priority="core")
    barrier = threading.Barrier(2)
    replies: dict[str, Reply] = {}

    def decide(user: str, text: str) -> None:
        barrier.wait()
        replies[user] = team.run(text, user)

    threads = [
        threading.Thread(target=decide, args=("UVERA", "approve 1")),
        threading.Thread(target=decide, args=("UVAL", "deny 1")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    texts = sorted(reply.text for reply in replies.values())
    assert all(reply.ok for reply in replies.values())
    assert sum("nothing changed" in text for text in texts) == 1
    decisions = [a for a in audit_actions(team) if a in ("bump.approved", "bump.denied")]
    assert len(decisions) == 1
    assert jobs(team)["urgent"].priority == ("core" if decisions == ["bump.approved"] else "normal")


def _cluster_of(paika: Paika, gpus: int) -> None:
    from storage.models import Gpu, Host

    with Session(paika.engine) as session:
        host = Host(
            name="gpu-01", url="http://127.0.0.1:8470", state="up", added_at=paika.clock.now()
        )
        session.add(host)
        session.flush()
        session.add_all(
            [
                Gpu(host_id=host.id or 0, index=i, gpu_type="A100-80GB", memory_gib=80)
                for i in range(gpus)
            ]
        )
        session.commit()


def test_a_deep_backlog_warns_non_core_submissions(team: Paika) -> None:
    submit(team, "UALICE", "big", hours=190)  # 47.5 h of a 4-GPU cluster: within 48 h
    warned = submit(team, "UALICE", "more", hours=10).text  # now 50 h
    assert "Heads up: the queue already holds about 50 hours" in warned
    assert "Heads up" not in submit(team, "UVERA", "urgent", priority="core", hours=10).text


def test_a_deferring_policy_refuses_non_core_work_and_saves_nothing(team: Paika) -> None:
    from scheduler.config import Admission, PolicyConfig

    scheduler_knobs = team.policy.scheduler.model_copy(
        update={"admission": Admission(max_backlog_hours=48, action="defer")}
    )
    team.policy = PolicyConfig.model_validate(
        {**team.policy.model_dump(), "scheduler": scheduler_knobs.model_dump()}
    )
    submit(team, "UALICE", "big", hours=190)
    text = refused(
        team,
        "UALICE",
        SUBMIT.format(name="more", gpus=1, hours=10, priority="normal", data="ready"),
    )
    assert text.startswith("Not queued: the queue already holds about 50 hours")
    assert "more" not in jobs(team)
