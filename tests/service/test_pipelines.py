"""A pipeline held in templates (then=, issue 32): one submit makes every step, each waiting
for the one before (its data made by it unless its template says data=ready); a chain that
loops is refused when saved and when submitted; a step that cannot be submitted leaves none."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select
from test_jobs_flow import busy_cluster, gpu, refused

from scheduler.app import Paika
from storage.models import Job, JobDependency


@pytest.fixture
def team(paika: Paika) -> Paika:
    busy_cluster(paika)
    gpu(paika, "UADMIN", "admin member add <@UALICE> team=vision role=member")
    return paika


def _save(paika: Paika, name: str, extra: str) -> None:
    gpu(paika, "UALICE", f"template save {name} gpus=1 hours=1 priority=normal {extra}")


def _jobs(paika: Paika) -> dict[str, Job]:
    with Session(paika.engine) as session:
        return {j.name: j for j in session.exec(select(Job)).all()}


def _waits(paika: Paika, job_id: int) -> list[tuple[int, str]]:
    with Session(paika.engine) as session:
        rows = session.exec(select(JobDependency).where(JobDependency.job_id == job_id)).all()
        return sorted((r.upstream_id, r.kind) for r in rows)


def test_one_submit_makes_every_step_each_after_the_one_before(team: Paika) -> None:
    _save(team, "eval", 'data=ready cmd="python eval.py"')
    _save(team, "train", 'cmd="python train.py" then=eval')
    _save(team, "prep", 'data=ready cmd="python prep.py" then=train')
    reply = gpu(team, "UALICE", "submit template=prep name=run1 project=llm round=3")
    jobs = _jobs(team)
    prep, train, evals = jobs["run1"], jobs["run1-train"], jobs["run1-eval"]
    assert (
        f"Pipeline: #{prep.id} run1 → #{train.id} run1-train → #{evals.id} run1-eval" in reply.text
    )
    assert _waits(team, train.id or 0) == [(prep.id, "data")]  # its data is what prep makes
    assert _waits(team, evals.id or 0) == [(train.id, "success")]  # data=ready: only after
    assert (train.data_ready, evals.data_ready) == (False, True)
    assert {(j.project, j.round) for j in (prep, train, evals)} == {("llm", "3")}
    assert train.template == "train" and train.command == "python train.py"


def test_a_chain_that_loops_is_refused_when_saved(team: Paika) -> None:
    _save(team, "a", 'cmd="a" then=b')
    _save(team, "b", 'cmd="b" then=c')
    text = refused(team, "UALICE", 'template save c gpus=1 hours=1 priority=normal cmd="c" then=a')
    assert "come back on themselves: c, a, b, c" in text


def test_a_step_that_cannot_be_submitted_leaves_no_job(team: Paika) -> None:
    gpu(team, "UALICE", "template save broken gpus=1")  # no cmd, no hours: not a job
    _save(team, "first", 'data=ready cmd="true" then=broken')
    before = len(_jobs(team))
    text = refused(team, "UALICE", "submit template=first name=p")
    assert "missing" in text
    assert len(_jobs(team)) == before


def test_a_pipeline_is_not_an_array(team: Paika) -> None:
    _save(team, "next", 'data=ready cmd="true"')
    _save(team, "first", 'data=ready cmd="true" then=next')
    assert "make arrays" in refused(team, "UALICE", "submit template=first name=p count=3")
