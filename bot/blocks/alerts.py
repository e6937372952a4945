"""Alerts paika raises on its own: quota warnings with Acknowledge, idle-GPU asks with
Still using / Release, the notice of a reclaim, and each message again once answered.

Every builder reads the alert's stored `detail` (JSON), so a message can be drawn again
later, by any instance, from the alert row alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot.blocks.common import (
    MESSAGE_BLOCKS,
    Block,
    Message,
    actions,
    button,
    code,
    confirm_dialog,
    context,
    escape_keeping_mentions,
    fit,
    header,
    listing,
    mention,
    mrkdwn_escape,
    section,
)
from bot.blocks.ids import ALERT_ACTIONS, IDLE_RELEASE, IDLE_STILL_USING, QUOTA_ACKNOWLEDGE
from bot.blocks.job import gpu_hours, ref, state
from bot.i18n import counted, day, t, when
from bot.notice_words import sentence
from scheduler.door import STILL_USING_QUIET, Announcement, NoticeKind

# Room in a message for the blocks around the list of jobs a quota would cut off.
_AROUND_JOBS = 6
# The notification line Slack shows; the blocks carry the rest.
_NOTIFICATION = 300

_CONSEQUENCE = {
    "requeue": "alert.idle.then.requeue",
    "release": "alert.idle.then.release",
    "keep": "alert.idle.then.keep",
}
_ANSWERED = {
    "still_using": (":ok_hand:", "alert.idle.answered.still_using"),
    "release": (":wave:", "alert.idle.answered.release"),
    "timeout": (":recycle:", "alert.idle.answered.timeout"),
    "not_idle": (":information_source:", "alert.idle.answered.not_idle"),
    "ended": (":information_source:", "alert.idle.answered.ended"),
}
_RECLAIMED = {"requeue": "alert.reclaim.requeue", "release": "alert.reclaim.release"}
_CUT_OFF = {
    "ends_after_expiry": "alert.quota.ends_after_expiry",
    "needs_more_than_left": "alert.quota.needs_more_than_left",
}


# ---------------------------------------------------------------- quotas


def quota_alert(alert: Announcement, lang: str, zone: ZoneInfo) -> Message:
    """A quota nearing expiry or running out: what is left, the jobs it would cut off, and
    an Acknowledge button for its owner."""
    ack = button(t(lang, "alert.quota.acknowledge"), QUOTA_ACKNOWLEDGE, alert.key, style="primary")
    blocks = [*_quota_blocks(alert, lang, zone), actions(ALERT_ACTIONS, ack)]
    return Message(mrkdwn_escape(_quota_title(alert, lang)), blocks)


def quota_acknowledged(
    alert: Announcement, by: str | None, at: datetime | None, lang: str, zone: ZoneInfo
) -> Message:
    """The same alert once acknowledged: who and when, and no button."""
    done = ":white_check_mark: " + t(
        lang, "alert.quota.acknowledged_by", user=mention(by), at=when(lang, at, zone)
    )
    title = mrkdwn_escape(_quota_title(alert, lang))
    return Message(title, [*_quota_blocks(alert, lang, zone), section(done)])


def _quota_title(alert: Announcement, lang: str) -> str:
    info = alert.detail
    names = {
        "id": info.get("quota_id"),
        "team": info.get("team", "?"),
        "gpu_type": info.get("gpu_type") or t(lang, "quota.any_type"),
    }
    if alert.kind == NoticeKind.QUOTA_EXPIRY:
        days = int(info.get("days_left", 0))
        if days <= 0:
            soon = t(lang, "alert.quota_expiry.today")
        elif days == 1:
            soon = t(lang, "alert.quota_expiry.tomorrow")
        else:
            soon = t(lang, "alert.quota_expiry.in_days", n=days)
        return t(lang, "alert.quota_expiry.header", when=soon, **names)
    return t(lang, "alert.quota_used.header", pct=float(info.get("used_pct", 0)), **names)


def _quota_blocks(alert: Announcement, lang: str, zone: ZoneInfo) -> list[Block]:
    info = alert.detail
    emoji = ":hourglass_flowing_sand:" if alert.kind == NoticeKind.QUOTA_EXPIRY else ":bar_chart:"
    status = t(
        lang,
        "alert.quota.state",
        left=float(info.get("left_hours", 0)),
        total=float(info.get("gpu_hours", 0)),
        used=float(info.get("used_hours", 0)),
        day=_day(lang, info.get("expires_on")),
        owner=mention(info.get("owner")),
    )
    blocks = [header(_quota_title(alert, lang)), section(f"{emoji} {status}")]
    jobs: Sequence[Mapping[str, Any]] = info.get("jobs") or []
    total = len(jobs) + int(info.get("jobs_more", 0))  # the alert lists the first few
    if jobs:
        lines = [f"• {_cut_off_line(job, lang, zone)}" for job in jobs]
        blocks += listing(
            lines,
            MESSAGE_BLOCKS - _AROUND_JOBS,
            lambda shown: counted(lang, "alert.quota.more_jobs", total - shown, n=total - shown),
            total=total,
            heading=t(lang, "alert.quota.cut_off"),
        )
    else:
        blocks.append(section(t(lang, "alert.quota.none_cut_off")))
    quota_id = info.get("quota_id")
    blocks.append(
        context(
            t(
                lang,
                "alert.quota.what_next",
                renew=code(f"/gpu admin quota renew {quota_id} expires=YYYY-MM-DD"),
                adjust=code(f'/gpu admin quota adjust {quota_id} hours=… reason="…"'),
            )
        )
    )
    return blocks


def _cut_off_line(job: Mapping[str, Any], lang: str, zone: ZoneInfo) -> str:
    key = _CUT_OFF.get(str(job.get("why")), "alert.quota.needs_more_than_left")
    return t(
        lang,
        key,
        job=ref(job.get("id"), str(job.get("name", "?"))),
        state=state(lang, str(job.get("state", "?"))),
        owner=mention(job.get("owner")),
        at=when(lang, _moment(job.get("ends_at")), zone),
        hours=gpu_hours(lang, float(job.get("est_gpu_hours") or 0)),
    )


# ---------------------------------------------------------------- idle GPUs


def idle_ask(alert: Announcement, lang: str, zone: ZoneInfo) -> Message:
    """Asked of a job's owner: its GPUs have been idle; Still using, or Release?"""
    info = alert.detail
    job_id = info.get("job_id")
    release_confirm = confirm_dialog(
        t(lang, "alert.idle.confirm_title"),
        t(lang, "alert.idle.confirm_text", id=job_id),
        t(lang, "alert.idle.release"),
        t(lang, "alert.idle.keep"),
    )
    buttons = actions(
        ALERT_ACTIONS,
        button(t(lang, "alert.idle.still_using"), IDLE_STILL_USING, alert.key, style="primary"),
        button(
            t(lang, "alert.idle.release"),
            IDLE_RELEASE,
            alert.key,
            style="danger",
            confirm=release_confirm,
        ),
    )
    consequence = t(
        lang,
        _CONSEQUENCE.get(str(info.get("action")), "alert.idle.then.keep"),
        minutes=float(info.get("grace_minutes", 0)),
    )
    blocks = [*_idle_blocks(alert, lang), section(consequence), buttons]
    return Message(mrkdwn_escape(_idle_title(alert, lang)), blocks)


def idle_answered(
    alert: Announcement,
    answer: str | None,
    by: str | None,
    at: datetime | None,
    lang: str,
    zone: ZoneInfo,
) -> Message:
    """The ask once answered (or decided by paika): what happened, and no buttons."""
    emoji, key = _ANSWERED.get(answer or "", _ANSWERED["ended"])
    quiet = float(alert.detail.get("idle_minutes", 0)) * STILL_USING_QUIET
    outcome = t(lang, key, user=mention(by), at=when(lang, at, zone), minutes=quiet)
    blocks = [*_idle_blocks(alert, lang), section(f"{emoji} {outcome}")]
    return Message(mrkdwn_escape(_idle_title(alert, lang)), blocks)


def reclaim_notice(alert: Announcement, lang: str, zone: ZoneInfo) -> Message:
    """The owner hears what paika did with the idle GPUs, and why."""
    info = alert.detail
    by = info.get("by")
    if by:
        why = t(lang, "alert.reclaim.by", user=mention(by))
    else:
        why = t(lang, "alert.reclaim.no_answer", minutes=float(info.get("grace_minutes", 0)))
    text = t(
        lang,
        _RECLAIMED.get(str(info.get("action")), "alert.reclaim.release"),
        job=ref(info.get("job_id"), str(info.get("name", "?"))),
        minutes=float(info.get("idle_minutes", 0)),
        why=why,
    )
    follow = t(lang, "alert.reclaim.follow", command=code(f"/gpu status #{info.get('job_id')}"))
    blocks = [section(f":recycle: {text}"), context(when(lang, alert.at, zone), follow)]
    return Message(fit(text, _NOTIFICATION), blocks)


def _idle_title(alert: Announcement, lang: str) -> str:
    info = alert.detail
    return t(lang, "alert.idle.header", id=info.get("job_id"), name=info.get("name", "?"))


def _idle_blocks(alert: Announcement, lang: str) -> list[Block]:
    info = alert.detail
    hosts = ", ".join(mrkdwn_escape(str(h)) for h in info.get("hosts") or ()) or "?"
    ask = t(
        lang,
        "alert.idle.ask",
        owner=mention(info.get("owner")),
        job=ref(info.get("job_id"), str(info.get("name", "?"))),
        gpus=info.get("gpus", "?"),
        gpu_type=mrkdwn_escape(str(info.get("gpu_type", "?"))),
        hosts=hosts,
        pct=float(info.get("idle_pct", 0)),
        minutes=float(info.get("idle_minutes", 0)),
        peak=float(info.get("peak_pct", 0)),
    )
    blocks = [header(_idle_title(alert, lang)), section(f":zzz: {ask}")]
    beside = info.get("shared_with") or ()
    if beside:  # a shared card is idle as a whole: its neighbours are asked too
        jobs = ", ".join(
            f"{ref(job.get('job_id'), '')}{mention(job.get('owner'))}" for job in beside
        )
        blocks.append(context(t(lang, "alert.idle.shared", jobs=jobs)))
    return blocks


# ---------------------------------------------------------------- anything else


def plain_alert(alert: Announcement, lang: str, zone: ZoneInfo) -> Message:
    """A notice without a builder of its own: its sentence, and when."""
    text = escape_keeping_mentions(sentence(lang, alert)) or alert.kind
    blocks = [section(f":bell: {text}"), context(when(lang, alert.at, zone))]
    return Message(fit(text, _NOTIFICATION), blocks)


def _moment(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _day(lang: str, value: object) -> str:
    if not isinstance(value, str):
        return "?"
    return day(lang, date.fromisoformat(value))
