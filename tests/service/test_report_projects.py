"""Projects and rounds: given on `/gpu submit`, carried by templates and `again=`, refused
with a clear error when they are not names, shown with the job; on every backend."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select

from scheduler.app import Paika, Reply
from storage.models import Job

SUBMIT = 'submit name={name} hours=4 priority=normal data=ready cmd="python train.py"'


def gpu(paika: Paika, text: str, user: str = "UALICE") -> Reply:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply


def refused(paika: Paika, text: str, user: str = "UALICE") -> str:
    reply = paika.run(text, user)
    assert not reply.ok, reply.text
    return reply.text


def job_named(paika: Paika, name: str) -> Job:
    with Session(paika.engine) as session:
        return session.exec(select(Job).where(Job.name == name)).one()


@pytest.fixture
def member(paika: Paika) -> Paika:
    gpu(paika, "admin member add <@UALICE> team=vision", "UADMIN")
    return paika


def test_a_job_is_stored_with_its_project_and_round(member: Paika) -> None:
    gpu(member, SUBMIT.format(name="pre-3") + " project=llm-pretrain round=3")
    job = job_named(member, "pre-3")
    assert (job.project, job.round) == ("llm-pretrain", "3")
    assert job.spec is not None and job.spec["project"] == "llm-pretrain"
    status = gpu(member, "status pre-3").text
    assert "project=llm-pretrain" in status and "round=3" in status
    gpu(member, SUBMIT.format(name="plain"))
    assert (job_named(member, "plain").project, job_named(member, "plain").round) == (None, None)


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("project=llm/pretrain", "project cannot hold U+002F (character 4): a symbol"),
        ('project="llm pretrain"', "project cannot hold U+0020 (character 4): a space"),
        ("round=#3", "round cannot hold U+0023 (character 1): a symbol"),
        ("project=" + "p" * 65, "(at most 64 characters, starting with a letter or digit)"),
        ("round=" + "r" * 33, "(at most 32 characters, starting with a letter or digit)"),
        ("project=医疗\u200d对话", "project cannot hold U+200D (character 3): an invisible"),
    ],
)
def test_a_project_or_round_that_is_not_a_name_is_refused_saying_how(
    member: Paika, given: str, says: str
) -> None:
    text = refused(member, SUBMIT.format(name="bad") + " " + given)
    assert says in text and "Example:" in text
    with Session(member.engine) as session:
        assert session.exec(select(Job)).all() == []


def test_a_template_carries_a_default_project_and_again_repeats_it(member: Paika) -> None:
    gpu(
        member,
        "template save pre gpus=1 hours=4 priority=normal data=ready "
        'cmd="python train.py" project=llm-pretrain',
    )
    gpu(member, "submit template=pre name=pre-1 round=1")
    first = job_named(member, "pre-1")
    assert (first.project, first.round) == ("llm-pretrain", "1")
    # A project given wins over the template's.
    gpu(member, "submit template=pre name=side project=side-quest")
    assert job_named(member, "side").project == "side-quest"
    # again= repeats the project and round, and a new round= replaces the old one.
    gpu(member, f"submit again={first.id} name=pre-2 round=2")
    again = job_named(member, "pre-2")
    assert (again.project, again.round) == ("llm-pretrain", "2")
    gpu(member, f"submit again={again.id} name=pre-2b")
    assert job_named(member, "pre-2b").round == "2"
    shown = gpu(member, "template show pre").text
    assert "project=llm-pretrain" in shown
