"""The notice of a job held because a job it waits for failed or was cancelled: Release (go
on without it) and Cancel, each as the owner's own command (`/gpu release`, `/gpu cancel`).

The builder reads the notice's stored `detail` alone, so any instance can draw it again."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from bot.blocks.common import (
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
from bot.blocks.ids import HELD_ACTIONS, HELD_CANCEL, HELD_RELEASE
from bot.blocks.job import ref
from bot.i18n import t, term, when
from scheduler.door import Announcement


def held_ask(notice: Announcement, lang: str, zone: ZoneInfo) -> Message:
    """Told to a held job's owner: which job it waits for ended without success, and what
    they may do: release it to run anyway, or cancel it."""
    info = notice.detail
    job_id = str(info.get("job_id"))
    title = t(lang, "alert.held.header", id=info.get("job_id"), name=info.get("name", "?"))
    told = t(
        lang,
        "alert.held.ask",
        owner=mention(info.get("owner")),
        job=ref(info.get("job_id"), str(info.get("name", "?"))),
        upstream=ref(info.get("upstream"), str(info.get("upstream_name", "?"))),
        state=term(lang, "state", str(info.get("upstream_state", "failed"))),
    )
    cancel_confirm = confirm_dialog(
        t(lang, "alert.held.confirm_title"),
        t(lang, "alert.held.confirm_text", id=info.get("job_id")),
        t(lang, "alert.held.cancel"),
        t(lang, "alert.held.keep"),
    )
    buttons = actions(
        HELD_ACTIONS,
        button(t(lang, "alert.held.release"), HELD_RELEASE, job_id, style="primary"),
        button(
            t(lang, "alert.held.cancel"),
            HELD_CANCEL,
            job_id,
            style="danger",
            confirm=cancel_confirm,
        ),
    )
    follow = t(
        lang,
        "alert.held.follow",
        release=code(f"/gpu release {job_id}"),
        cancel=code(f"/gpu cancel {job_id}"),
    )
    blocks = [
        header(title),
        section(f":pause_button: {told}"),
        buttons,
        context(when(lang, notice.at, zone), follow),
    ]
    return Message(mrkdwn_escape(title), blocks)
