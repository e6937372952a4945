"""Reasons and ETAs are worked out once per change of state and shared by every command
of the process; a command's answer still shows its own change."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.service.jobs import SubmitResult


def _ok(paika: Paika, user: str, text: str) -> object:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply.result


def _submit(paika: Paika, user: str, name: str) -> SubmitResult:
    result = _ok(
        paika, user, f'submit name={name} gpus=1 hours=2 priority=normal data=ready cmd="x"'
    )
    assert isinstance(result, SubmitResult)
    return result


@pytest.fixture
def team(paika: Paika) -> Paika:
    for user in ("UALICE", "UBOB"):
        _ok(paika, "UADMIN", f"admin member add <@{user}> team=vision")
    return paika


def test_reads_of_an_unchanged_state_share_one_policy_run(team: Paika) -> None:
    _submit(team, "UALICE", "a")
    _submit(team, "UBOB", "b")
    before, listed = team.waits_board.runs, team.waits_board.listings
    for text in ("queue", "queue mine", "status a", "board", "queue team"):
        _ok(team, "UALICE", text)
        _ok(team, "UBOB", text)
    assert team.waits_board.runs - before <= 1
    assert team.waits_board.listings - listed <= 1  # the queue is read from the database once
    # Shared, but each scope still shows its own jobs.
    mine = _ok(team, "UBOB", "queue mine")
    assert [view.job.name for view in mine.waiting] == ["b"]  # type: ignore[attr-defined]


def test_a_change_is_seen_by_the_next_read_and_by_its_own_answer(team: Paika) -> None:
    _submit(team, "UALICE", "a")
    _ok(team, "UALICE", "queue")
    submitted = _submit(team, "UBOB", "b")
    assert submitted.view.wait is not None  # the answer carries its own job's reason
    assert submitted.view.job.name == "b"
    waiting = [view.job.name for view in _ok(team, "UALICE", "queue").waiting]  # type: ignore[attr-defined]
    assert waiting == ["a", "b"]
    _ok(team, "UBOB", "cancel b")
    waiting = [view.job.name for view in _ok(team, "UALICE", "queue").waiting]  # type: ignore[attr-defined]
    assert waiting == ["a"]


def test_a_change_outside_the_jobs_is_seen_too(team: Paika) -> None:
    _submit(team, "UALICE", "a")
    first = _ok(team, "UALICE", "status a").view.wait  # type: ignore[attr-defined]
    _ok(team, "UADMIN", "admin host add gpu-01 url=http://127.0.0.1:9")
    runs = team.waits_board.runs
    again = _ok(team, "UALICE", "status a").view.wait  # type: ignore[attr-defined]
    # No job changed, but the hosts did: the reasons are worked out afresh.
    assert team.waits_board.runs == runs + 1 and again is not None and first is not None


def test_the_policys_clock_moving_on_a_cycle_means_a_fresh_run(
    team: Paika, clock: ManualClock
) -> None:
    _submit(team, "UALICE", "a")
    _ok(team, "UALICE", "queue")
    runs = team.waits_board.runs
    clock.advance(timedelta(seconds=team.policy.scheduler.cycle_seconds))
    _ok(team, "UALICE", "queue")
    assert team.waits_board.runs == runs + 1


def test_a_burst_of_submits_shares_policy_runs_and_each_answer_has_its_own_job(
    team: Paika,
) -> None:
    if team.engine.dialect.name == "sqlite":
        pytest.skip("SQLite serialises writers; the burst needs a server (PostgreSQL, MariaDB)")
    before = team.waits_board.runs
    names = [f"burst{i}" for i in range(20)]
    with ThreadPoolExecutor(max_workers=10) as pool:
        results = list(pool.map(lambda n: _submit(team, ("UALICE", "UBOB")[len(n) % 2], n), names))
    assert [r.view.job.name for r in results] == names
    assert all(r.view.wait is not None for r in results)
    assert team.waits_board.runs - before < len(names)


def test_answers_read_after_a_bursts_changes_share_one_policy_run(team: Paika) -> None:
    """The bot makes every queued command's change first, then reads the answers: twenty
    submits, a cancel and twenty queue listings cost one run of the policy, and each answer
    still shows its own job, as of after the whole burst."""
    _submit(team, "UALICE", "early")
    before, listed = team.waits_board.runs, team.waits_board.listings
    answers = []
    for i in range(20):
        user = ("UALICE", "UBOB")[i % 2]
        answers.append(
            team.begin_run(
                f'submit name=s{i} gpus=1 hours=2 priority=normal data=ready cmd="x"', user
            )
        )
        answers.append(team.begin_run("queue", user))
    answers.append(team.begin_run("cancel early", "UALICE"))
    assert team.waits_board.runs == before  # nothing read yet
    replies = [answer() for answer in answers]
    assert all(reply.ok for reply in replies), [r.text for r in replies if not r.ok]
    assert team.waits_board.runs - before == 1
    assert team.waits_board.listings - listed == 1
    submitted = [reply.result for reply in replies[0:40:2]]
    assert [r.view.job.name for r in submitted] == [f"s{i}" for i in range(20)]  # type: ignore[attr-defined]
    assert all(r.view.wait is not None for r in submitted)  # type: ignore[attr-defined]
    listing = replies[1].result  # the first queue command's answer already sees all twenty
    assert [v.job.name for v in listing.waiting] == [f"s{i}" for i in range(20)]  # type: ignore[attr-defined]


def test_an_answer_read_later_reports_a_refused_change_and_changes_nothing(team: Paika) -> None:
    answer = team.begin_run("cancel nosuchjob", "UALICE")
    refused = team.begin_run("admin host add gpu-09 url=http://127.0.0.1:9", "UALICE")
    late = team.begin_run("submit name=x gpus=1", "UALICE")  # no hours: a parse error
    for reply in (answer(), refused(), late()):
        assert not reply.ok and reply.error is not None
    assert "admin" in refused().text.lower()
