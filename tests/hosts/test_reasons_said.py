"""Reasons and verdicts are said in the reader's language (issue 29): a Chinese team reads a
job's history, its status, its match and its story without the scheduler's English inside,
on the console and in Slack alike; rows from before codes are said as stored. Driven by real
cycles against simulated agents over HTTP."""

from __future__ import annotations

from datetime import timedelta

from agent_world import job, make_cycle, ok, submit, until
from sqlalchemy import update
from sqlmodel import Session, select

from bot.blocks.bump import bump_decided
from bot.blocks.notices import bump_decision_dm
from bot.blocks.replies import reply
from bot.console import render
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.notices.events import RecordingObserver
from scheduler.service.bumps import DecisionResult
from scheduler.service.jobs import StatusResult
from scheduler.service.matches import MatchReview
from scheduler.service.why import WhyResult
from storage.models import BumpRequest, JobEvent, JobState

SLEEP = "sleep 600"


def _result(paika: Paika, text: str) -> object:
    answer = paika.run(text, "UALICE")
    assert answer.ok, answer.text
    return answer.result


def _said(paika: Paika, clock: ManualClock, text: str, lang: str) -> tuple[str, str]:
    """The reply to `text` in `lang`: on the console, and in Slack (every block's text)."""
    result = _result(paika, text)
    console = render(result, paika.policy.zone, lang)
    message = reply(result, lang, paika.policy.zone, clock.now())
    slack = "\n".join(_texts(message.blocks))
    return console, slack


def _texts(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [node["text"]] if isinstance(node.get("text"), str) else []
        return found + [text for value in node.values() for text in _texts(value)]
    if isinstance(node, list):
        return [text for value in node for text in _texts(value)]
    return []


def test_a_preempted_jobs_history_and_story_are_said_in_chinese(
    world: Paika, clock: ManualClock
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "sweep", SLEEP, gpus=2, priority="idle", extra="type=A100-80GB")
    cycle.run_once()
    submit(world, "paper", SLEEP, gpus=2, priority="core", user="UVERA", extra="type=A100-80GB")
    paper = job(world, "paper").id or 0
    clock.advance(timedelta(seconds=10))
    cycle.run_once()
    until(cycle, clock, lambda: job(world, "paper").state == JobState.RUNNING)
    assert job(world, "sweep").state_reason == f"requeued: preempted for core job #{paper}"

    status = _result(world, "status sweep")
    assert isinstance(status, StatusResult)
    console, slack = _said(world, clock, "status sweep", "zh")
    # The console's history says why each state came, as Slack's does, in the reader's words.
    for text in (slack, console):
        assert f"已重新排队：被核心任务 #{paper} 抢占" in text, text
        assert f"已停止：被核心任务 #{paper} 抢占" in text, text
        assert "已提交" in text, text
        for english in ("requeued", "preempted for", "stopped:", "submitted"):
            assert english not in text, (english, text)
    _, slack_en = _said(world, clock, "status sweep", "en")
    assert f"requeued: preempted for core job #{paper}" in slack_en

    story = _result(world, "why sweep")
    assert isinstance(story, WhyResult)
    for console, slack in [_said(world, clock, "why sweep", "zh")]:
        for text in (console, slack):
            assert f"已重新排队：被核心任务 #{paper} 抢占" in text
            assert "满足要求的最便宜卡型，当前有空闲" in text  # the match's reason
            assert "A100-80GB 已选用" in text  # the verdict on the type it started on
            for english in ("requeued", "preempted for", "the cheapest adequate", "chosen"):
                assert english not in text, (english, text)
    console_en, _ = _said(world, clock, "why sweep", "en")
    assert "the cheapest adequate type, with GPUs free now" in console_en
    assert "A100-80GB chosen" in console_en


def test_a_failed_jobs_status_and_match_are_said_in_chinese(
    world: Paika, clock: ManualClock
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "broken", "exit 3", extra="mem=16")
    cycle.run_once()
    until(cycle, clock, lambda: job(world, "broken").state == JobState.FAILED)
    assert job(world, "broken").state_reason == "exited with 3"

    for text in _said(world, clock, "status broken", "zh"):
        assert "以退出码 3 结束" in text and "exited with" not in text, text
    for text in _said(world, clock, "status broken", "en"):
        assert "exited with 3" in text

    review = _result(world, "match broken")
    assert isinstance(review, MatchReview) and review.chosen == "T4-16GB"
    for text in _said(world, clock, "match broken", "zh"):
        assert "满足要求的最便宜卡型，当前有空闲" in text
        assert "已选用" in text and "更贵" in text  # the T4 chosen, the A100 costlier
        for english in ("the cheapest adequate", "chosen", "costlier"):
            assert english not in text, (english, text)


def test_a_reason_stored_before_codes_is_said_as_stored(world: Paika, clock: ManualClock) -> None:
    submit(world, "old", SLEEP)
    ok(world, "UALICE", "cancel old")
    old = job(world, "old").id or 0
    with Session(world.engine) as session:  # as an older paika wrote it: text, no code
        session.execute(
            update(JobEvent)
            .where(JobEvent.job_id == old)  # type: ignore[arg-type]
            .values(reason="an older paika's words", reason_code=None, reason_values=None)
        )
        session.commit()
    for text in _said(world, clock, "why old", "zh"):
        assert "an older paika's words" in text


def test_a_reason_a_person_typed_stays_as_typed(world: Paika, clock: ManualClock) -> None:
    submit(world, "typo", SLEEP)
    ok(world, "UALICE", 'cancel typo reason="学习率写错了 wrong lr"')
    for text in _said(world, clock, "status typo", "en"):
        assert "学习率写错了 wrong lr" in text


def test_a_bump_closed_because_its_job_started_says_why_in_chinese(
    world: Paika, clock: ManualClock
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "urgent", SLEEP, priority="core")  # a member asks: a bump request
    cycle.run_once()
    assert job(world, "urgent").state == JobState.RUNNING
    with Session(world.engine) as session:
        request = session.exec(select(BumpRequest)).one()
    answer = world.run(f"approve {request.id}", "UVERA")
    assert isinstance(answer.result, DecisionResult) and answer.result.moot
    assert answer.result.request.decision_reason == "job running"
    zone = world.policy.zone
    for lang, said in (("zh", "任务运行中"), ("en", "job running")):
        card = bump_decided(answer.result.request, answer.result.view, lang, zone)
        dm = bump_decision_dm(answer.result, lang)
        for text in ("\n".join(_texts(card.blocks)), "\n".join(_texts(dm.blocks))):
            assert said in text, text
            assert lang == "en" or "job running" not in text
