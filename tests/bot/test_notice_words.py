"""Notices carry values, not sentences; the bot says every kind of them in English and
Chinese, on the console and in Slack; a notice an older paika stored as a sentence still
goes out as it stood."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from conftest import ADMIN, APPROVER, MEMBER, Bot, text_of
from fake_slack.slack_server import validate_blocks
from sqlmodel import select

from bot.announcer import RENDERERS, SlackAnnouncer
from bot.blocks.digest import digest_blocks
from bot.console_notices import ConsoleAnnouncer, line
from bot.notice_words import sentence
from scheduler.alerts.idle import ACTION_KIND, ASK_KIND
from scheduler.alerts.quota import EXPIRY_KIND, USED_KIND, raise_quota_alerts
from scheduler.digest import digest_now
from scheduler.digest.model import Digest
from scheduler.digest.schedule import raise_digest
from scheduler.hosts.reconcile import ENDING_STOPS, REQUEUED_STOPS
from scheduler.notices.approvals import DECISION_KIND, REQUEST_KIND
from scheduler.notices.events import Event, EventCode, EventKind, LostWhy, announcement_of, record
from scheduler.notices.kinds import NoticeKind
from scheduler.notices.outbox import Announcement, deliver_pending, from_row
from storage.db import session_scope
from storage.models import Notice
from storage.queries import notices as notice_queries

NOW = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)
ZONE = ZoneInfo("Asia/Shanghai")
HAN = re.compile(r"[\u4e00-\u9fff]")
# A placeholder left in a sentence ("{name}") or a value shown as Python wrote it.
UNSAID = re.compile(r"\{[a-z_]+[}:!]|None|\[\]|\{\}")

# The values each event code names, as the cycle and the reconciliation write them.
CODE_VALUES: Mapping[EventCode, dict[str, object]] = {
    EventCode.STARTED: {"hosts": ["gpu-a", "gpu-b"], "gpus": 2, "gpu_type": "A100-80GB"},
    EventCode.START_REFUSED: {"host": "gpu-a", "problem": "image not found"},
    EventCode.START_FAILED: {"host": "gpu-a", "problem": "disk full"},
    EventCode.PREEMPT_ASKED: {"minutes": 10.0, "for_job": 9},
    EventCode.HOST_SILENT: {"minutes": 12},
    EventCode.LOST: {"why": "host_gave_up", "hours": 6.0, "attempts": 3},
    EventCode.LOST_REQUEUED: {"why": "agent_lost", "hours": 6.0},
    EventCode.STOPPED_UNSTARTED: {"state": "cancelled"},
    EventCode.STOPPED_REQUEUED: {"stop": "preempt"},
    EventCode.STOPPED: {"stop": "release"},
    EventCode.FAILED: {"exit_code": 3},
    EventCode.HOST_DOWN: {"error": "connection refused"},
    EventCode.UNSETTLED: {"error": "RuntimeError: boom", "owner": MEMBER, "attempt": 1},
    EventCode.UNSETTLED_ENDED: {"state": "cancelled", "error": "RuntimeError: boom"},
    EventCode.START_HELD: {"host": "gpu-a", "refusal": "account_unknown", "account": "alice"},
    EventCode.SHARE_SLOWED: {
        "slowed": 12,
        "slowed_name": "bert",
        "by": 13,
        "by_name": "probe",
        "stopped": 13,
        "card": "gpu-a/0",
        "sm_pct": 40.0,
        "alone_pct": 80.0,
        "lost_pct": 50.0,
        "minutes": 5.0,
    },
}
# The kind of event each code comes with, as the cycle writes them.
KIND_OF = {
    EventCode.STARTED: EventKind.JOB_STARTED,
    EventCode.START_CONFIRMED: EventKind.JOB_STARTED,
    EventCode.START_REFUSED: EventKind.JOB_FAILED,
    EventCode.START_FAILED: EventKind.JOB_REQUEUED,
    EventCode.PREEMPT_ASKED: EventKind.JOB_PREEMPTED,
    EventCode.HOST_ANSWERS: EventKind.JOB_RESUMED,
    EventCode.HOST_SILENT: EventKind.JOB_UNKNOWN,
    EventCode.LOST: EventKind.JOB_LOST,
    EventCode.LOST_REQUEUED: EventKind.JOB_REQUEUED,
    EventCode.STOPPED_UNSTARTED: EventKind.JOB_REQUEUED,
    EventCode.STOPPED_REQUEUED: EventKind.JOB_PREEMPTED,
    EventCode.STOPPED: EventKind.JOB_FINISHED,
    EventCode.FINISHED: EventKind.JOB_FINISHED,
    EventCode.FAILED: EventKind.JOB_FAILED,
    EventCode.KILLED: EventKind.JOB_FAILED,
    EventCode.REPORTED_FAILED: EventKind.JOB_FAILED,
    EventCode.UNSETTLED: EventKind.JOB_UNSETTLED,
    EventCode.UNSETTLED_ENDED: EventKind.JOB_FINISHED,
    EventCode.START_HELD: EventKind.JOB_HELD,
    EventCode.SHARE_SLOWED: EventKind.JOB_KEPT_APART,
}
HOST_CODES = {EventCode.HOST_BACK: EventKind.HOST_UP, EventCode.HOST_DOWN: EventKind.HOST_DOWN}


def events() -> list[Event]:
    """One event of every code, plus every reason a run is lost or stopped."""
    said = []
    for code in EventCode:
        values = CODE_VALUES.get(code, {})
        if code in HOST_CODES:
            said.append(Event(HOST_CODES[code], NOW, code, host="gpu-a", detail=values))
        else:
            kind = KIND_OF[code]
            said.append(Event(kind, NOW, code, 12, name="bert", owner=MEMBER, detail=values))
    for why in LostWhy:
        values = {"why": why.value, "hours": 6.0}
        kind, code = EventKind.JOB_REQUEUED, EventCode.LOST_REQUEUED
        said.append(Event(kind, NOW, code, 12, name="b", owner=MEMBER, detail=values))
    for stop in (*REQUEUED_STOPS, *ENDING_STOPS):
        code = EventCode.STOPPED_REQUEUED if stop in REQUEUED_STOPS else EventCode.STOPPED
        kind = EventKind.JOB_FINISHED
        said.append(Event(kind, NOW, code, 12, name="b", owner=MEMBER, detail={"stop": stop}))
    return said


def event_notices() -> list[Announcement]:
    return [announcement_of(event) for event in events()]


def quota_detail(**more: Any) -> dict[str, Any]:
    jobs = [
        {
            "id": i,
            "name": f"j{i}",
            "state": "running",
            "owner": MEMBER,
            "why": "ends_after_expiry",
            "ends_at": NOW.isoformat(),
            "est_gpu_hours": 4.0,
        }
        for i in range(1, 8)
    ]
    return {
        "subject": "1",
        "quota_id": 1,
        "team": "vision",
        "gpu_type": None,
        "owner": APPROVER,
        "gpu_hours": 100.0,
        "used_hours": 80.0,
        "left_hours": 20.0,
        "used_pct": 80.0,
        "expires_on": "2026-11-05",
        "days_left": 3,
        "threshold": 3,
        "jobs": jobs,
        "jobs_more": 2,
        **more,
    }


def idle_detail(**more: Any) -> dict[str, Any]:
    return {
        "subject": "12",
        "job_id": 12,
        "name": "bert",
        "owner": MEMBER,
        "team": "vision",
        "priority": "normal",
        "attempt": 1,
        "ask": 1,
        "gpus": 2,
        "gpu_type": "A100-80GB",
        "hosts": ["gpu-a"],
        "idle_pct": 5.0,
        "idle_minutes": 30.0,
        "peak_pct": 2.0,
        "grace_minutes": 15.0,
        "action": "requeue",
        **more,
    }


def bump_detail(**more: Any) -> dict[str, Any]:
    return {
        "subject": "bump:4",
        "request_id": 4,
        "job_id": 12,
        "name": "bert",
        "requested_by": MEMBER,
        "from_priority": "normal",
        "to_priority": "core",
        "reason": "paper deadline",
        **more,
    }


def one_of_each(digest: Digest) -> list[Announcement]:
    """A notice of every kind, with every variant its sentence has."""
    return [
        *event_notices(),
        Announcement("b:1", REQUEST_KIND, NOW, detail=bump_detail()),
        *(
            Announcement("b:2", DECISION_KIND, NOW, (MEMBER,), detail=bump_detail(**decision))
            for decision in (
                {"state": "approved", "decided_by": APPROVER, "decision_reason": None},
                {"state": "denied", "decided_by": APPROVER, "decision_reason": "not now"},
            )
        ),
        Announcement("q:1", EXPIRY_KIND, NOW, (APPROVER,), True, quota_detail()),
        Announcement(
            "q:2", EXPIRY_KIND, NOW, (APPROVER,), True, quota_detail(days_left=1, jobs=[])
        ),
        Announcement("q:3", USED_KIND, NOW, (APPROVER,), True, quota_detail(jobs_more=0)),
        Announcement("q:4", USED_KIND, NOW, detail={"quota_id": 1, "covered_by": "q:3"}),
        *(
            Announcement("i:1", ASK_KIND, NOW, (MEMBER,), detail=idle_detail(action=action))
            for action in ("requeue", "release", "keep")
        ),
        *(
            Announcement("r:1", ACTION_KIND, NOW, (MEMBER,), detail=idle_detail(**reclaim))
            for reclaim in ({"by": None}, {"by": APPROVER, "action": "release"})
        ),
        *(
            Announcement(
                "o:1", NoticeKind.JOB_OVERRUN, NOW, (MEMBER,), detail=overrun_detail(**more)
            )
            for more in ({}, {"limit_hours": 9.0})
        ),
        *(
            Announcement(
                "u:1", NoticeKind.JOB_UPSTREAM_FAILED, NOW, (MEMBER,), detail=held_detail(state)
            )
            for state in ("failed", "cancelled")
        ),
        *(
            Announcement(
                "m:1",
                NoticeKind.MAINTENANCE_AHEAD,
                NOW,
                (MEMBER,),
                detail=maintenance_detail(lead, preemptible),
            )
            for lead in ("day", "hour")
            for preemptible in (False, True)
        ),
        *(
            Announcement("a:1", NoticeKind.ARRAY_ENDED, NOW, (MEMBER,), detail=array_detail(failed))
            for failed in ([], ["#40.2", "#40.3"])
        ),
        Announcement("d:1", NoticeKind.DIGEST, NOW, to_channel=True, detail=digest.to_json()),
        *(
            Announcement("s:1", kind, NOW, to_channel=True, detail=store_detail(**more))
            for kind in (NoticeKind.STORE_DOWN, NoticeKind.STORE_BACK)
            for more in ({}, {"dropped": {"snapshot": 3}})
        ),
    ]


def array_detail(failed: list[str]) -> dict[str, Any]:
    return {
        "subject": "40",
        "array_id": 40,
        "name": "sweep",
        "owner": MEMBER,
        "size": 4,
        "succeeded": 4 - len(failed),
        "failed": len(failed),
        "cancelled": 0,
        "failed_jobs": failed,
    }


def maintenance_detail(lead: str, preemptible: bool) -> dict[str, Any]:
    return {
        "subject": "14",
        "job_id": 14,
        "name": "train",
        "owner": MEMBER,
        "host": "gpu-a",
        "window": 1,
        "starts": "2026-12-08 22:00 CST",
        "ends": "2026-12-09 02:00 CST",
        "reason": "driver 570",
        "lead": lead,
        "preemptible": preemptible,
    }


def held_detail(upstream_state: str) -> dict[str, Any]:
    return {
        "subject": "13",
        "job_id": 13,
        "name": "train",
        "owner": MEMBER,
        "upstream": 12,
        "upstream_name": "prep",
        "upstream_state": upstream_state,
    }


def overrun_detail(**more: Any) -> dict[str, Any]:
    return {
        "subject": "12",
        "job_id": 12,
        "name": "bert",
        "owner": MEMBER,
        "priority": "idle",
        "attempt": 1,
        "gpus": 2,
        "est_gpu_hours": 4.0,
        "estimate_hours": 2.0,
        "elapsed_hours": 3.1,
        "factor": 1.5,
        "extend_to_hours": 4.65,
        "limit_hours": None,
        **more,
    }


def store_detail(**more: Any) -> dict[str, Any]:
    return {
        "subject": "object-store",
        "where": "s3://paika/team at https://oos-cn.ctyunapi.cn",
        "since": NOW.isoformat(),
        "minutes": 12,
        "error": "EndpointConnectionError",
        "waiting": 40,
        "dropped": {},
        **more,
    }


@pytest.fixture
def digest(team_bot: Bot) -> Digest:
    return digest_now(team_bot.paika)


def test_every_kind_of_notice_is_said_in_both_languages_on_the_console_and_in_slack(
    digest: Digest,
) -> None:
    notices = one_of_each(digest)
    assert {n.kind for n in notices} == {kind.value for kind in NoticeKind}
    for notice in notices:
        english, chinese = sentence("en", notice), sentence("zh", notice)
        assert english and not HAN.search(english) and not UNSAID.search(english), english
        assert HAN.search(chinese) and not UNSAID.search(chinese), chinese
        out = io.StringIO()
        assert ConsoleAnnouncer(out).announce(notice)
        assert out.getvalue() == line(notice) + "\n" and english in out.getvalue()
        for lang in ("en", "zh"):
            for message in _slack(notice, lang):
                assert message.text and validate_blocks(message.blocks) == [], notice
                shown = text_of({"text": message.text, "blocks": message.blocks})
                assert not UNSAID.search(shown), shown
                assert bool(HAN.search(shown)) == (lang == "zh"), shown


def _slack(notice: Announcement, lang: str) -> list[Any]:
    """How Slack shows a notice without asking the database (bump requests and decisions are
    drawn from their request's row; the delivery test below sends them)."""
    if notice.kind == NoticeKind.DIGEST:
        return [digest_blocks(Digest.from_json(notice.detail), lang, ZONE)]
    render = RENDERERS.get(notice.kind)
    return [] if render is None else [render(notice, lang, ZONE)]


def test_the_sentences_say_what_the_scheduler_used_to_say_in_english(digest: Digest) -> None:
    said = {sentence("en", n) for n in one_of_each(digest)}
    for expected in (
        "job #12 bert started on gpu-a, gpu-b (2× A100-80GB)",
        "job #12 bert failed: exited with 3",
        "job #12 bert was lost: its host did not answer for 6 h; it has used its 3 attempts",
        "job #12 b: its host never took the start; it is queued again as a new attempt",
        "job #12 b was stopped (for core work) and is queued again",
        "host gpu-a is down: connection refused",
        "Quota #1 of team vision (any type) expires on 2026-11-05 (in 3 days): 20.0 of 100 "
        "GPU-hours left. Jobs that would be cut off: #1 j1, #2 j2, #3 j3, #4 j4, #5 j5 and 4 more.",
        "<@UAPPROVER> released them",
        "bump request #4 for job #12 bert was denied by <@UAPPROVER>: not now",
    ):
        assert any(expected in one for one in said), expected


def test_notices_the_code_writes_carry_values_and_no_sentence(team_bot: Bot) -> None:
    """Real producers write real rows: bump requests and decisions, a quota alert, the
    digest, job and host events. None stores a sentence; Slack and the console say each."""
    paika = team_bot.paika
    now = paika.clock.now()
    expires = (now.astimezone(paika.policy.zone).date() + timedelta(days=3)).isoformat()
    for user, text in (
        (MEMBER, 'submit name=bert gpus=1 hours=1 priority=core data=ready cmd="python t.py"'),
        (APPROVER, 'deny 1 reason="not this week"'),
        (
            ADMIN,
            f"admin quota add team=vision type=any hours=10 expires={expires} owner=<@{APPROVER}>",
        ),
    ):
        assert paika.run(text, user).ok, text
    assert raise_quota_alerts(paika.engine, paika.policy, now)
    morning = datetime.combine(
        now.astimezone(paika.policy.zone).date() + timedelta(days=1),
        time.fromisoformat(paika.policy.digest.time),
        tzinfo=paika.policy.zone,
    ) + timedelta(minutes=1)
    assert raise_digest(paika.engine, paika.policy, morning.astimezone(UTC)) is not None
    with session_scope(paika.engine) as session:
        for event in events():
            record(session, event)
    with session_scope(paika.engine) as session:
        rows = session.exec(select(Notice)).all()
    kinds = {REQUEST_KIND, DECISION_KIND, EXPIRY_KIND, NoticeKind.DIGEST, *HOST_CODES.values()}
    assert kinds <= {r.kind for r in rows}
    assert [r.key for r in rows if "text" in (r.detail or {})] == []
    out = io.StringIO()
    for row in rows:
        notice = from_row(row)
        assert notice.legacy_text is None
        for lang in ("en", "zh"):
            assert not UNSAID.search(sentence(lang, notice)), (row.kind, sentence(lang, notice))
        assert ConsoleAnnouncer(out).announce(notice)
    printed = out.getvalue()
    assert printed.count("\n") == len(rows)
    assert f"<@{MEMBER}> asks to move job #1 bert from normal to core" in printed
    assert "bump request #1 for job #1 bert was denied by <@UAPPROVER>: not this week" in printed
    # Slack delivers every one of them (the approvals went out at once, by the bot's courier).
    announcer = SlackAnnouncer(team_bot.messenger, team_bot.services)
    deliver_pending(paika.engine, announcer, morning.astimezone(UTC))
    with session_scope(paika.engine) as session:
        unsent = [n.key for n in session.exec(select(Notice)) if n.sent_at is None]
    assert unsent == []
    team_bot.slack.assert_nothing_invalid()


def test_a_notice_stored_as_a_sentence_by_an_older_paika_is_delivered_as_it_stood(
    team_bot: Bot,
) -> None:
    paika = team_bot.paika
    now = paika.clock.now()
    older = "job #3 old-run finished"
    with session_scope(paika.engine) as session:
        notice_queries.claim_notice(
            session=session,
            key="job_finished:job:3:older",
            kind=EventKind.JOB_FINISHED.value,
            subject="job:3",
            now=now,
            detail={
                "text": older,
                "to_users": [MEMBER],
                "to_channel": False,
                "detail": {"subject": "job:3", "job_id": 3, "host": None, "event": {}},
            },
        )
    out = io.StringIO()
    with session_scope(paika.engine) as session:
        [row] = session.exec(select(Notice)).all()
    assert f"job_finished: {older} → <@{MEMBER}>" in line(from_row(row))
    announcer = SlackAnnouncer(team_bot.messenger, team_bot.services)
    assert deliver_pending(paika.engine, announcer, now) == 1
    [dm] = team_bot.slack.calls("chat.postMessage")
    assert older in text_of(dm.args) and "Job #3 finished" in text_of(dm.args)
    assert deliver_pending(paika.engine, ConsoleAnnouncer(out), now + timedelta(hours=1)) == 0
