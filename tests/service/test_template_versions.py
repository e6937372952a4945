"""Template versions and job specs: every save kept, every job knows what it was asked as."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy.orm.exc import StaleDataError
from sqlmodel import Session, col, select
from test_jobs_flow import gpu, jobs, refused

from scheduler.app import Paika, Reply
from scheduler.service.templates import TemplateHistory, TemplateVersionView
from storage.db import lost_race
from storage.models import AuditEvent, Template, TemplateVersion
from storage.queries import templates as template_queries

BASE = 'template save bert-base gpus=4 type=A100-80GB hours=24 priority=normal data=ready cmd="python train.py --cfg base.yaml"'


@pytest.fixture
def vision(paika: Paika) -> Paika:
    gpu(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    gpu(paika, "UADMIN", "admin member add <@UBOB> team=vision")
    gpu(paika, "UADMIN", "admin member add <@UVERA> team=vision role=approver")
    gpu(paika, "UADMIN", "admin member add <@UNICK> team=nlp")
    return paika


def versions(paika: Paika, name: str = "bert-base") -> list[TemplateVersion]:
    with Session(paika.engine) as session:
        query = (
            select(TemplateVersion)
            .where(TemplateVersion.name == name)
            .order_by(col(TemplateVersion.version))
        )
        return list(session.exec(query).all())


def template(paika: Paika, name: str = "bert-base") -> Template:
    with Session(paika.engine) as session:
        return session.exec(select(Template).where(Template.name == name)).one()


def later(paika: Paika, minutes: float = 5) -> None:
    paika.clock.advance(timedelta(minutes=minutes))  # type: ignore[attr-defined]


def three_versions(paika: Paika) -> None:
    """v1 by alice; v2 by alice (gpus 8, hours 30); v3 by vera, an approver (type H100, no
    hours)."""
    gpu(paika, "UALICE", BASE)
    later(paika)
    gpu(paika, "UALICE", BASE.replace("gpus=4", "gpus=8").replace("hours=24", "hours=30"))
    later(paika)
    gpu(
        paika,
        "UVERA",
        BASE.replace("gpus=4", "gpus=8")
        .replace("type=A100-80GB", "type=H100")
        .replace(" hours=24", ""),
    )


def test_every_save_that_changes_the_fields_is_a_new_version(vision: Paika) -> None:
    first = gpu(vision, "UALICE", BASE).text
    assert 'Saved template "bert-base" (v1)' in first
    later(vision)
    second = gpu(vision, "UALICE", BASE.replace("gpus=4", "gpus=8")).text
    assert 'Updated template "bert-base" to v2' in second
    assert "/gpu template history bert-base" in second
    later(vision)
    gpu(vision, "UVERA", BASE.replace("gpus=4", "gpus=2"))

    kept = versions(vision)
    assert [(v.version, v.author, v.fields["gpus"]) for v in kept] == [
        (1, "UALICE", 4),
        (2, "UALICE", 8),
        (3, "UVERA", 2),
    ]
    assert kept[0].fields == {
        "gpus": 4,
        "type": "A100-80GB",
        "hours": 24.0,
        "priority": "normal",
        "data": "ready",
        "cmd": "python train.py --cfg base.yaml",
    }
    assert [v.at - kept[0].at for v in kept] == [
        timedelta(0),
        timedelta(minutes=5),
        timedelta(minutes=10),
    ]
    latest = template(vision)
    assert (latest.version, latest.fields) == (3, kept[2].fields)
    with Session(vision.engine) as session:
        saves = session.exec(
            select(AuditEvent)
            .where(AuditEvent.action == "template.save")
            .order_by(col(AuditEvent.id))
        ).all()
    assert [e.detail["version"] for e in saves if e.detail] == [1, 2, 3]


def test_saving_the_same_fields_again_makes_no_version_and_says_so(vision: Paika) -> None:
    gpu(vision, "UALICE", BASE)
    later(vision)
    again = gpu(vision, "UALICE", BASE.replace("hours=24", "hours=24.0"))  # the same value
    assert 'Template "bert-base" already has these fields (v1), so no new version was made' in (
        again.text
    )
    assert [v.version for v in versions(vision)] == [1]
    assert template(vision).version == 1


def test_history_is_newest_first_with_who_when_and_what_changed(vision: Paika) -> None:
    three_versions(vision)
    reply = gpu(vision, "UBOB", "template history bert-base")
    history = reply.result
    assert isinstance(history, TemplateHistory)
    assert (history.name, history.team, history.latest, history.more) == (
        "bert-base",
        "vision",
        3,
        0,
    )
    assert [(v.version, v.author, v.changed, v.first) for v in history.versions] == [
        (3, "UVERA", ("type", "hours"), False),  # hours removed: listed after the changed
        (2, "UALICE", ("gpus", "hours"), False),
        (1, "UALICE", ("gpus", "type", "hours", "priority", "data", "cmd"), True),
    ]
    lines = reply.text.splitlines()
    assert lines[0] == 'Template "bert-base" of team vision, newest version first:'
    assert lines[1] == (
        "v3 · 2026-11-02 17:10 CST · <@UVERA>: gpus=8 type=H100 priority=normal data=ready "
        'cmd="python train.py --cfg base.yaml" (in use)'
    )
    assert lines[2] == "  changed: type, hours"
    assert lines[4] == "  changed: gpus, hours"
    assert lines[6] == "  first version"

    shorter = gpu(vision, "UBOB", "template history bert-base limit=2")
    assert [v.version for v in shorter.result.versions] == [3, 2]  # type: ignore[attr-defined]
    # The oldest shown still says what it changed: the one before it was read too.
    assert shorter.result.versions[1].changed == ("gpus", "hours")  # type: ignore[attr-defined]
    assert "… and 1 older version: /gpu template history bert-base limit=…" in shorter.text


def test_show_gives_the_latest_or_any_saved_version(vision: Paika) -> None:
    three_versions(vision)
    assert (
        "bert-base v3 (by <@UALICE>): gpus=8 type=H100"
        in gpu(vision, "UBOB", "template show bert-base").text
    )
    old = gpu(vision, "UBOB", "template show bert-base version=2")
    assert isinstance(old.result, TemplateVersionView)
    assert old.result.fields["gpus"] == 8 and old.result.fields["hours"] == 30.0
    assert old.text.startswith("bert-base v2 (saved 2026-11-02 17:05 CST by <@UALICE>): gpus=8")
    assert old.text.endswith("changed: gpus, hours")
    missing = refused(vision, "UBOB", "template show bert-base version=7")
    assert 'Template "bert-base" has no version 7 (versions: 1, 2, 3)' in missing
    assert "/gpu template history bert-base" in missing


def test_history_is_for_the_team_and_admins(vision: Paika) -> None:
    gpu(vision, "UALICE", BASE)
    assert "no template" in refused(vision, "UNICK", "template history bert-base")
    other = refused(vision, "UNICK", "template history bert-base team=vision")
    assert "Team vision's templates are for its members and admins; you are in nlp" in other
    admin = gpu(vision, "UADMIN", "template history bert-base team=vision").result
    assert [v.version for v in admin.versions] == [1]  # type: ignore[attr-defined]
    # Changing a template stays its author's, its team's approvers' or an admin's, and a
    # refused save keeps no version.
    assert "only they, your team's approvers or an admin" in refused(
        vision, "UBOB", BASE.replace("gpus=4", "gpus=1")
    )
    assert [v.version for v in versions(vision)] == [1]


def test_a_deleted_template_keeps_its_versions_and_goes_on_from_them(vision: Paika) -> None:
    gpu(vision, "UALICE", BASE)
    gpu(vision, "UALICE", BASE.replace("gpus=4", "gpus=8"))
    gpu(vision, "UALICE", "template delete bert-base")
    gone = gpu(vision, "UALICE", "template history bert-base")
    assert gone.result.latest is None  # type: ignore[attr-defined]
    assert "The template was deleted; its versions are kept." in gone.text
    assert "(in use)" not in gone.text
    again = gpu(vision, "UBOB", BASE.replace("gpus=4", "gpus=1")).text
    assert 'Saved template "bert-base" (v3)' in again
    assert [(v.version, v.author) for v in versions(vision)] == [
        (1, "UALICE"),
        (2, "UALICE"),
        (3, "UBOB"),
    ]


def test_a_job_keeps_the_version_it_came_from_and_its_spec(vision: Paika) -> None:
    gpu(vision, "UALICE", BASE)
    gpu(vision, "UALICE", BASE.replace("gpus=4", "gpus=2"))
    gpu(vision, "UBOB", "submit template=bert-base name=bert-lr1 hours=30 data=pending")
    gpu(vision, "UALICE", BASE.replace("gpus=4", "gpus=1"))  # v3, after the job
    job = jobs(vision)["bert-lr1"]
    spec = {
        "gpus": 2,
        "type": ["A100-80GB"],
        "hours": 30.0,
        "priority": "normal",
        "data": "pending",
        "cmd": "python train.py --cfg base.yaml",
        "template": "bert-base",
        "name": "bert-lr1",
        "template_version": 2,
    }
    assert (job.template, job.template_version, job.gpus) == ("bert-base", 2, 2)
    assert job.spec == spec

    # A bump and a ready change the job, never its spec.
    gpu(vision, "UBOB", f'bump {job.id} to=core reason="paper deadline"')
    gpu(vision, "UVERA", "approve 1")
    gpu(vision, "UBOB", f"ready {job.id}")
    after = jobs(vision)["bert-lr1"]
    assert (after.priority, after.data_ready) == ("core", True)
    assert (after.spec, after.template_version) == (spec, 2)

    status = gpu(vision, "UBOB", f"status {job.id}").text
    assert "template bert-base v2" in status
    assert (
        "Submitted as: /gpu submit gpus=2 type=A100-80GB hours=30.0 priority=normal data=pending "
        'template=bert-base name=bert-lr1 cmd="python train.py --cfg base.yaml"'
    ) in status
    # Outside the team the command is hidden, and so is the spec that holds it.
    assert "Submitted as" not in gpu(vision, "UNICK", f"status {job.id}").text


def test_a_job_without_a_template_keeps_the_keys_given(vision: Paika) -> None:
    gpu(
        vision,
        "UALICE",
        'submit name=plain hours=2 priority=normal data=/mnt/nas/imagenet type=A100-80GB,H100-80GB cmd="python a.py"',
    )
    job = jobs(vision)["plain"]
    # The grammar's defaults (gpus=1) are the policy's, not what was asked: not in the spec.
    assert job.spec == {
        "name": "plain",
        "hours": 2.0,
        "priority": "normal",
        "data": "/mnt/nas/imagenet",
        "type": ["A100-80GB", "H100-80GB"],
        "cmd": "python a.py",
    }
    assert (job.template, job.template_version) == (None, None)
    assert "template" not in gpu(vision, "UALICE", f"status {job.id}").text.split("Submitted")[0]


def test_a_taken_version_number_is_a_lost_race(vision: Paika) -> None:
    """Two saves that both read v1: the second's conditional update or its version row
    fails, and lost_race says run it again (on every backend)."""
    gpu(vision, "UALICE", BASE)
    team_id = template(vision).team_id
    with Session(vision.engine) as first, Session(vision.engine) as second:
        mine, theirs = (s.exec(select(Template)).one() for s in (first, second))
        now = vision.clock.now()
        template_queries.advance(
            session=first, template=mine, read_version=1, version=2, fields={"gpus": 2}, at=now
        )
        template_queries.add_version(
            session=first,
            team_id=team_id,
            name="bert-base",
            version=2,
            fields={"gpus": 2},
            author="UALICE",
            at=now,
        )
        first.commit()
        with pytest.raises(StaleDataError) as stale:
            template_queries.advance(
                session=second,
                template=theirs,
                read_version=1,
                version=2,
                fields={"gpus": 3},
                at=now,
            )
        assert lost_race(stale.value)
        second.rollback()
        with pytest.raises(Exception) as taken:
            template_queries.add_version(
                session=second,
                team_id=team_id,
                name="bert-base",
                version=2,
                fields={"gpus": 3},
                author="UBOB",
                at=now,
            )
        assert lost_race(taken.value), taken.value
    assert [(v.version, v.fields) for v in versions(vision)][1] == (2, {"gpus": 2})


def test_saves_at_once_on_a_server_each_get_their_own_version(vision: Paika) -> None:
    if vision.engine.dialect.name == "sqlite":
        pytest.skip("SQLite serialises writers; the race needs a server (PostgreSQL, MariaDB)")
    gpu(vision, "UADMIN", "admin member add <@UVAL> team=vision role=approver")
    gpu(vision, "UALICE", BASE)
    users = ["UALICE", "UVERA", "UVAL"]
    rounds = 4
    replies: list[tuple[int, Reply]] = []
    barrier = threading.Barrier(len(users))

    def save(user: int) -> None:
        for n in range(rounds):
            gpus = 10 + n * len(users) + user
            barrier.wait()
            replies.append((gpus, vision.run(BASE.replace("gpus=4", f"gpus={gpus}"), users[user])))

    threads = [threading.Thread(target=save, args=(i,)) for i in range(len(users))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(replies) == rounds * len(users)
    assert all(reply.ok for _, reply in replies), [r.text for _, r in replies if not r.ok]
    kept = versions(vision)
    # Numbered 1, 2, 3 … without a gap or a repeat, and every save is one of them.
    assert [v.version for v in kept] == list(range(1, 2 + rounds * len(users)))
    assert sorted(v.fields["gpus"] for v in kept[1:]) == sorted(g for g, _ in replies)
    for gpus, reply in replies:
        number = next(v.version for v in kept if v.fields["gpus"] == gpus)
        assert f"to v{number}:" in reply.text
    latest = template(vision)
    assert (latest.version, latest.fields) == (kept[-1].version, kept[-1].fields)


def test_again_repeats_a_job_exactly_and_keys_given_win(vision: Paika) -> None:
    gpu(vision, "UALICE", BASE)
    gpu(vision, "UALICE", BASE.replace("gpus=4", "gpus=2"))
    gpu(vision, "UBOB", "submit template=bert-base name=bert-lr1 hours=30")
    first = jobs(vision)["bert-lr1"]
    gpu(vision, "UALICE", BASE.replace("gpus=4", "gpus=1"))  # v3: again= still repeats v2

    gpu(vision, "UALICE", f"submit again={first.id}")
    same = [j for j in jobs(vision).values() if j.name == "bert-lr1" and j.id != first.id][0]
    assert (same.gpus, same.est_gpu_hours, same.command, same.owner) == (
        2,
        30,
        "python train.py --cfg base.yaml",
        "UALICE",
    )
    assert (same.template, same.template_version, same.spec) == ("bert-base", 2, first.spec)

    gpu(vision, "UBOB", "submit again=bert-lr1 name=bert-lr2 gpus=1")
    changed = jobs(vision)["bert-lr2"]
    assert (changed.gpus, changed.est_gpu_hours, changed.template_version) == (1, 30, 2)
    assert changed.spec == {**(first.spec or {}), "name": "bert-lr2", "gpus": 1}

    # again= with a template: the template's (latest) fields over the spec, given keys over both.
    gpu(vision, "UBOB", "submit again=bert-lr2 template=bert-base name=bert-lr3")
    third = jobs(vision)["bert-lr3"]
    assert (third.gpus, third.est_gpu_hours, third.template_version) == (1, 24, 3)

    # Another team's job holds its command: only its team repeats it.
    other = refused(vision, "UNICK", f"submit again={first.id}")
    assert f"Job #{first.id} belongs to team vision; only its members can submit it again" in other


def test_again_refuses_a_job_from_before_specs_were_kept(vision: Paika) -> None:
    gpu(vision, "UALICE", 'submit name=old hours=2 priority=normal data=ready cmd="python a.py"')
    old = jobs(vision)["old"]
    with Session(vision.engine) as session:
        row = session.get(type(old), old.id)
        assert row is not None
        row.spec = None
        session.add(row)
        session.commit()
    refusal = refused(vision, "UALICE", f"submit again={old.id}")
    assert f"Job #{old.id} was submitted before paika kept each job's submission" in refusal
    assert f"/gpu status {old.id}" in refusal
