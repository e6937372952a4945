"""The job state machine: every legal move, and a clear error for every other."""

from __future__ import annotations

import itertools

import pytest

from bot.said import problem
from scheduler.errors import IllegalTransition, Problem
from scheduler.lifecycle import TRANSITIONS, can_move, check_move
from storage.models import Job, JobState

S = JobState
LEGAL = {
    (S.WAITING_DATA, S.QUEUED),
    (S.WAITING_DATA, S.CANCELLED),
    (S.QUEUED, S.WAITING_DATA),
    (S.QUEUED, S.RUNNING),
    (S.QUEUED, S.CANCELLED),
    (S.RUNNING, S.QUEUED),
    (S.RUNNING, S.SUCCEEDED),
    (S.RUNNING, S.FAILED),
    (S.RUNNING, S.CANCELLED),
    (S.RUNNING, S.PREEMPTED),
    # The start was refused, or the run was lost, and the job's data is no longer ready.
    (S.RUNNING, S.WAITING_DATA),
    # Its host went silent: unknown until the host answers again or paika gives up.
    (S.RUNNING, S.UNKNOWN),
    (S.UNKNOWN, S.RUNNING),
    (S.UNKNOWN, S.SUCCEEDED),
    (S.UNKNOWN, S.FAILED),
    (S.UNKNOWN, S.CANCELLED),
    (S.UNKNOWN, S.PREEMPTED),
    (S.UNKNOWN, S.QUEUED),
    (S.UNKNOWN, S.WAITING_DATA),
    (S.PREEMPTED, S.QUEUED),
    (S.PREEMPTED, S.WAITING_DATA),
    (S.PREEMPTED, S.CANCELLED),
}


def test_every_state_has_an_entry() -> None:
    assert set(TRANSITIONS) == set(JobState)


@pytest.mark.parametrize(
    ("current", "wanted"), list(itertools.product(JobState, JobState)), ids=lambda s: str(s)
)
def test_only_the_documented_moves_are_legal(current: JobState, wanted: JobState) -> None:
    assert can_move(current, wanted) == ((current, wanted) in LEGAL)


def test_an_illegal_move_says_what_and_how() -> None:
    job = Job(
        id=7, name="x", owner="U1", team_id=1, est_gpu_hours=1, command="true", state=S.SUCCEEDED
    )
    with pytest.raises(IllegalTransition) as caught:
        check_move(job, S.RUNNING)
    assert caught.value.problem is Problem.CANNOT_BECOME
    assert (
        problem("en", caught.value)
        == "Job #7 is succeeded; it cannot become running.\nIt has already finished; submit it again to rerun it."
    )
    assert (
        problem("zh", caught.value)
        == "任务 #7 已完成，不能变为运行中。\n它已经完成；如要重跑请重新提交。"
    )
    assert (caught.value.current, caught.value.wanted) == ("succeeded", "running")
