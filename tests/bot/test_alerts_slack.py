"""Alerts in Slack: the announcer's DMs and channel posts on the fake Slack (blocks valid,
each recipient once even when Slack fails), and the alert buttons signed through the real
Bolt app: strangers refused, the first answer wins, the message redrawn with it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from conftest import ADMIN, APPROVER, MEMBER, OTHER, Bot, settled, text_of
from fake_slack.slack_server import Call, validate_blocks
from paika_test_slack import click
from sqlmodel import select

from bot.announcer import RENDERERS, SlackAnnouncer, delivers
from bot.blocks import ids
from bot.blocks.alerts import idle_answered, plain_alert, quota_acknowledged
from scheduler import lifecycle
from scheduler.alerts.idle import ACTION_KIND, act_on_idle, check_idle
from scheduler.alerts.quota import raise_quota_alerts
from scheduler.clock import ManualClock
from scheduler.notices.kinds import NoticeKind
from scheduler.notices.outbox import Announcement, deliver_pending
from storage.db import session_scope
from storage.models import Allocation, AuditEvent, Gpu, GpuSample, Host, Job, JobState, Notice

CHANNEL = "#gpu-alerts"


@pytest.fixture
def alert_bot(team_bot: Bot) -> Bot:
    """The team bot with an alerts channel in its policy."""
    policy = team_bot.paika.policy
    team_bot.paika.policy = policy.model_copy(
        update={"slack": policy.slack.model_copy(update={"channel": CHANNEL})}
    )
    return team_bot


@pytest.fixture
def announcer(alert_bot: Bot) -> SlackAnnouncer:
    """One announcer for the bot's life, as `paika up` would keep."""
    return SlackAnnouncer(alert_bot.messenger, alert_bot.services)


def _deliver(bot: Bot, announcer: SlackAnnouncer) -> int:
    return deliver_pending(bot.paika.engine, announcer, bot.paika.clock.now())


def _quota_alert(bot: Bot) -> Announcement:
    now = bot.paika.clock.now()
    expires = now.date() + timedelta(days=5)
    assert bot.paika.run(
        f"admin quota add team=vision type=A100-80GB hours=10 expires={expires} owner=<@{MEMBER}>",
        ADMIN,
    ).ok
    assert bot.paika.run(
        'submit name=bert-ft gpus=1 hours=20 priority=normal data=ready cmd="python train.py" type=A100-80GB',
        MEMBER,
    ).ok
    [alert] = raise_quota_alerts(bot.paika.engine, bot.paika.policy, now)
    return alert


def _posts(bot: Bot, channel: str) -> list[Call]:
    return [
        c for c in bot.slack.calls("chat.postMessage") if c.args.get("channel") == channel and c.ok
    ]


def _buttons(call: Call) -> list[dict[str, Any]]:
    return [
        element
        for block in call.args["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    ]


def test_a_quota_alert_is_dmed_to_its_owner_and_posted_in_the_channel(
    alert_bot: Bot, announcer: SlackAnnouncer
) -> None:
    alert = _quota_alert(alert_bot)
    assert _deliver(alert_bot, announcer) == 1
    [dm] = _posts(alert_bot, "D" + MEMBER)
    [post] = _posts(alert_bot, CHANNEL)
    for call in (dm, post):
        words = text_of(call.args)
        assert "Quota #1 of vision (A100-80GB) expires in 5 days" in words
        assert "bert-ft" in words and "needs 20 GPU-hours, more than is left" in words
        [ack] = _buttons(call)
        assert ack["action_id"] == ids.QUOTA_ACKNOWLEDGE and ack["value"] == alert.key
    assert _deliver(alert_bot, announcer) == 0  # sent: nothing more to send
    alert_bot.slack.assert_nothing_invalid()


def test_a_failed_post_is_retried_and_nobody_gets_it_twice(
    alert_bot: Bot, announcer: SlackAnnouncer
) -> None:
    alert = _quota_alert(alert_bot)
    alert_bot.slack.fail_next("chat.postMessage", error="channel_not_found")  # the DM fails
    assert _deliver(alert_bot, announcer) == 0
    with session_scope(alert_bot.paika.engine) as session:
        row = session.get(Notice, alert.key)
        assert row is not None and row.sent_at is None and row.attempts == 1
        assert row.next_attempt_at is not None  # it rests before the next try
    assert _deliver(alert_bot, announcer) == 0  # too soon: nobody is asked again yet
    clock = alert_bot.paika.clock
    assert isinstance(clock, ManualClock)
    clock.advance(timedelta(seconds=5))
    assert _deliver(alert_bot, announcer) == 1
    assert len(_posts(alert_bot, "D" + MEMBER)) == 1 and len(_posts(alert_bot, CHANNEL)) == 1
    assert _deliver(alert_bot, announcer) == 0


def _click(bot: Bot, user: str, action_id: str, value: str, posted: Call, name: str) -> None:
    click(bot, user, action_id, value, posted, name, ids.ALERT_ACTIONS)


def _audited(bot: Bot, action: str) -> list[AuditEvent]:
    with session_scope(bot.paika.engine) as session:
        return list(session.exec(select(AuditEvent).where(AuditEvent.action == action)).all())


def test_only_the_owner_or_an_admin_acknowledges_and_a_second_click_changes_nothing(
    alert_bot: Bot, announcer: SlackAnnouncer
) -> None:
    alert = _quota_alert(alert_bot)
    _deliver(alert_bot, announcer)
    [dm] = _posts(alert_bot, "D" + MEMBER)
    [post] = _posts(alert_bot, CHANNEL)

    _click(alert_bot, OTHER, ids.QUOTA_ACKNOWLEDGE, alert.key, post, "stranger")
    refusal = alert_bot.slack.wait_for_response("stranger")[0]
    assert refusal["response_type"] == "ephemeral" and "owner" in text_of(refusal)
    assert alert_bot.slack.calls("chat.update") == []

    _click(alert_bot, MEMBER, ids.QUOTA_ACKNOWLEDGE, alert.key, dm, "owner")
    assert settled(lambda: bool(alert_bot.slack.calls("chat.update")))
    updated = alert_bot.slack.last("chat.update").args
    assert updated["channel"] == dm.response["channel"] and updated["ts"] == dm.response["ts"]
    assert not any(block["type"] == "actions" for block in updated["blocks"])
    assert "Acknowledged by" in text_of(updated) and MEMBER in text_of(updated)

    # The channel copy still shows the button; a late click there only brings it up to date.
    _click(alert_bot, ADMIN, ids.QUOTA_ACKNOWLEDGE, alert.key, post, "late")
    late = alert_bot.slack.wait_for_response("late")[0]
    assert late["response_type"] == "ephemeral" and "Already acknowledged" in text_of(late)
    assert settled(lambda: len(alert_bot.slack.calls("chat.update")) == 2)
    assert alert_bot.slack.last("chat.update").args["channel"] == CHANNEL
    assert [a.actor for a in _audited(alert_bot, "quota.alert_acknowledged")] == [MEMBER]
    with session_scope(alert_bot.paika.engine) as session:
        row = session.get(Notice, alert.key)
        assert row is not None and row.answer == "acknowledged" and row.answered_by == MEMBER
    alert_bot.slack.assert_nothing_invalid()


def test_a_forged_button_value_is_refused_plainly(
    alert_bot: Bot, announcer: SlackAnnouncer
) -> None:
    _quota_alert(alert_bot)
    _deliver(alert_bot, announcer)
    [dm] = _posts(alert_bot, "D" + MEMBER)
    _click(alert_bot, MEMBER, ids.QUOTA_ACKNOWLEDGE, "'; DROP TABLE alerts; --", dm, "forged")
    answer = alert_bot.slack.wait_for_response("forged")[0]
    assert "does not name an alert" in text_of(answer)
    assert alert_bot.slack.calls("chat.update") == []


def _idle_job(bot: Bot) -> int:
    """A job that has held an A100 for two hours, every sample of the last 70 min at 0 %."""
    assert bot.paika.run(
        'submit name=notebook gpus=1 hours=8 priority=normal data=ready cmd="sleep 1" type=A100-80GB',
        MEMBER,
    ).ok
    now = bot.paika.clock.now()
    with session_scope(bot.paika.engine) as session:
        host = Host(name="gpu-01", url="http://127.0.0.1:1", state="up", added_at=now)
        session.add(host)
        session.flush()
        gpu = Gpu(host_id=host.id or 0, index=0, gpu_type="A100-80GB", memory_gib=80)
        session.add(gpu)
        session.flush()
        job = session.exec(select(Job).where(Job.name == "notebook")).one()
        session.add(
            Allocation(
                job_id=job.id or 0,
                gpu_id=gpu.id or 0,
                active_gpu_id=gpu.id,
                started_at=now - timedelta(hours=2),
            )
        )
        lifecycle.move(session, job, JobState.RUNNING, at=now, actor="scheduler")
        job.started_at, job.attempts = now - timedelta(hours=2), 1
        session.add(job)
        session.add_all(
            GpuSample(
                gpu_id=gpu.id or 0,
                at=now - timedelta(minutes=m),
                utilization_pct=0.0,
                job_id=job.id,
            )
            for m in range(70)
        )
        return job.id or 0


def _ask(bot: Bot, announcer: SlackAnnouncer) -> tuple[Announcement, Call]:
    job_id = _idle_job(bot)
    [ask] = check_idle(bot.paika.engine, bot.paika.policy, bot.paika.clock.now())
    assert ask.key == f"idle:{job_id}:1:1"
    in_channel = len(_posts(bot, CHANNEL))
    assert _deliver(bot, announcer) == 1
    dm = _posts(bot, "D" + MEMBER)[-1]
    assert len(_posts(bot, CHANNEL)) == in_channel  # asked of its owner only
    return ask, dm


def _job(bot: Bot) -> Job:
    with session_scope(bot.paika.engine) as session:
        return session.exec(select(Job).where(Job.name == "notebook")).one()


def test_an_idle_ask_is_answered_once_by_whoever_may(
    alert_bot: Bot, announcer: SlackAnnouncer, clock: ManualClock
) -> None:
    ask, dm = _ask(alert_bot, announcer)
    words = text_of(dm.args)
    assert "are its GPUs still in use?" in words and "below 5% utilization for 60 min" in words
    assert "stopped and queued again" in words
    assert {b["action_id"]: b["value"] for b in _buttons(dm)} == {
        ids.IDLE_STILL_USING: ask.key,
        ids.IDLE_RELEASE: ask.key,
    }

    _click(alert_bot, OTHER, ids.IDLE_RELEASE, ask.key, dm, "stranger")
    refusal = alert_bot.slack.wait_for_response("stranger")[0]
    assert refusal["response_type"] == "ephemeral" and "Only the job's owner" in text_of(refusal)

    _click(alert_bot, MEMBER, ids.IDLE_STILL_USING, ask.key, dm, "owner")
    assert settled(lambda: bool(alert_bot.slack.calls("chat.update")))
    updated = alert_bot.slack.last("chat.update").args
    assert not any(block["type"] == "actions" for block in updated["blocks"])
    assert "is still using them" in text_of(updated)

    _click(alert_bot, APPROVER, ids.IDLE_RELEASE, ask.key, dm, "second")
    second = alert_bot.slack.wait_for_response("second")[0]
    assert "Already answered" in text_of(second)
    assert _job(alert_bot).stop_requested_at is None  # the first answer holds
    # Past the grace, nothing is done: the owner said they still use it.
    clock.advance(timedelta(minutes=45))
    now = clock.now()
    assert act_on_idle(alert_bot.paika.engine, alert_bot.paika.policy, now) == []
    assert [a.actor for a in _audited(alert_bot, "job.idle_answered")] == [MEMBER]
    alert_bot.slack.assert_nothing_invalid()


def test_release_stops_the_job_and_the_owner_hears_what_was_done(
    alert_bot: Bot, announcer: SlackAnnouncer
) -> None:
    ask, dm = _ask(alert_bot, announcer)
    _click(alert_bot, APPROVER, ids.IDLE_RELEASE, ask.key, dm, "release")
    assert settled(lambda: bool(alert_bot.slack.calls("chat.update")))
    assert "released them" in text_of(alert_bot.slack.last("chat.update").args)
    job = _job(alert_bot)
    assert job.state == JobState.RUNNING and job.stop_reason == "release"  # the host stops it next
    assert _deliver(alert_bot, announcer) == 1  # the notice of the release
    notice = _posts(alert_bot, "D" + MEMBER)[-1]
    assert f"<@{APPROVER}> released them" in text_of(notice.args)
    assert "stopped and its GPUs released" in text_of(notice.args)
    assert [a.actor for a in _audited(alert_bot, "job.reclaim")] == [APPROVER]
    alert_bot.slack.assert_nothing_invalid()


def test_every_alert_kind_renders_valid_blocks_in_both_languages(
    alert_bot: Bot, announcer: SlackAnnouncer
) -> None:
    quota = _quota_alert(alert_bot)
    _deliver(alert_bot, announcer)
    ask, _ = _ask(alert_bot, announcer)
    zone, at = alert_bot.services.zone, alert_bot.paika.clock.now()
    reclaimed = {**ask.detail, "action": "requeue", "by": None, "ask_key": ask.key}
    notice = Announcement("reclaim:1:1:1", ACTION_KIND, at, ("U1",), detail=reclaimed)
    for lang in ("en", "zh"):
        messages = [RENDERERS[a.kind](a, lang, zone) for a in (quota, ask, notice)]
        messages += [
            quota_acknowledged(quota, MEMBER, at, lang, zone),
            plain_alert(
                Announcement("x:1", "other", at, legacy_text="<b>board</b> for <@U012AB3CD>"),
                lang,
                zone,
            ),
        ]
        messages += [
            idle_answered(ask, answer, MEMBER, at, lang, zone)
            for answer in ("still_using", "release", "timeout", "not_idle", "ended", None)
        ]
        for message in messages:
            assert message.text and validate_blocks(message.blocks) == [], message
            assert "{" not in text_of({"text": message.text, "blocks": message.blocks})
    assert "&lt;b&gt;board" in text_of({"blocks": messages[4].blocks})  # paika's words, escaped


def test_every_kind_of_notice_has_a_way_to_slack() -> None:
    """One list of notice kinds: adding a kind without teaching Slack to deliver it fails
    here, instead of the notice going out as bare text or not at all."""
    missing = [kind.value for kind in NoticeKind if not delivers(kind)]
    assert missing == []
    assert not delivers("no_such_kind")
