"""A job held because a job it waits for failed, in Slack: its owner is DMed once with Run
anyway and Cancel (blocks valid); the buttons, signed through the real Bolt app on the fake
Slack, are the clicker's own /gpu release and /gpu cancel: a stranger is refused, the owner's
release lets the job run (issue 32)."""

from __future__ import annotations

from conftest import MEMBER, OTHER, Bot, text_of
from fake_slack.slack_server import Call
from paika_test_slack import click
from sqlmodel import select

from bot.announcer import SlackAnnouncer
from bot.blocks import ids
from scheduler.dependencies import settle
from scheduler.notices.outbox import deliver_pending
from storage.db import session_scope
from storage.models import Job, JobDependency, JobState

SUBMIT = 'submit name={name} gpus=1 hours=1 priority=normal data=ready cmd="true" {extra}'


def _submit(bot: Bot, name: str, extra: str = "") -> int:
    assert bot.paika.run(SUBMIT.format(name=name, extra=extra), MEMBER).ok
    with session_scope(bot.paika.engine) as session:
        return session.exec(select(Job).where(Job.name == name)).one().id or 0


def _states(bot: Bot, job_id: int) -> list[str]:
    with session_scope(bot.paika.engine) as session:
        rows = session.exec(select(JobDependency).where(JobDependency.job_id == job_id)).all()
        return [row.state for row in rows]


def _click(bot: Bot, user: str, action_id: str, value: str, posted: Call, name: str) -> None:
    click(bot, user, action_id, value, posted, name, ids.HELD_ACTIONS)


def test_the_owner_is_told_once_and_may_run_the_held_job_anyway(team_bot: Bot) -> None:
    bot = team_bot
    prep = _submit(bot, "prep")
    train = _submit(bot, "train", f"after=#{prep}")
    with session_scope(bot.paika.engine) as session:
        job = session.get(Job, prep)
        assert job is not None
        job.state = JobState.FAILED
        session.add(job)
    announcer = SlackAnnouncer(bot.messenger, bot.services)
    assert len(settle(bot.paika.engine, bot.paika.clock.now()).told) == 1
    assert deliver_pending(bot.paika.engine, announcer, bot.paika.clock.now()) == 1
    [dm] = [c for c in bot.slack.calls("chat.postMessage") if c.args.get("channel") == "D" + MEMBER]
    words = text_of(dm.args)
    assert f"#{train}" in words and f"#{prep}" in words and "failed" in words
    buttons = {
        element["action_id"]: element["value"]
        for block in dm.args["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    }
    assert buttons == {ids.HELD_RELEASE: str(train), ids.HELD_CANCEL: str(train)}
    # Told once.
    assert settle(bot.paika.engine, bot.paika.clock.now()).told == []
    assert deliver_pending(bot.paika.engine, announcer, bot.paika.clock.now()) == 0

    _click(bot, OTHER, ids.HELD_RELEASE, str(train), dm, "stranger")
    refusal = bot.slack.wait_for_response("stranger")[0]
    assert refusal["response_type"] == "ephemeral"
    assert _states(bot, train) == ["broken"]

    _click(bot, MEMBER, ids.HELD_RELEASE, str(train), dm, "owner")
    answer = bot.slack.wait_for_response("owner")[0]
    assert "no longer waits" in text_of(answer)
    assert _states(bot, train) == ["released"]
    bot.slack.assert_nothing_invalid()
