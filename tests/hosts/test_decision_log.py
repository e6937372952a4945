"""The decision log and `/gpu why`, driven by real cycles against simulated agents over HTTP
on loopback (gpu-a: 2× A100-80GB, gpu-b: 2× T4-16GB); database times follow a manual clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent_world import job, make_cycle, ok, submit, until
from sqlalchemy import func
from sqlmodel import Session, col, select
from test_outages import LostAnswers

from bot.blocks.replies import reply
from bot.console import render
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.errors import NotFound, Problem, UserError
from scheduler.grammar.errors import Mistake, ParseError
from scheduler.notices.events import RecordingObserver
from scheduler.policy.plan import WaitCode
from scheduler.service.why import Step, StoryStep, WhyResult
from storage.models import Decision, JobState
from storage.models.memory import Decision as DecisionTable

SLEEP = "sleep 600"


def _why(paika: Paika, text: str, user: str = "UALICE") -> WhyResult:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    assert isinstance(reply.result, WhyResult)
    return reply.result


def _waits(result: WhyResult) -> list[StoryStep]:
    return [step for step in result.steps if step.step is Step.WAITED]


def _lines(paika: Paika, job_id: int, kind: str = "wait") -> int:
    with Session(paika.engine) as session:
        query = select(func.count()).where(Decision.job_id == job_id, Decision.kind == kind)
        return int(session.exec(query).one())


def _wait_codes(paika: Paika, job_id: int) -> list[str]:
    with Session(paika.engine) as session:
        rows = session.exec(
            select(Decision)
            .where(Decision.job_id == job_id, Decision.kind == "wait")
            .order_by(col(Decision.id))
        ).all()
    return [(row.detail or {}).get("code", "") for row in rows]


def test_why_tells_a_wait_for_data_then_behind_a_core_job_then_for_a_cheaper_card(
    world: Paika, clock: ManualClock
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    # Every card busy: two short runs on the T4s, a long one on both A100s.
    submit(world, "t4-one", SLEEP, hours=0.25, extra="type=T4-16GB")
    submit(world, "t4-two", SLEEP, hours=0.25, extra="type=T4-16GB")
    submit(world, "big", SLEEP, gpus=2, hours=10, extra="type=A100-80GB")
    assert len(cycle.run_once().started) == 3
    ok(
        world,
        "UALICE",
        f'submit name=story gpus=1 hours=1 priority=normal data=pending cmd="{SLEEP}"',
    )
    story = job(world, "story").id or 0
    clock.advance(timedelta(seconds=10))
    cycle.run_once()  # stage 1: its data is not ready
    ok(
        world,
        "UVERA",
        f'submit name=urgent gpus=1 hours=1 priority=core data=ready type=T4-16GB cmd="{SLEEP}"',
    )
    urgent = job(world, "urgent").id or 0
    ok(world, "UALICE", "ready story")
    clock.advance(timedelta(seconds=10))
    cycle.run_once()  # stage 2: behind the core job, for the next T4
    ok(world, "UALICE", "cancel t4-one")
    ok(world, "UALICE", "cancel big")
    # stage 3: an A100 is free, the T4s are not: it waits for a cheaper card
    until(
        cycle,
        clock,
        lambda: WaitCode.WAITING_FOR_CHEAPER_TYPE.value in _wait_codes(world, story),
    )

    told = _why(world, f"why #{story}")
    codes = [step.wait.code for step in _waits(told) if step.wait]
    stages = [
        WaitCode.WAITING_FOR_DATA,
        WaitCode.BEHIND_HIGHER_PRIORITY,
        WaitCode.WAITING_FOR_CHEAPER_TYPE,
    ]
    assert [code for code in codes if code in stages] == stages, codes
    behind = next(s for s in _waits(told) if s.wait and s.wait.code in stages[1:2])
    assert behind.wait is not None and behind.wait.behind == urgent
    assert behind.behind_priority == "core"
    cheaper = next(s for s in _waits(told) if s.wait and s.wait.code is stages[2])
    assert cheaper.wait is not None
    assert (cheaper.wait.gpu_type, cheaper.wait.costlier) == ("T4-16GB", "A100-80GB")
    assert told.steps[0].step is Step.SUBMITTED
    assert [s.at for s in told.steps] == sorted(s.at for s in told.steps)
    text = world.run(f"why #{story}", "UALICE").text
    data_at = text.index("waiting: waiting for its data")
    behind_at = text.index(f"first in line ahead of it: job #{urgent} (core)")
    cheaper_at = text.index("waiting for a T4-16GB")
    assert data_at < behind_at < cheaper_at
    assert "rather than a costlier A100-80GB" in text
    assert f"排在最前面的是任务 #{urgent}（核心）" in render(told, world.policy.zone, "zh")
    blocks = reply(told, "en", world.policy.zone, clock.now())
    assert "job #" in blocks.text and len(blocks.blocks) >= 2

    # at=TIME: the story only up to then, said in UTC or in the policy's zone alike.
    then = behind.at
    for moment in (
        then.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        then.astimezone(world.policy.zone).strftime("%Y-%m-%dT%H:%M:%S"),
    ):
        earlier = _why(world, f"why #{story} at={moment}")
        assert earlier.until == then and earlier.asked_at
        shown = [s.wait.code for s in _waits(earlier) if s.wait]
        assert shown[-1] is WaitCode.BEHIND_HIGHER_PRIORITY, shown
        assert WaitCode.WAITING_FOR_CHEAPER_TYPE not in shown
        assert all(step.at <= then for step in earlier.steps)


def test_a_started_job_is_told_where_and_on_what_it_started_and_how_it_ended(
    world: Paika, clock: ManualClock
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "quick", SLEEP)
    started = cycle.run_once().started
    quick = job(world, "quick").id or 0
    assert started == [quick] and _lines(world, quick, "start") == 1
    ok(world, "UALICE", "cancel quick")
    until(cycle, clock, lambda: job(world, "quick").state == JobState.CANCELLED)
    told = _why(world, "why quick")
    kinds = [step.step for step in told.steps]
    assert kinds[0] is Step.SUBMITTED and Step.STARTED in kinds
    start = next(step for step in told.steps if step.step is Step.STARTED)
    assert (start.hosts, start.gpu_type, start.gpus, start.attempt) == (
        ("gpu-b",),
        "T4-16GB",
        1,
        1,
    )
    assert [a.verdict for a in start.alternatives if a.gpu_type == "T4-16GB"] == ["chosen"]
    assert told.steps[-1].to_state == JobState.CANCELLED  # settled by the scheduler
    assert told.steps[-1].actor is None
    # The history's own "running" is not told twice beside the log's start.
    assert not [s for s in told.steps if s.step is Step.CHANGED and s.to_state == "running"]
    text = world.run("why quick", "UALICE").text
    assert "started on gpu-b: 1× T4-16GB, attempt 1" in text
    assert text.rstrip().endswith("cancelled (cancelled)")


def test_an_unchanged_reason_is_written_once_even_across_a_restart(
    world: Paika, clock: ManualClock
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "hog", SLEEP, gpus=1, hours=5, extra="type=T4-16GB")  # one T4 left free
    submit(world, "hog2", SLEEP, gpus=2, hours=5, extra="type=A100-80GB")
    assert len(cycle.run_once().started) == 2
    ok(
        world,
        "UALICE",
        "submit name=later gpus=1 hours=1 priority=normal data=pending type=A100-80GB "
        f'cmd="{SLEEP}"',
    )
    submit(world, "queued", SLEEP, gpus=2, hours=1, extra="type=T4-16GB")
    later, queued = job(world, "later").id or 0, job(world, "queued").id or 0
    for _ in range(12):  # places and ETAs drift; the reasons do not change
        clock.advance(timedelta(seconds=10))
        assert not cycle.run_once().errors
    assert (_lines(world, later), _lines(world, queued)) == (1, 1)
    assert _lines(world, queued, "reserve") == 1  # EASY keeps the next free card for it

    restarted = make_cycle(world, RecordingObserver())  # a new process: memory read from SQL
    for _ in range(3):
        clock.advance(timedelta(seconds=10))
        assert not restarted.run_once().errors
    assert (_lines(world, later), _lines(world, queued)) == (1, 1)
    assert _lines(world, queued, "reserve") == 1

    ok(world, "UALICE", "ready later")  # leaving the wait for data is a change
    clock.advance(timedelta(seconds=10))
    restarted.run_once()
    assert _wait_codes(world, later)[0] == WaitCode.WAITING_FOR_DATA
    assert (
        len(_wait_codes(world, later)) == 2 and _wait_codes(world, later)[1] != "waiting_for_data"
    )


def test_a_failing_log_step_stops_no_start(world: Paika, clock: ManualClock) -> None:
    cycle = make_cycle(world, RecordingObserver())
    table = DecisionTable.__table__  # type: ignore[attr-defined]
    table.drop(world.engine)  # every write to the log fails
    try:
        submit(world, "still", SLEEP)
        result = cycle.run_once()
        assert result.started == [job(world, "still").id]
        assert [e for e in result.errors if e.startswith("log:")], result.errors
        assert "log" in result.timings
    finally:
        table.create(world.engine)
    # The log takes up again once it can be written; the start it missed is not invented.
    submit(world, "next", SLEEP)
    clock.advance(timedelta(seconds=10))
    result = cycle.run_once()
    assert not result.errors and result.started == [job(world, "next").id]
    assert _lines(world, job(world, "next").id or 0, "start") == 1


def test_anyone_may_ask_why_but_the_command_stays_with_the_team(
    world: Paika, clock: ManualClock
) -> None:
    submit(world, "secret", "python train.py --token hf_SECRET")
    secret = job(world, "secret").id or 0
    told = _why(world, f"why #{secret}", "USTRANGER")
    assert told.job.command == "" and told.steps[0].step is Step.SUBMITTED
    text = world.run(f"why #{secret}", "USTRANGER").text
    assert "hf_SECRET" not in text and f"job #{secret} secret" in text
    assert "hf_SECRET" in _why(world, f"why #{secret}", "UVERA").job.command


def test_a_bad_job_or_time_is_refused_with_how_to_fix_it(world: Paika, clock: ManualClock) -> None:
    missing = world.run("why #999", "UALICE")
    assert not missing.ok and isinstance(missing.error, NotFound)
    assert missing.error.problem is Problem.JOB_NOT_FOUND
    submit(world, "early", SLEEP)
    early = job(world, "early").id or 0
    bad = world.run(f"why #{early} at=yesterday", "UALICE")
    assert not bad.ok and isinstance(bad.error, ParseError)
    assert bad.error.problem is Mistake.BAD_VALUE
    assert "YYYY-MM-DDTHH:MM" in bad.text
    impossible = world.run(f"why #{early} at=2026-02-30T10:00", "UALICE")
    assert not impossible.ok and isinstance(impossible.error, ParseError)
    before = world.run(f"why #{early} at=2026-11-01T00:00Z", "UALICE")
    assert not before.ok and isinstance(before.error, UserError)
    assert before.error.problem is Problem.WHY_BEFORE_SUBMIT
    submitted = datetime(2026, 11, 2, 17, 0)  # T0 in Asia/Shanghai, the policy's zone
    assert before.error.values == {
        "job_id": early,
        "at": "2026-11-01T08:00",
        "submitted": submitted.strftime("%Y-%m-%dT%H:%M"),
    }
    assert f"/gpu why {early} at=2026-11-02T17:00" in before.text
    later = _why(world, f"why #{early} at=2199-12-31T00:00")  # the future: the story so far
    assert later.until == clock.now()


def test_a_preempted_job_is_told_for_whom_it_stopped_and_that_it_waits_again(
    world: Paika, clock: ManualClock
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "sweep", SLEEP, gpus=2, priority="idle", extra="type=A100-80GB")
    cycle.run_once()
    submit(world, "paper", SLEEP, gpus=2, priority="core", user="UVERA", extra="type=A100-80GB")
    paper = job(world, "paper").id or 0
    clock.advance(timedelta(seconds=10))
    assert cycle.run_once().preempted == [job(world, "sweep").id]
    until(cycle, clock, lambda: job(world, "paper").state == JobState.RUNNING)
    until(cycle, clock, lambda: _lines(world, job(world, "sweep").id or 0) >= 1)
    told = _why(world, "why sweep")
    kinds = [step.step for step in told.steps]
    asked = kinds.index(Step.PREEMPT_ASKED)
    assert kinds.index(Step.STARTED) < asked < len(kinds) - 1
    assert told.steps[asked].for_job == paper and told.steps[asked].until is not None
    assert told.steps[-1].step is Step.WAITED  # queued again, and why it waits now
    states = [step.to_state for step in told.steps if step.step is Step.CHANGED]
    assert states[-2:] == [JobState.PREEMPTED, JobState.QUEUED]
    text = world.run("why sweep", "UALICE").text
    assert f"for core job #{paper}" in text
    assert _lines(world, paper, "start") == 1


def test_a_start_whose_answer_was_lost_is_logged_once_its_host_takes_it(
    world: Paika, clock: ManualClock
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    cycle.dispatcher = LostAnswers(deliver=False)  # the first start never reaches the agent
    submit(world, "dropped", SLEEP, gpus=2, extra="type=A100-80GB")
    first = cycle.run_once()
    dropped = job(world, "dropped").id or 0
    assert first.unconfirmed == [dropped] and _lines(world, dropped, "start") == 0
    clock.advance(timedelta(seconds=10))
    assert cycle.run_once().started == [dropped]  # sent again, and taken
    assert _lines(world, dropped, "start") == 1
    start = next(s for s in _why(world, "why dropped").steps if s.step is Step.STARTED)
    assert start.at == clock.now() and start.hosts == ("gpu-a",) and start.attempt == 1
    assert start.reason  # the match it was planned with
