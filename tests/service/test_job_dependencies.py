"""Jobs that wait for other jobs (after=, afterany=, data=after:), as users meet them: the
submit's checks and refusals, the wait each says, the settling when the upstream job ends,
the owner told once when it fails, and the release (issue 32)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import Session, select
from test_jobs_flow import busy_cluster, gpu, jobs, refused

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.dependencies import settle
from scheduler.notices.kinds import NoticeKind
from storage.models import AuditEvent, Job, JobDependency, JobEvent, JobState, Notice

CMD = 'cmd="python step.py"'


@pytest.fixture
def team(paika: Paika) -> Paika:
    busy_cluster(paika)
    for user, team_name, role in [
        ("UALICE", "vision", "member"),
        ("UBOB", "vision", "member"),
        ("UVERA", "vision", "approver"),
    ]:
        gpu(paika, "UADMIN", f"admin member add <@{user}> team={team_name} role={role}")
    return paika


def submit(paika: Paika, name: str, extra: str = "", user: str = "UALICE") -> int:
    gpu(paika, user, f"submit name={name} gpus=1 hours=1 priority=normal data=ready {CMD} {extra}")
    return jobs(paika)[name].id or 0


def end(paika: Paika, job_id: int, state: JobState) -> None:
    """Say a job ended (what the reconcile writes once its host reports it)."""
    with Session(paika.engine) as session:
        job = session.get(Job, job_id)
        assert job is not None
        job.state = state
        session.add(job)
        session.commit()


def rows(paika: Paika, job_id: int) -> list[tuple[int, str, str]]:
    with Session(paika.engine) as session:
        found = session.exec(select(JobDependency).where(JobDependency.job_id == job_id)).all()
        return [(row.upstream_id, row.kind, row.state) for row in found]


def held_notices(paika: Paika) -> list[Notice]:
    with Session(paika.engine) as session:
        kind = NoticeKind.JOB_UPSTREAM_FAILED
        return list(session.exec(select(Notice).where(Notice.kind == kind)).all())


def test_a_job_after_another_waits_for_it_and_says_so(team: Paika) -> None:
    prep = submit(team, "prep")
    train = submit(team, "train", f"after=#{prep}")
    assert rows(team, train) == [(prep, "success", "waiting")]
    status = gpu(team, "UALICE", f"status {train}").text
    assert f"waiting for job #{prep}" in status
    assert jobs(team)["train"].state == JobState.QUEUED  # its data is ready: it waits for prep


def test_a_dependant_goes_on_once_its_upstream_succeeds(team: Paika, clock: ManualClock) -> None:
    prep = submit(team, "prep")
    train = submit(team, "train", f"after={prep}")
    end(team, prep, JobState.SUCCEEDED)
    done = settle(team.engine, clock.now())
    assert len(done.met) == 1 and not done.broken
    assert rows(team, train) == [(prep, "success", "met")]
    assert f"waiting for job #{prep}" not in gpu(team, "UALICE", f"status {train}").text
    # Settled once: a second pass finds nothing to do.
    again = settle(team.engine, clock.now())
    assert again.met == [] and again.broken == [] and again.told == []


def test_data_after_makes_the_upstream_success_the_data_ready_event(
    team: Paika, clock: ManualClock
) -> None:
    prep = submit(team, "prep")
    gpu(
        team, "UALICE", f"submit name=train gpus=1 hours=1 priority=normal data=after:#{prep} {CMD}"
    )
    train = jobs(team)["train"]
    assert (train.state, train.data_ready) == (JobState.WAITING_DATA, False)
    assert rows(team, train.id or 0) == [(prep, "data", "waiting")]
    end(team, prep, JobState.SUCCEEDED)
    clock.advance(timedelta(minutes=3))
    settle(team.engine, clock.now())
    train = jobs(team)["train"]
    assert (train.state, train.data_ready) == (JobState.QUEUED, True)
    assert train.data_ready_at is not None
    with Session(team.engine) as session:
        moved = session.exec(
            select(JobEvent).where(JobEvent.job_id == train.id, JobEvent.to_state == "queued")
        ).one()
    assert moved.reason_code == "data_from_job" and moved.reason_values == {"upstream": prep}
    assert f"job #{prep} succeeded" in gpu(team, "UALICE", f"status {train.id}").text


def test_afterany_goes_on_whatever_the_outcome(team: Paika, clock: ManualClock) -> None:
    prep = submit(team, "prep")
    cleanup = submit(team, "cleanup", f"afterany={prep}")
    end(team, prep, JobState.FAILED)
    settle(team.engine, clock.now())
    assert rows(team, cleanup) == [(prep, "end", "met")]
    assert held_notices(team) == []


def test_a_failed_upstream_holds_its_dependants_and_tells_each_owner_once(
    team: Paika, clock: ManualClock
) -> None:
    prep = submit(team, "prep")
    train = submit(team, "train", f"after={prep}")
    evals = submit(team, "eval", f"after=#{prep}", user="UBOB")
    end(team, prep, JobState.FAILED)
    done = settle(team.engine, clock.now())
    assert len(done.broken) == 2
    assert sorted(n.to_users for n in done.told) == [("UALICE",), ("UBOB",)]
    assert rows(team, train) == [(prep, "success", "broken")]
    status = gpu(team, "UALICE", f"status {train}").text
    assert f"held: job #{prep}" in status and "/gpu release" in status
    # Told once: later passes, and a second scheduler's, tell nobody again.
    clock.advance(timedelta(minutes=5))
    assert settle(team.engine, clock.now()).told == []
    assert len(held_notices(team)) == 2
    assert {n.detail["detail"]["job_id"] for n in held_notices(team)} == {train, evals}


def test_release_lets_a_held_job_run_and_is_audited(team: Paika, clock: ManualClock) -> None:
    prep = submit(team, "prep")
    train = submit(team, "train", f"after={prep}")
    end(team, prep, JobState.CANCELLED)
    settle(team.engine, clock.now())
    # Not someone else's to release.
    assert "alice" in refused(team, "UBOB", f"release {train}").lower()
    reply = gpu(team, "UALICE", f"release {train}")
    assert "no longer waits" in reply.text
    assert rows(team, train) == [(prep, "success", "released")]
    assert "held" not in gpu(team, "UALICE", f"status {train}").text
    with Session(team.engine) as session:
        actions = [e.action for e in session.exec(select(AuditEvent)).all()]
    assert "job.release" in actions
    # Nothing left to release: said, with what to look at instead.
    again = refused(team, "UALICE", f"release {train}")
    assert f"Job #{train} waits for no other job" in again


def test_release_of_a_job_waiting_for_its_data_from_another_marks_the_data_ready(
    team: Paika,
) -> None:
    prep = submit(team, "prep")
    gpu(team, "UALICE", f"submit name=train gpus=1 hours=1 priority=normal data=after:{prep} {CMD}")
    train = jobs(team)["train"]
    gpu(team, "UVERA", f"release {train.id}")  # an approver of the team may
    train = jobs(team)["train"]
    assert (train.state, train.data_ready) == (JobState.QUEUED, True)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ("after=#999", "after= names job #999, and there is no job #999"),
        ("afterany=#998", "afterany= names job #998"),
        ("data=after:#997", "data= names job #997"),
    ],
)
def test_an_upstream_that_does_not_exist_is_refused_and_nothing_is_queued(
    team: Paika, extra: str, says: str
) -> None:
    before = len(jobs(team))
    data = "" if extra.startswith("data=") else "data=ready"
    text = refused(
        team, "UALICE", f"submit name=x gpus=1 hours=1 priority=normal {data} {CMD} {extra}"
    )
    assert says in text and "/gpu queue" in text
    assert len(jobs(team)) == before


def test_waiting_for_the_success_of_a_failed_job_is_refused_with_the_fix(team: Paika) -> None:
    prep = submit(team, "prep")
    end(team, prep, JobState.FAILED)
    text = refused(
        team,
        "UALICE",
        f"submit name=train gpus=1 hours=1 priority=normal data=ready {CMD} after={prep}",
    )
    assert f"Job #{prep} is failed" in text
    assert f"again={prep}" in text and f"afterany={prep}" in text
    # afterany= accepts it: the failed job has ended, so it is met at once.
    train = submit(team, "train", f"afterany={prep}")
    assert rows(team, train) == [(prep, "end", "met")]


def test_an_upstream_already_succeeded_is_met_at_submit(team: Paika) -> None:
    prep = submit(team, "prep")
    end(team, prep, JobState.SUCCEEDED)
    gpu(
        team, "UALICE", f"submit name=train gpus=1 hours=1 priority=normal data=after:#{prep} {CMD}"
    )
    train = jobs(team)["train"]
    assert (train.state, train.data_ready) == (JobState.QUEUED, True)
    assert rows(team, train.id or 0) == [(prep, "data", "met")]


def test_one_job_named_twice_is_one_dependency_of_the_strongest_kind(team: Paika) -> None:
    prep = submit(team, "prep")
    gpu(
        team,
        "UALICE",
        f"submit name=train gpus=1 hours=1 priority=normal data=after:#{prep} {CMD} after={prep},#{prep} "
        f"afterany={prep}",
    )
    assert rows(team, jobs(team)["train"].id or 0) == [(prep, "data", "waiting")]


@pytest.mark.parametrize(
    "value", ["#0", "x", "#1,,#2", "#-3", ",".join(f"#{n}" for n in range(1, 18))]
)
def test_a_malformed_list_of_jobs_is_refused_by_the_grammar(team: Paika, value: str) -> None:
    text = refused(
        team,
        "UALICE",
        f"submit name=x gpus=1 hours=1 priority=normal data=ready {CMD} after={value}",
    )
    assert "after must be job ids like #12, or #12,#13 (at most 16)" in text


def test_data_after_without_a_job_number_is_refused_not_taken_for_a_location(team: Paika) -> None:
    text = refused(
        team, "UALICE", f"submit name=x gpus=1 hours=1 priority=normal data=after:prep {CMD}"
    )
    assert "after:#12 (ready when job #12 succeeds)" in text


def test_the_submission_is_kept_and_repeats_with_its_waits(team: Paika) -> None:
    prep = submit(team, "prep")
    gpu(
        team,
        "UALICE",
        f"submit name=train gpus=1 hours=1 priority=normal data=after:#{prep} {CMD} after={prep}",
    )
    train = jobs(team)["train"]
    assert train.spec is not None and train.spec["data"] == f"after:#{prep}"
    gpu(team, "UALICE", f"submit again={train.id} name=train2")
    again = jobs(team)["train2"]
    assert rows(team, again.id or 0) == [(prep, "data", "waiting")]


def test_a_dependant_cancelled_before_its_upstream_fails_tells_nobody(
    team: Paika, clock: ManualClock
) -> None:
    prep = submit(team, "prep")
    train = submit(team, "train", f"after={prep}")
    gpu(team, "UALICE", f"cancel {train}")
    end(team, prep, JobState.FAILED)
    assert settle(team.engine, clock.now()).told == []
    assert held_notices(team) == []
