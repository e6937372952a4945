"""Slack's requests, signed as Slack signs them, through the real Bolt app over real HTTP."""

from __future__ import annotations

import time
from datetime import timedelta

from conftest import ADMIN, APPROVER, MEMBER, OTHER, Bot, settled, text_of
from fake_slack import SIGNING_SECRET, signing
from fake_slack.slack_server import RESPONSE_URLS
from sqlmodel import select

from bot.announcer import SlackAnnouncer
from bot.blocks import ids
from scheduler.clock import ManualClock
from scheduler.notices.outbox import deliver_pending
from storage.db import session_scope
from storage.models import AuditEvent, BumpRequest, Job, Notice

SUBMIT = 'submit name=bert-ft gpus=1 hours=4 priority=normal data=ready cmd="python train.py"'


def _jobs(bot: Bot) -> list[Job]:
    with session_scope(bot.paika.engine) as session:
        return list(session.exec(select(Job)).all())


def test_a_command_is_acknowledged_at_once_and_answered_by_response_url(team_bot: Bot) -> None:
    started = time.monotonic()
    response = team_bot.command(SUBMIT)
    assert response.status_code == 200 and response.text == ""
    assert time.monotonic() - started < 3.0  # Slack's limit for the acknowledgement
    answer = team_bot.slack.wait_for_response("r")[0]
    assert answer["response_type"] == "ephemeral"
    assert "#1" in text_of(answer) and "bert-ft" in text_of(answer)
    assert [job.name for job in _jobs(team_bot)] == ["bert-ft"]
    # The owner's App Home is redrawn with the new job.
    assert settled(lambda: bool(team_bot.slack.calls("views.publish")))
    home = team_bot.slack.last("views.publish")
    assert home.args["user_id"] == MEMBER and "bert-ft" in text_of(home.args["view"])
    team_bot.slack.assert_nothing_invalid()


def test_a_typo_gets_plain_words_and_a_correct_example_and_changes_nothing(team_bot: Bot) -> None:
    answer = team_bot.answer("submit name=x gpus=two hours=1 cmd=run")
    words = text_of(answer)
    assert "gpus must be a whole number" in words and "gpus=2" in words
    assert "Traceback" not in words
    assert _jobs(team_bot) == []


def test_share_posts_the_answer_in_the_channel(team_bot: Bot) -> None:
    assert team_bot.answer("queue share")["response_type"] == "in_channel"
    assert team_bot.answer("queue", name="q2")["response_type"] == "ephemeral"


def test_language_choice_is_kept_per_user(team_bot: Bot) -> None:
    team_bot.answer("lang zh")
    assert "队列" in text_of(team_bot.answer("queue", name="zh")) or "任务" in text_of(
        team_bot.answer("queue", name="zh2")
    )
    english = text_of(team_bot.answer("queue", user=OTHER, name="en"))
    assert "队列" not in english


def test_forged_missing_and_stale_signatures_are_refused_and_change_nothing(team_bot: Bot) -> None:
    body, headers = signing.slash_command("not-the-secret", SUBMIT, user_id=MEMBER)
    assert team_bot.send((body, headers)).status_code == 401
    body, headers = signing.slash_command(SIGNING_SECRET, SUBMIT, user_id=MEMBER)
    assert team_bot.send((body, signing.without_signature(headers))).status_code == 401
    stale = signing.slash_command(
        SIGNING_SECRET, SUBMIT, user_id=MEMBER, timestamp=int(time.time()) - 600
    )
    assert team_bot.send(stale).status_code == 401
    time.sleep(0.2)
    assert _jobs(team_bot) == []
    assert team_bot.slack.responses() == []


def test_a_replayed_command_is_acknowledged_and_creates_nothing_twice(team_bot: Bot) -> None:
    """The same signed request (body, timestamp and signature), sent again within Slack's
    5-minute window, as someone who captured it would."""
    signed = signing.slash_command(
        SIGNING_SECRET, SUBMIT, user_id=MEMBER, response_url=team_bot.slack.response_url("r")
    )
    for _ in range(3):
        response = team_bot.send(signed)
        assert (response.status_code, response.text) == (200, "")
    assert "#1" in text_of(team_bot.slack.wait_for_response("r")[0])
    # Answered after whatever the replays could have set off (one worker, in order).
    team_bot.answer("queue", name="after")
    assert [job.name for job in _jobs(team_bot)] == ["bert-ft"]
    assert len(team_bot.slack.responses("r")) == 1
    # The same words in a new request (Slack signs each afresh) are a new command.
    assert "#2" in text_of(team_bot.answer(SUBMIT, name="again"))
    assert len(_jobs(team_bot)) == 2


def test_a_replayed_click_and_a_replayed_modal_command_do_nothing(team_bot: Bot) -> None:
    refresh = signing.block_action(
        SIGNING_SECRET, MEMBER, ids.HOME_REFRESH, None, view={"type": "home"}
    )
    modal = signing.slash_command(SIGNING_SECRET, "submit", user_id=MEMBER, trigger_id="t.once")
    for signed in (refresh, modal, refresh, modal):
        response = team_bot.send(signed)
        assert (response.status_code, response.text) == (200, "")
    team_bot.slack.wait_for("views.publish")
    team_bot.slack.wait_for("views.open")
    # Done after whatever the replays could have set off (each kind's work, in order).
    team_bot.answer("queue", name="after")
    team_bot.send(signing.slash_command(SIGNING_SECRET, "submit", trigger_id="t.after"))
    assert team_bot.slack.wait_for("views.open", count=2)[-1].args["trigger_id"] == "t.after"
    assert len(team_bot.slack.calls("views.publish")) == 1
    assert len(team_bot.slack.calls("views.open")) == 2


def test_submit_without_text_opens_the_modal(team_bot: Bot) -> None:
    assert team_bot.command("submit").status_code == 200
    opened = team_bot.slack.wait_for("views.open")[0]
    assert opened.args["trigger_id"] == "trig.r"
    assert opened.args["view"]["callback_id"] == ids.SUBMIT_CALLBACK
    team_bot.slack.assert_nothing_invalid()


def test_the_submit_modal_opens_ahead_of_the_answers_queued_before_it(team_bot: Bot) -> None:
    """A trigger_id lasts 3 s: the modal must not wait for answers that are slow to go out."""
    with team_bot.slack.hold(RESPONSE_URLS) as answers:
        for i in range(3):
            assert team_bot.command("queue", name=f"q{i}").status_code == 200
        answers.wait_arrived()  # the bot's worker is stuck posting the first answer
        assert team_bot.command("submit", name="modal").status_code == 200
        click = signing.block_action(
            SIGNING_SECRET,
            MEMBER,
            ids.HOME_SUBMIT,
            None,
            view={"type": "home"},
            trigger_id="t.home",
        )
        assert team_bot.send(click).status_code == 200
        opened = team_bot.slack.wait_for("views.open", count=2)
        assert {call.args["trigger_id"] for call in opened} == {"trig.modal", "t.home"}
        assert team_bot.slack.responses() == []  # no answer has gone out yet
    for i in range(3):
        assert "Nothing is waiting" in text_of(team_bot.slack.wait_for_response(f"q{i}")[0])
    team_bot.slack.assert_nothing_invalid()


def test_app_home_is_drawn_when_opened_and_a_retried_delivery_is_handled_once(
    team_bot: Bot,
) -> None:
    event = {"type": "app_home_opened", "user": MEMBER, "channel": "D1", "tab": "home"}
    first = signing.event_callback(SIGNING_SECRET, event, event_id="Ev0001")
    assert team_bot.send(first).status_code == 200
    team_bot.slack.wait_for("views.publish")
    retry = signing.event_callback(
        SIGNING_SECRET, event, event_id="Ev0001", retry_num=1, retry_reason="http_timeout"
    )
    assert team_bot.send(retry).status_code == 200
    time.sleep(0.3)
    assert len(team_bot.slack.calls("views.publish")) == 1
    team_bot.slack.assert_nothing_invalid()


def test_slack_errors_and_rate_limits_do_not_lose_the_job(team_bot: Bot) -> None:
    team_bot.slack.rate_limit_next("views.publish", retry_after=0)
    team_bot.slack.fail_next("views.publish", error="internal_error", times=1)
    answer = team_bot.answer(SUBMIT)
    assert "#1" in text_of(answer)
    assert len(_jobs(team_bot)) == 1
    # The 429 was retried; the ok:false was logged, and the bot goes on answering.
    assert settled(lambda: len(team_bot.slack.calls("views.publish")) >= 2)
    assert "#1" in text_of(team_bot.answer("status 1", name="s"))


def _bump_flow(bot: Bot) -> BumpRequest:
    bot.answer(SUBMIT)
    bot.answer('bump 1 to=core reason="paper deadline"', name="b")
    posted = bot.slack.wait_for("chat.postMessage")[0]
    assert posted.args["channel"] == "#vision-gpu"
    buttons = [
        element
        for block in posted.args["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    ]
    assert {b["action_id"] for b in buttons} == {ids.BUMP_APPROVE, ids.BUMP_DENY}

    def remembered() -> BumpRequest | None:
        # The bot stores where it posted right after Slack answers; wait for that write.
        with session_scope(bot.paika.engine) as session:
            found = session.exec(select(BumpRequest)).one()
        return found if found.message_ts else None

    assert settled(lambda: remembered() is not None)
    request = remembered()
    assert request is not None and request.message_ts == posted.response["ts"]
    assert request.message_channel == posted.response["channel"]
    assert {b["value"] for b in buttons} == {str(request.id)}
    return request


def _click(bot: Bot, user: str, action_id: str, request: BumpRequest, name: str) -> None:
    signed = signing.block_action(
        SIGNING_SECRET,
        user,
        action_id,
        str(request.id),
        channel_id=request.message_channel or "",
        response_url=bot.slack.response_url(name),
        container={
            "type": "message",
            "message_ts": request.message_ts,
            "channel_id": request.message_channel,
            "is_ephemeral": False,
        },
    )
    assert bot.send(signed).status_code == 200


def test_only_approvers_decide_and_a_double_click_applies_once(team_bot: Bot) -> None:
    request = _bump_flow(team_bot)
    _click(team_bot, MEMBER, ids.BUMP_APPROVE, request, "nope")
    refusal = team_bot.slack.wait_for_response("nope")[0]
    assert refusal.get("response_type") == "ephemeral" and "approver" in text_of(refusal)
    assert _jobs(team_bot)[0].priority == "normal"

    _click(team_bot, APPROVER, ids.BUMP_APPROVE, request, "yes")
    assert settled(lambda: bool(team_bot.slack.calls("chat.update")))
    updated = team_bot.slack.last("chat.update")
    assert updated.args["ts"] == request.message_ts
    assert not any(block["type"] == "actions" for block in updated.args["blocks"])
    assert APPROVER in text_of(updated.args)
    assert _jobs(team_bot)[0].priority == "core"
    # The requester hears about it in a DM.
    assert settled(
        lambda: any(
            c.args.get("users") == MEMBER for c in team_bot.slack.calls("conversations.open")
        )
    )

    _click(team_bot, APPROVER, ids.BUMP_APPROVE, request, "again")
    _click(team_bot, ADMIN, ids.BUMP_DENY, request, "late")
    assert "already" in text_of(team_bot.slack.wait_for_response("again")[0])
    team_bot.slack.wait_for_response("late")
    assert len(team_bot.slack.calls("chat.update")) == 1
    with session_scope(team_bot.paika.engine) as session:
        decided = session.exec(
            select(AuditEvent).where(AuditEvent.action.in_(("bump.approved", "bump.denied")))  # type: ignore[attr-defined]
        ).all()
    assert len(decided) == 1 and _jobs(team_bot)[0].priority == "core"
    team_bot.slack.assert_nothing_invalid()


def test_a_decision_by_text_command_updates_the_request_message(team_bot: Bot) -> None:
    request = _bump_flow(team_bot)
    team_bot.answer(f'deny {request.id} reason="core is full"', user=APPROVER, name="d")
    assert settled(lambda: bool(team_bot.slack.calls("chat.update")))
    updated = team_bot.slack.last("chat.update").args
    assert not any(block["type"] == "actions" for block in updated["blocks"])
    assert APPROVER in text_of(updated)
    assert _jobs(team_bot)[0].priority == "normal"


def test_a_channel_that_refuses_the_request_means_the_approvers_are_asked_by_dm(
    team_bot: Bot,
) -> None:
    team_bot.answer(SUBMIT)
    team_bot.slack.fail_next("chat.postMessage", error="not_in_channel")
    team_bot.answer('bump 1 to=core reason="paper deadline"', name="b")

    def asked_by_dm() -> BumpRequest | None:
        with session_scope(team_bot.paika.engine) as session:
            found = session.exec(select(BumpRequest)).one()
        channel = found.message_channel or ""
        return found if channel.startswith("D") else None

    def dm_opened_with() -> set[str]:
        return {c.args.get("users") for c in team_bot.slack.calls("conversations.open")}

    # The approvers are asked one after the other: wait for both, not for the first.
    assert settled(lambda: {APPROVER, ADMIN} <= dm_opened_with())  # the approver and the admin
    assert settled(lambda: asked_by_dm() is not None)
    request = asked_by_dm()
    assert request is not None
    _click(team_bot, APPROVER, ids.BUMP_APPROVE, request, "dm")
    assert settled(lambda: _jobs(team_bot)[0].priority == "core")
    team_bot.slack.assert_nothing_invalid()


def test_a_bump_request_waits_out_a_slack_outage_and_its_approvers_are_asked_once(
    team_bot: Bot,
) -> None:
    """Slack refuses every post for a while: the request stays in the outbox (nothing is
    lost, the user's command still answers), and once Slack is back the approvers are
    asked exactly once."""
    team_bot.answer(SUBMIT)
    # The channel and both approvers' DMs fail.
    team_bot.slack.fail_next("chat.postMessage", error="service_unavailable", times=3)
    answer = team_bot.answer('bump 1 to=core reason="paper deadline"', name="b")
    assert "#1" in text_of(answer)

    def notice() -> Notice:
        with session_scope(team_bot.paika.engine) as session:
            [row] = session.exec(select(Notice).where(Notice.kind == "bump_request")).all()
            return row

    assert settled(lambda: notice().attempts == 1)
    assert notice().sent_at is None and notice().next_attempt_at is not None
    posts_in_outage = len(team_bot.slack.calls("chat.postMessage"))
    assert posts_in_outage == 3
    clock = team_bot.paika.clock
    assert isinstance(clock, ManualClock)
    clock.advance(timedelta(seconds=6))  # past the first rest
    team_bot.paika.on_change()  # anything that wakes the courier (or its own timer)
    assert settled(lambda: notice().sent_at is not None)
    asked = team_bot.slack.calls("chat.postMessage")[posts_in_outage:]
    assert [c.args["channel"] for c in asked] == ["#vision-gpu"]
    # A later round, here or on another instance, finds nothing left to send.
    clock.advance(timedelta(minutes=5))
    announcer = SlackAnnouncer(team_bot.messenger, team_bot.services)
    assert deliver_pending(team_bot.paika.engine, announcer, clock.now()) == 0
    assert len(team_bot.slack.calls("chat.postMessage")) == posts_in_outage + 1


def test_parse_errors_and_help_are_said_in_the_users_language(team_bot: Bot) -> None:
    team_bot.answer("lang zh", name="lang")
    wrong = text_of(team_bot.answer("submit gpus=two", name="wrong"))
    assert "gpus 须为整数，范围 1 到 64，却收到“two”。" in wrong
    assert "示例：" in wrong and "gpus=2" in wrong
    shown = text_of(team_bot.answer("help submit", name="help"))
    assert "提交一个训练任务到队列。" in shown and "gpus（可选，默认：1）" in shown
    english = text_of(team_bot.answer("help submit", user=OTHER, name="help-en"))
    assert "Queue a training job." in english and "提交" not in english
