"""Arrays as users submit and follow them (count=, sweep=, max_running=, issue 32): one
submit makes the jobs, the array is named by its first job's number, #40.3 names one job of
it, status summarises it, cancel reaches all of it, and every refusal names the fix."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select
from test_jobs_flow import busy_cluster, gpu, refused

from scheduler.app import Paika
from storage.models import Job, JobState

CMD = 'cmd="python train.py --lr {lr} --bs {bs}"'
BASE = "submit name=sweep gpus=1 hours=1 priority=normal data=ready"


@pytest.fixture
def team(paika: Paika) -> Paika:
    busy_cluster(paika)
    for user, role in [("UALICE", "member"), ("UBOB", "member"), ("UVERA", "approver")]:
        gpu(paika, "UADMIN", f"admin member add <@{user}> team=vision role={role}")
    return paika


def members(paika: Paika) -> list[Job]:
    with Session(paika.engine) as session:
        query = select(Job).where(Job.array_id.is_not(None)).order_by(Job.id)  # type: ignore[union-attr]
        return list(session.exec(query).all())


def test_a_sweep_makes_one_job_per_point_with_its_values_in_the_command(team: Paika) -> None:
    reply = gpu(team, "UALICE", f'{BASE} {CMD} sweep="lr=1e-4,3e-4 bs=32,64" max_running=2')
    jobs = members(team)
    first = jobs[0].id
    assert [j.name for j in jobs] == ["sweep.1", "sweep.2", "sweep.3", "sweep.4"]
    assert [j.command for j in jobs] == [
        "python train.py --lr 1e-4 --bs 32",
        "python train.py --lr 1e-4 --bs 64",
        "python train.py --lr 3e-4 --bs 32",
        "python train.py --lr 3e-4 --bs 64",
    ]
    assert {(j.array_id, j.array_size, j.array_max_running) for j in jobs} == {(first, 4, 2)}
    assert [j.array_index for j in jobs] == [1, 2, 3, 4]
    assert jobs[3].array_values == {"lr": "3e-4", "bs": "64"}
    assert f"Array #{first}: 4 jobs, #{first}.1 to #{first}.4" in reply.text
    assert "at most 2 running at once" in reply.text


def test_count_makes_copies_told_their_place(team: Paika) -> None:
    gpu(team, "UALICE", f'{BASE} cmd="python seed.py --seed $PAIKA_ARRAY_INDEX" count=3')
    jobs = members(team)
    assert [(j.array_index, j.command) for j in jobs] == [
        (1, "python seed.py --seed $PAIKA_ARRAY_INDEX"),
        (2, "python seed.py --seed $PAIKA_ARRAY_INDEX"),
        (3, "python seed.py --seed $PAIKA_ARRAY_INDEX"),
    ]
    assert all(j.array_values is None and j.array_max_running is None for j in jobs)


def test_status_of_the_array_lists_each_job_and_one_job_is_named_by_its_place(
    team: Paika,
) -> None:
    gpu(team, "UALICE", f'{BASE} {CMD} sweep="lr=1e-4,3e-4 bs=32"')
    first = members(team)[0].id
    whole = gpu(team, "UALICE", f"status {first}").text
    assert f"Array #{first}, 2 jobs: 2 queued" in whole
    assert f"#{first}.2 (job #{first + 1}) lr=3e-4 bs=32 — queued" in whole  # type: ignore[operator]
    one = gpu(team, "UALICE", f"status #{first}.2").text
    assert f"Array #{first}" not in one and "sweep.2" in one
    assert "no job 9 in an array" in refused(team, "UALICE", f"status #{first}.9")


def test_cancel_by_the_arrays_number_cancels_every_job_still_to_end(team: Paika) -> None:
    gpu(team, "UALICE", f'{BASE} cmd="true" count=3')
    first = members(team)[0].id
    gpu(team, "UALICE", f"cancel #{first}.2")
    assert [j.state for j in members(team)] == ["queued", "cancelled", "queued"]
    reply = gpu(team, "UALICE", f"cancel {first}").text
    assert f"Cancelled the 2 jobs of array #{first} still to end." in reply
    assert {j.state for j in members(team)} == {JobState.CANCELLED}


def test_anothers_array_is_not_theirs_to_cancel(team: Paika) -> None:
    gpu(team, "UALICE", f'{BASE} cmd="true" count=2')
    first = members(team)[0].id
    refused(team, "UBOB", f"cancel {first}")
    assert {j.state for j in members(team)} == {JobState.QUEUED}


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ('count=3 sweep="lr=1,2"', "Give one of them"),
        ("max_running=2", "this submit makes one job"),
        ('sweep="lr"', "is not a sweep's key and values"),
        ('sweep="lr=1,1"', "is not a sweep's key and values"),
        ('sweep="lr=1,2 lr=3,4"', "names lr twice"),
        ('sweep="lr=1"', "has one point"),
        (
            'sweep="a=1,2,3,4,5,6,7,8,9,10 b=1,2,3,4,5,6,7,8,9,10 c=1,2,3,4,5,6,7,8,9,10,11"',
            "makes 1100 jobs",
        ),
        ("count=1", "count must be"),
        ("count=1001", "count must be"),
    ],
)
def test_an_array_that_cannot_be_is_refused_and_nothing_is_queued(
    team: Paika, extra: str, says: str
) -> None:
    assert says in refused(team, "UALICE", f'{BASE} cmd="true" {extra}')
    assert members(team) == []


def test_a_core_array_asked_by_a_member_is_refused_with_the_fix(team: Paika) -> None:
    text = refused(
        team, "UALICE", 'submit name=s gpus=1 hours=1 priority=core data=ready cmd="true" count=3'
    )
    assert "would need 3 approvals" in text and "normal" in text
    gpu(team, "UVERA", 'submit name=s gpus=1 hours=1 priority=core data=ready cmd="true" count=3')
    assert {j.priority for j in members(team)} == {"core"}


def test_status_lists_the_jobs_best_first_by_the_metric_they_reported(team: Paika) -> None:
    gpu(team, "UALICE", f'{BASE} {CMD} sweep="lr=1,2,3 bs=8"')
    jobs = members(team)
    first = jobs[0].id
    with Session(team.engine) as session:
        for job, loss in zip(jobs, (0.9, 0.2, 0.5), strict=True):
            job.metrics = {"loss": loss, "step": 100}
            job.state = JobState.SUCCEEDED
            session.add(job)
        session.commit()
    text = gpu(team, "UALICE", f"status {first}").text
    assert "best first by loss (lower is better)" in text
    order = [text.index(f"#{first}.{i} ") for i in (2, 3, 1)]
    assert order == sorted(order)
    assert "loss 0.2" in text


def test_the_report_groups_by_array_with_its_best_metric(team: Paika) -> None:
    from datetime import timedelta

    from storage.models import LedgerEntry

    gpu(team, "UALICE", f'{BASE} {CMD} sweep="lr=1,2 bs=8" project=llm')
    jobs = members(team)
    first = jobs[0].id
    now = team.clock.now()
    with Session(team.engine) as session:
        for job, loss in zip(jobs, (0.7, 0.3), strict=True):
            job.metrics = {"loss": loss}
            job.state = JobState.SUCCEEDED
            session.add(job)
            session.add(
                LedgerEntry(
                    job_id=job.id or 0,
                    team_id=job.team_id,
                    gpu_type="A100-80GB",
                    started_at=now - timedelta(hours=2),
                    ended_at=now - timedelta(hours=1),
                    gpu_hours=1.0,
                    cost=2.2,
                    recorded_at=now,
                )
            )
        session.commit()
    text = gpu(team, "UALICE", "report by=array days=1").text
    assert "By array" in text and f"#{first}" in text
    assert "0.3" in text  # its best loss


def test_a_job_after_an_array_waits_for_every_job_of_it(team: Paika) -> None:
    from storage.models import JobDependency

    gpu(team, "UALICE", f'{BASE} {CMD} sweep="lr=1,2,3 bs=8"')
    ids = [j.id for j in members(team)]
    gpu(
        team,
        "UALICE",
        f'submit name=pick gpus=1 hours=1 priority=normal data=ready cmd="true" '
        f"after={ids[0]} afterany=#{ids[1]}",
    )
    with Session(team.engine) as session:
        pick = session.exec(select(Job).where(Job.name == "pick")).one()
        rows = session.exec(select(JobDependency).where(JobDependency.job_id == pick.id)).all()
    assert sorted((r.upstream_id, r.kind) for r in rows) == [(i, "success") for i in ids]
