"""The overrun notice: a run past its estimate, with Extend and Stop, and again once answered.

Every builder reads the notice's stored `detail`, so the message can be drawn again later,
by any instance, from the notice row alone.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from bot.blocks.common import (
    Block,
    Message,
    actions,
    button,
    code,
    confirm_dialog,
    context,
    header,
    mention,
    mrkdwn_escape,
    section,
)
from bot.blocks.ids import ALERT_ACTIONS, OVERRUN_EXTEND, OVERRUN_STOP
from bot.blocks.job import ref
from bot.i18n import t, when
from scheduler.door import Announcement

_ANSWERED = {
    "extend": (":hourglass_flowing_sand:", "alert.overrun.answered.extend"),
    "stop": (":octagonal_sign:", "alert.overrun.answered.stop"),
    "ended": (":information_source:", "alert.overrun.answered.ended"),
}


def overrun_ask(notice: Announcement, lang: str, zone: ZoneInfo) -> Message:
    """Told to a job's owner: the run is past its estimate; Extend it, or Stop it?"""
    info = notice.detail
    stop_confirm = confirm_dialog(
        t(lang, "alert.overrun.confirm_title"),
        t(lang, "alert.overrun.confirm_text", id=info.get("job_id")),
        t(lang, "alert.overrun.stop"),
        t(lang, "alert.overrun.keep"),
    )
    buttons = actions(
        ALERT_ACTIONS,
        button(t(lang, "alert.overrun.extend"), OVERRUN_EXTEND, notice.key, style="primary"),
        button(
            t(lang, "alert.overrun.stop"),
            OVERRUN_STOP,
            notice.key,
            style="danger",
            confirm=stop_confirm,
        ),
    )
    choices = [t(lang, "alert.overrun.then", hours=float(info.get("extend_to_hours") or 0))]
    if info.get("limit_hours") is not None:
        choices.append(t(lang, "alert.overrun.limit", hours=float(info["limit_hours"])))
    follow = t(lang, "alert.reclaim.follow", command=code(f"/gpu status #{info.get('job_id')}"))
    blocks = [
        *_blocks(notice, lang),
        section(" ".join(choices)),
        buttons,
        context(when(lang, notice.at, zone), follow),
    ]
    return Message(mrkdwn_escape(_title(notice, lang)), blocks)


def overrun_answered(
    notice: Announcement,
    answer: str | None,
    by: str | None,
    at: datetime | None,
    hours: float | None,
    lang: str,
    zone: ZoneInfo,
) -> Message:
    """The notice once answered: what happened, and no buttons."""
    emoji, key = _ANSWERED.get(answer or "", _ANSWERED["ended"])
    outcome = t(lang, key, user=mention(by), at=when(lang, at, zone), hours=hours or 0.0)
    blocks = [*_blocks(notice, lang), section(f"{emoji} {outcome}")]
    return Message(mrkdwn_escape(_title(notice, lang)), blocks)


def _title(notice: Announcement, lang: str) -> str:
    info = notice.detail
    return t(lang, "alert.overrun.header", id=info.get("job_id"), name=info.get("name", "?"))


def _blocks(notice: Announcement, lang: str) -> list[Block]:
    info = notice.detail
    told = t(
        lang,
        "alert.overrun.ask",
        owner=mention(info.get("owner")),
        job=ref(info.get("job_id"), str(info.get("name", "?"))),
        elapsed=float(info.get("elapsed_hours") or 0),
        estimate=float(info.get("estimate_hours") or 0),
        factor=float(info.get("factor") or 0),
    )
    return [header(_title(notice, lang)), section(f":stopwatch: {told}")]
