"""The overrun notice in Slack: DMed once to the owner with Extend and Stop (blocks valid),
the buttons signed through the real Bolt app on the fake Slack: an outsider refused, Extend
grows the estimate (and the new one warns once more), Stop cancels, the message is redrawn."""

from __future__ import annotations

from datetime import timedelta

import pytest
from conftest import APPROVER, MEMBER, OTHER, Bot, settled, text_of
from fake_slack.slack_server import Call, validate_blocks
from paika_test_slack import click
from sqlmodel import select

from bot.announcer import SlackAnnouncer
from bot.blocks import ids
from bot.blocks.replies import reply
from scheduler import lifecycle
from scheduler.alerts.overrun import check_overrun
from scheduler.clock import ManualClock
from scheduler.config import Estimates
from scheduler.notices.outbox import deliver_pending
from storage.db import session_scope
from storage.models import Job, JobState, Notice


@pytest.fixture
def overrun_bot(team_bot: Bot) -> Bot:
    policy = team_bot.paika.policy
    team_bot.paika.policy = policy.model_copy(
        update={"estimates": Estimates(overrun_factor=1.5, hard_limit={"idle": 3.0})}
    )
    return team_bot


@pytest.fixture
def announcer(overrun_bot: Bot) -> SlackAnnouncer:
    return SlackAnnouncer(overrun_bot.messenger, overrun_bot.services)


def _deliver(bot: Bot, announcer: SlackAnnouncer) -> int:
    return deliver_pending(bot.paika.engine, announcer, bot.paika.clock.now())


def _dms(bot: Bot) -> list[Call]:
    return [
        c
        for c in bot.slack.calls("chat.postMessage")
        if c.args.get("channel") == "D" + MEMBER and c.ok
    ]


def _buttons(call: Call) -> dict[str, str]:
    return {
        element["action_id"]: element["value"]
        for block in call.args["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    }


def _click(bot: Bot, user: str, action_id: str, value: str, posted: Call, name: str) -> None:
    click(bot, user, action_id, value, posted, name, ids.ALERT_ACTIONS)


def _running(bot: Bot, hours_ago: float) -> int:
    """The member's 2-GPU-hour job on 1 GPU, started `hours_ago`."""
    assert bot.paika.run(
        'submit name=train gpus=1 hours=2 priority=idle data=ready cmd="python train.py"', MEMBER
    ).ok
    now = bot.paika.clock.now()
    with session_scope(bot.paika.engine) as session:
        job = session.exec(select(Job).where(Job.name == "train")).one()
        lifecycle.move(session, job, JobState.RUNNING, at=now, actor="scheduler")
        job.started_at, job.attempts = now - timedelta(hours=hours_ago), 1
        session.add(job)
        return job.id or 0


def _job(bot: Bot, job_id: int) -> Job:
    with session_scope(bot.paika.engine) as session:
        job = session.get(Job, job_id)
        assert job is not None
        return job


def _told(bot: Bot, announcer: SlackAnnouncer) -> tuple[str, Call]:
    [notice] = check_overrun(bot.paika.engine, bot.paika.policy, bot.paika.clock.now())
    assert _deliver(bot, announcer) == 1
    return notice.key, _dms(bot)[-1]


def test_the_owner_is_told_once_and_extend_grows_the_estimate(
    overrun_bot: Bot, announcer: SlackAnnouncer, clock: ManualClock
) -> None:
    bot = overrun_bot
    job_id = _running(bot, hours_ago=3.5)  # 2 h estimated; told past 3 h
    key, dm = _told(bot, announcer)
    words = text_of(dm.args)
    assert f"#{job_id}" in words and "has run past its estimate" in words
    assert "has run 3.5 h against an estimate of 2.0 h" in words
    assert "Extend makes its estimate 5.2 h" in words  # 3.5 × 1.5 = 5.25
    assert "At 6.0 h it is stopped" in words  # the idle class's hard limit: 3 × 2 h
    assert _buttons(dm) == {ids.OVERRUN_EXTEND: key, ids.OVERRUN_STOP: key}
    assert check_overrun(bot.paika.engine, bot.paika.policy, clock.now()) == []
    assert _deliver(bot, announcer) == 0 and len(_dms(bot)) == 1  # once

    _click(bot, OTHER, ids.OVERRUN_STOP, key, dm, "stranger")
    refusal = bot.slack.wait_for_response("stranger")[0]
    assert refusal["response_type"] == "ephemeral" and "Only the job's owner" in text_of(refusal)
    assert _job(bot, job_id).stop_requested_at is None
    assert bot.slack.calls("chat.update") == []

    _click(bot, MEMBER, ids.OVERRUN_EXTEND, key, dm, "owner")
    assert settled(lambda: bool(bot.slack.calls("chat.update")))
    updated = bot.slack.last("chat.update").args
    assert not any(block["type"] == "actions" for block in updated["blocks"])
    assert "extended it" in text_of(updated) and "its estimate is now 5.2 h" in text_of(updated)
    job = _job(bot, job_id)
    assert job.est_gpu_hours == pytest.approx(5.25) and job.overrun_warned_at is None

    _click(bot, APPROVER, ids.OVERRUN_STOP, key, dm, "late")
    late = bot.slack.wait_for_response("late")[0]
    assert "Already answered" in text_of(late)
    assert _job(bot, job_id).stop_requested_at is None  # the first answer holds

    # The new estimate warns once more: past 1.5 × 5.25 = 7.875 h of running.
    clock.advance(timedelta(hours=4))  # 7.5 h
    assert check_overrun(bot.paika.engine, bot.paika.policy, clock.now()) == []
    clock.advance(timedelta(minutes=30))  # 8 h
    second, dm2 = _told(bot, announcer)
    assert second != key and len(_dms(bot)) == 2
    bot.slack.assert_nothing_invalid()


def test_stop_by_an_approver_cancels_the_run(
    overrun_bot: Bot, announcer: SlackAnnouncer, clock: ManualClock
) -> None:
    bot = overrun_bot
    job_id = _running(bot, hours_ago=4)
    key, dm = _told(bot, announcer)
    _click(bot, APPROVER, ids.OVERRUN_STOP, key, dm, "stop")
    assert settled(lambda: bool(bot.slack.calls("chat.update")))
    assert "stopped it" in text_of(bot.slack.last("chat.update").args)
    job = _job(bot, job_id)
    assert job.state == JobState.RUNNING and job.stop_reason == "cancel"  # its host stops it next
    with session_scope(bot.paika.engine) as session:
        row = session.get(Notice, key)
        assert row is not None and row.answer == "stop" and row.answered_by == APPROVER
    bot.slack.assert_nothing_invalid()


def test_the_home_tab_and_status_say_how_the_owners_runs_compared_with_estimates(
    overrun_bot: Bot,
) -> None:
    bot = overrun_bot
    now = bot.paika.clock.now()
    assert bot.paika.run(
        'submit name=train gpus=1 hours=2 priority=normal data=ready cmd="python train.py"', MEMBER
    ).ok
    with session_scope(bot.paika.engine) as session:
        team_id = session.exec(select(Job.team_id)).one()
        for ran in (1.0, 3.6, 4.0):  # against 2 h: 0.5, 1.8, 2.0 → median 1.8
            session.add(
                Job(
                    name="old",
                    owner=MEMBER,
                    team_id=team_id,
                    est_gpu_hours=2.0,
                    command="x",
                    state=JobState.SUCCEEDED,
                    submitted_at=now - timedelta(days=3),
                    started_at=now - timedelta(days=3),
                    ended_at=now - timedelta(days=3) + timedelta(hours=ran),
                )
            )
    assert bot.messenger.publish_home(MEMBER)
    home = bot.slack.last("views.publish").args
    assert "Your last 3 runs took 1.8× your estimates; paika plans with that." in text_of(
        home["view"]
    )
    status = bot.paika.run("status train", MEMBER)
    assert "Your last 3 runs took 1.8×" in status.text
    bot.slack.assert_nothing_invalid()


def test_match_and_the_reports_reply_in_valid_blocks(overrun_bot: Bot) -> None:
    bot = overrun_bot
    assert bot.paika.run(
        'submit name=train gpus=1 hours=2 priority=normal data=ready cmd="python train.py"', MEMBER
    ).ok
    now = bot.paika.clock.now()
    for text in ("match train", "report matches", "report estimates", "status train"):
        result = bot.paika.run(text, MEMBER).result
        message = reply(result, "zh", bot.paika.policy.zone, now)
        assert validate_blocks(message.blocks) == [], text
        assert message.text
