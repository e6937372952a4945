"""Templates a team reuses, and the admin commands that set paika up."""

from __future__ import annotations

import pytest
from sqlmodel import Session, col, select
from test_jobs_flow import gpu, jobs, refused

from scheduler.app import Paika
from storage.models import AuditEvent, Host, Member, Team


@pytest.fixture
def vision(paika: Paika) -> Paika:
    gpu(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    gpu(paika, "UADMIN", "admin member add <@UBOB> team=vision")
    gpu(paika, "UADMIN", "admin member add <@UNICK> team=nlp")
    return paika


def test_a_template_fills_submit_and_explicit_keys_win(vision: Paika) -> None:
    saved = gpu(
        vision,
        "UALICE",
        'template save bert-base gpus=4 type=A100-80GB hours=24 priority=normal data=ready cmd="python train.py --cfg base.yaml"',
    ).text
    assert 'Saved template "bert-base"' in saved
    gpu(vision, "UBOB", "submit template=bert-base name=bert-lr1 hours=30")
    job = jobs(vision)["bert-lr1"]
    assert (job.gpus, job.gpu_types, job.est_gpu_hours, job.command, job.template) == (
        4,
        ["A100-80GB"],
        30,
        "python train.py --cfg base.yaml",
        "bert-base",
    )
    assert "bert-base" in gpu(vision, "UBOB", "template list").text
    assert "no template" in refused(
        vision, "UNICK", "submit template=bert-base name=x"
    )  # another team's
    # a template without cmd leaves submit's required keys to the user, with the usual message
    gpu(vision, "UALICE", "template save small gpus=1 hours=2")
    missing = refused(vision, "UALICE", "submit template=small name=y")
    assert "priority" in missing and "data" in missing and "cmd" in missing


def test_only_the_author_an_approver_or_admin_changes_a_template(vision: Paika) -> None:
    gpu(vision, "UALICE", "template save sweep gpus=1 hours=1")
    assert "only they, your team's approvers or an admin" in refused(
        vision, "UBOB", "template delete sweep"
    )
    assert (
        'Updated template "sweep"'
        in gpu(vision, "UALICE", "template save sweep gpus=2 hours=1").text
    )
    gpu(vision, "UALICE", "template delete sweep")
    assert "no template" in refused(vision, "UALICE", "template show sweep")


def test_admin_commands_need_an_admin(vision: Paika) -> None:
    for text in [
        "admin team add robotics",
        "admin member add <@UEVE> team=vision",
        "admin member role <@UALICE> role=admin",
        "admin host add gpu-01 url=http://10.0.0.5:8470",
        "admin quota list",
    ]:
        assert "Only admins can" in refused(vision, "UALICE", text), text
    # Each refusal is on the record: who tried what, and why it was refused.
    with Session(vision.engine) as session:
        refusals = session.exec(
            select(AuditEvent).where(col(AuditEvent.action).startswith("refused."))
        ).all()
    assert [(e.actor, e.action) for e in refusals] == [
        ("UALICE", "refused.admin.team.add"),
        ("UALICE", "refused.admin.member.add"),
        ("UALICE", "refused.admin.member.role"),
        ("UALICE", "refused.admin.host.add"),
        ("UALICE", "refused.admin.quota.list"),
    ]
    assert all((e.detail or {}).get("why") == "problem.admins_only" for e in refusals)


def test_admins_manage_teams_members_and_hosts(vision: Paika) -> None:
    assert (
        "Added team robotics"
        in gpu(vision, "UADMIN", "admin team add robotics channel=#robots").text
    )
    assert "already exists" in refused(vision, "UADMIN", "admin team add Robotics")
    assert (
        "Moved <@UBOB> to team robotics as approver"
        in gpu(vision, "UADMIN", "admin member add <@UBOB> team=robotics role=approver").text
    )
    assert "still has members" in refused(vision, "UADMIN", "admin team remove robotics")
    assert (
        "<@UALICE> is now admin"
        in gpu(vision, "UADMIN", "admin member role <@UALICE> role=admin").text
    )
    assert "Added team ops" in gpu(vision, "UALICE", "admin team add ops").text  # now she can

    gpu(vision, "UADMIN", "admin host add gpu-01 url=http://127.0.0.1:8470/")
    assert "Draining gpu-01" in gpu(vision, "UADMIN", "admin host drain gpu-01").text
    assert (
        "gpu-01 · http://127.0.0.1:8470 · unknown · draining"
        in gpu(vision, "UADMIN", "admin host list").text
    )
    gpu(vision, "UADMIN", "admin host resume gpu-01")
    gpu(vision, "UADMIN", "admin host remove gpu-01")
    assert 'no host "gpu-01"' in refused(vision, "UADMIN", "admin host drain gpu-01")

    gpu(vision, "UADMIN", "admin member remove <@UBOB>")
    gpu(vision, "UADMIN", "admin team remove robotics")
    with Session(vision.engine) as session:
        assert session.exec(select(Team).where(Team.name == "robotics")).first() is None
        assert session.exec(select(Member).where(Member.slack_user_id == "UBOB")).first() is None
        assert session.exec(select(Host)).all() == []
        actions = [e.action for e in session.exec(select(AuditEvent)).all()]
    for action in [
        "team.add",
        "member.add",
        "member.role",
        "host.add",
        "host.drain",
        "host.resume",
        "host.remove",
        "member.remove",
        "team.remove",
    ]:
        assert action in actions
