"""The submit modal through signed view submissions, and the DMs the scheduler's events send."""

from __future__ import annotations

from datetime import timedelta

from conftest import MEMBER, Bot, settled, text_of
from fake_slack import SIGNING_SECRET, signing
from sqlmodel import select

from bot.announcer import SlackAnnouncer
from bot.blocks import ids
from scheduler.notices.events import Event, EventCode, EventKind, record
from scheduler.notices.outbox import deliver_pending
from storage.db import session_scope
from storage.models import Job, Notice


def _submission(**fields: object) -> dict[str, dict[str, object]]:
    values: dict[str, object] = {
        ids.SUBMIT_NAME: "resnet",
        ids.SUBMIT_GPUS: "2",
        ids.SUBMIT_HOURS: "6",
        ids.SUBMIT_PRIORITY: signing.static_select("normal"),
        ids.SUBMIT_DATA: signing.radio_buttons("ready"),
        ids.SUBMIT_CMD: "python train.py --epochs 3",
    }
    values.update({key: value for key, value in fields.items()})
    return {block: {block: value} for block, value in values.items()}  # type: ignore[misc]


def _submit(bot: Bot, **fields: object) -> dict[str, object]:
    signed = signing.view_submission(
        SIGNING_SECRET, MEMBER, ids.SUBMIT_CALLBACK, _submission(**fields)
    )
    response = bot.send(signed)
    assert response.status_code == 200, response.text
    return response.json() if response.text else {}


def _jobs(bot: Bot) -> list[Job]:
    with session_scope(bot.paika.engine) as session:
        return list(session.exec(select(Job)).all())


def test_invalid_fields_come_back_under_each_field_and_nothing_is_queued(team_bot: Bot) -> None:
    answer = _submit(team_bot, **{ids.SUBMIT_GPUS: "lots", ids.SUBMIT_HOURS: "-1"})
    assert answer["response_action"] == "errors"
    errors = answer["errors"]
    assert isinstance(errors, dict)
    assert set(errors) == {ids.SUBMIT_GPUS, ids.SUBMIT_HOURS}
    assert all(0 < len(text) <= 150 for text in errors.values())
    assert _jobs(team_bot) == []


def test_a_service_objection_shows_in_the_modal(team_bot: Bot) -> None:
    answer = _submit(team_bot, **{ids.SUBMIT_TEAM: signing.static_select("nlp")})
    # MEMBER is in vision: the service refuses, and the modal stays open with the reason.
    assert answer["response_action"] == "errors"
    assert _jobs(team_bot) == []


def test_a_valid_submission_closes_the_modal_queues_the_job_and_dms_the_owner(
    team_bot: Bot,
) -> None:
    assert _submit(team_bot) == {}
    jobs = _jobs(team_bot)
    assert [(j.name, j.gpus, j.est_gpu_hours, j.command) for j in jobs] == [
        ("resnet", 2, 6.0, "python train.py --epochs 3")
    ]
    assert settled(lambda: bool(team_bot.slack.calls("chat.postMessage")))
    dm = team_bot.slack.last("chat.postMessage")
    assert dm.args["channel"].startswith("D") and "#1" in text_of(dm.args)
    team_bot.slack.assert_nothing_invalid()


def test_a_replayed_submission_is_acknowledged_and_queues_nothing(team_bot: Bot) -> None:
    signed = signing.view_submission(
        SIGNING_SECRET,
        MEMBER,
        ids.SUBMIT_CALLBACK,
        _submission(),  # type: ignore[arg-type]
    )
    first, again = team_bot.send(signed), team_bot.send(signed)
    assert (first.status_code, first.text) == (200, "")
    assert (again.status_code, again.text) == (200, "")
    assert [job.name for job in _jobs(team_bot)] == ["resnet"]


def test_a_submission_is_answered_before_the_bot_asks_slack_anything(team_bot: Bot) -> None:
    """users.info (the owner's Slack locale) is held: the modal's answer must not wait for it."""
    # A client that gives up on the held call (after 10 s) would hide a wait before the ack.
    team_bot.app.client.timeout = 60
    with team_bot.slack.hold("users.info") as users_info:
        answer = _submit(team_bot, **{ids.SUBMIT_GPUS: "lots"})
        assert answer["response_action"] == "errors"
        assert _submit(team_bot) == {}
        assert len(_jobs(team_bot)) == 1
        # The confirming DM is written in the owner's language: asked after the ack.
        users_info.wait_arrived()
        assert team_bot.slack.calls("chat.postMessage") == []
    assert settled(lambda: bool(team_bot.slack.calls("chat.postMessage")))
    assert "#1" in text_of(team_bot.slack.last("chat.postMessage").args)
    team_bot.slack.assert_nothing_invalid()


def _tell(bot: Bot, *events: Event) -> None:
    """Record events in the outbox, as the cycle does in the transaction of each change."""
    with session_scope(bot.paika.engine) as session:
        for event in events:
            record(session, event)


def _deliver(bot: Bot, announcer: SlackAnnouncer, after: timedelta = timedelta(0)) -> int:
    return deliver_pending(bot.paika.engine, announcer, bot.paika.clock.now() + after)


def test_scheduler_events_reach_the_owner_by_dm_and_refresh_their_home(team_bot: Bot) -> None:
    assert team_bot.paika.run(
        'submit name=bert gpus=1 hours=1 priority=normal data=ready cmd="python t.py"', MEMBER
    ).ok
    now = team_bot.paika.clock.now()
    _tell(
        team_bot,
        Event(
            EventKind.JOB_STARTED,
            now,
            EventCode.STARTED,
            job_id=1,
            name="bert",
            owner=MEMBER,
            detail={"hosts": ["gpu-a"]},
        ),
        Event(
            EventKind.JOB_FAILED,
            now + timedelta(seconds=1),
            EventCode.FAILED,
            job_id=1,
            name="bert",
            owner=MEMBER,
            detail={"exit_code": 3},
        ),
        # No channel in the policy: a host event has nobody to tell, and is done with.
        Event(EventKind.HOST_DOWN, now, EventCode.HOST_DOWN, host="gpu-a"),
    )
    announcer = SlackAnnouncer(team_bot.messenger, team_bot.services)
    assert _deliver(team_bot, announcer, timedelta(seconds=1)) == 3
    dms = team_bot.slack.calls("chat.postMessage")
    assert len(dms) == 2 and all(c.args["channel"].startswith("D") for c in dms)
    assert "bert started on gpu-a" in text_of(dms[0].args)
    assert "exited with 3" in text_of(dms[1].args)
    assert len(team_bot.slack.calls("views.publish")) == 2
    assert _deliver(team_bot, announcer, timedelta(minutes=1)) == 0  # each once
    team_bot.slack.assert_nothing_invalid()


def test_a_slack_outage_delays_dms_and_loses_none(team_bot: Bot) -> None:
    """Slack refuses everything for several minutes; the DMs wait in the outbox, are tried
    again further apart each time, and each arrives once when Slack is back."""
    now = team_bot.paika.clock.now()
    _tell(
        team_bot,
        *(
            Event(kind, now, code, job_id=7, name="x", owner=MEMBER)
            for kind, code in (
                (EventKind.JOB_STARTED, EventCode.START_CONFIRMED),
                (EventKind.JOB_FINISHED, EventCode.FINISHED),
            )
        ),
    )
    announcer = SlackAnnouncer(team_bot.messenger, team_bot.services)
    # Every attempt in the outage fails: two DMs, four rounds that try them.
    team_bot.slack.fail_next("conversations.open", error="service_unavailable", times=8)
    tries = [_deliver(team_bot, announcer, timedelta(seconds=s)) for s in (0, 1, 6, 20, 300)]
    assert tries == [0, 0, 0, 0, 0] and team_bot.slack.calls("chat.postMessage") == []
    assert len(team_bot.slack.calls("conversations.open")) == 8
    with session_scope(team_bot.paika.engine) as session:
        waiting = session.exec(select(Notice)).all()
        assert [n.sent_at for n in waiting] == [None, None]
        # 0 s, 5 s, 20 s, 300 s: four failures each; the 1 s round found them resting.
        assert [n.attempts for n in waiting] == [4, 4]
    assert _deliver(team_bot, announcer, timedelta(minutes=10)) == 2
    texts = sorted(text_of(c.args) for c in team_bot.slack.calls("chat.postMessage"))
    assert len(texts) == 2 and "x finished" in texts[0] and "x started" in texts[1]
    assert _deliver(team_bot, announcer, timedelta(minutes=30)) == 0


def test_host_down_and_up_go_to_the_channel_once_each(team_bot: Bot) -> None:
    policy = team_bot.paika.policy
    team_bot.paika.policy = policy.model_copy(
        update={"slack": policy.slack.model_copy(update={"channel": "C0GPUOPS"})}
    )
    now = team_bot.paika.clock.now()
    _tell(
        team_bot,
        Event(EventKind.HOST_DOWN, now, EventCode.HOST_DOWN, host="gpu-a", detail={"error": "x"}),
        Event(EventKind.HOST_UP, now + timedelta(seconds=1), EventCode.HOST_BACK, host="gpu-a"),
    )
    announcer = SlackAnnouncer(team_bot.messenger, team_bot.services)
    assert _deliver(team_bot, announcer, timedelta(seconds=1)) == 2
    assert _deliver(team_bot, announcer, timedelta(minutes=1)) == 0
    posts = team_bot.slack.calls("chat.postMessage")
    assert [c.args["channel"] for c in posts] == ["C0GPUOPS", "C0GPUOPS"]
    assert all("gpu-a" in text_of(c.args) for c in posts)
    assert team_bot.slack.calls("conversations.open") == []
    team_bot.slack.assert_nothing_invalid()


def test_the_digest_announcement_posts_the_board_and_its_picture_to_the_channel(
    team_bot: Bot,
) -> None:
    from bot.announcer import SlackAnnouncer
    from scheduler.digest import digest_now
    from scheduler.notices.outbox import Announcement

    policy = team_bot.paika.policy
    announcer = SlackAnnouncer(team_bot.messenger, team_bot.services)
    digest = digest_now(team_bot.paika)
    announcement = Announcement(
        "digest:test", "digest", team_bot.paika.clock.now(), (), True, digest.to_json()
    )
    assert announcer.announce(announcement)  # no channel set: nothing to post, and done
    assert team_bot.slack.calls("chat.postMessage") == []
    team_bot.paika.policy = policy.model_copy(
        update={"slack": policy.slack.model_copy(update={"channel": "C0GPUOPS"})}
    )
    team_bot.slack.fail_next("files.completeUploadExternal", error="internal_error")
    assert not announcer.announce(announcement)  # retried later by the outbox ...
    assert announcer.announce(announcement)  # ... without posting the board twice
    assert [c.args["channel"] for c in team_bot.slack.calls("chat.postMessage")] == ["C0GPUOPS"]
    assert [u.completed for u in team_bot.slack.uploads()][-1]
    team_bot.slack.assert_nothing_invalid()


def test_a_bad_field_is_explained_in_the_users_language(team_bot: Bot) -> None:
    team_bot.answer("lang zh", name="lang")
    answer = _submit(team_bot, **{ids.SUBMIT_GPUS: "lots"})
    assert answer["response_action"] == "errors"
    errors = answer["errors"]
    assert isinstance(errors, dict)
    assert errors[ids.SUBMIT_GPUS].startswith("gpus 须为整数，范围 1 到 64，却收到“lots”。")
    assert _jobs(team_bot) == []
