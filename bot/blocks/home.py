"""The App Home tab: the user's own jobs, the board, and their team's quotas."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot.blocks.board import board_blocks
from bot.blocks.common import (
    MESSAGE_CHARS,
    VIEW_BLOCKS,
    Block,
    actions,
    button,
    code,
    context,
    divider,
    header,
    listing,
    mention,
    mrkdwn_escape,
    section,
)
from bot.blocks.ids import HOME_ACTIONS, HOME_REFRESH, HOME_SUBMIT
from bot.blocks.job import own_line
from bot.blocks.matches import own_estimate_line
from bot.blocks.quotas import quota_line
from bot.i18n import counted, t, when
from scheduler.door import BoardResult, EstimateRecord, JobView, QuotaView

JOBS_SHOWN = 20
JOBS_BLOCKS = 6
QUOTA_BLOCKS = 4


def home_view(
    user_id: str,
    my_jobs: Sequence[JobView],
    board: BoardResult,
    quotas: Sequence[QuotaView],
    lang: str,
    zone: ZoneInfo,
    now: datetime,
    estimates: EstimateRecord | None = None,
) -> dict[str, Any]:
    """The Home tab view (type "home"), in at most 100 blocks; the board gets what is left."""
    top = [
        header(t(lang, "home.header")),
        actions(
            HOME_ACTIONS,
            button(t(lang, "home.submit"), HOME_SUBMIT, "submit", style="primary"),
            button(t(lang, "home.refresh"), HOME_REFRESH, "refresh"),
        ),
        context(t(lang, "home.updated", user=mention(user_id), at=when(lang, now, zone))),
        *_jobs(my_jobs, lang, zone, now),
        *([context(mrkdwn_escape(own_estimate_line(lang, estimates)))] if estimates else []),
        divider(),
    ]
    bottom = [divider(), *_quotas(quotas, lang)]
    middle = board_blocks(board, lang, zone, now, budget=VIEW_BLOCKS - len(top) - len(bottom))
    return {"type": "home", "blocks": [*top, *middle, *bottom]}


def _jobs(views: Sequence[JobView], lang: str, zone: ZoneInfo, now: datetime) -> list[Block]:
    heading = f"*{t(lang, 'home.jobs', n=len(views))}*"
    if not views:
        return [section(f"{heading}\n{t(lang, 'home.no_jobs', command=code('/gpu submit'))}")]
    return listing(
        [own_line(lang, view, zone, now) for view in views[:JOBS_SHOWN]],
        JOBS_BLOCKS,
        lambda shown: t(lang, "home.more_jobs", n=len(views) - shown, hint=code("/gpu queue mine")),
        total=len(views),
        chars=MESSAGE_CHARS // 2,
        heading=heading,
    )


def _quotas(quotas: Sequence[QuotaView], lang: str) -> list[Block]:
    heading = f"*{t(lang, 'home.quotas')}*"
    if not quotas:
        return [section(f"{heading}\n{t(lang, 'home.no_quotas')}")]
    return listing(
        [quota_line(lang, view) for view in quotas],
        QUOTA_BLOCKS,
        lambda shown: counted(lang, "quota.more", len(quotas) - shown, n=len(quotas) - shown),
        heading=heading,
    )
