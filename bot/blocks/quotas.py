"""How a quota is shown: usage, what is left, and how soon it expires."""

from __future__ import annotations

from datetime import date

from bot.blocks.common import mention, mrkdwn_escape
from bot.i18n import day, t
from scheduler.door import QuotaView

# The seed's rule: owners hear about an expiry half a month ahead.
WARN_DAYS = 14


def quota_line(lang: str, view: QuotaView) -> str:
    """One quota: team, type, hours used and left, expiry, owner; flagged when near expiry."""
    quota, state = view.quota, view.state
    text = t(
        lang,
        "quota.line",
        quota=f"*#{quota.id}*",
        team=mrkdwn_escape(view.team),
        gpu_type=mrkdwn_escape(quota.gpu_type) if quota.gpu_type else t(lang, "quota.any_type"),
        used=state.used_hours,
        total=quota.gpu_hours,
        left=state.left_hours,
        expiry=expiry(lang, view),
        owner=mention(quota.owner),
    )
    return f":warning: {text}" if view.days_left <= WARN_DAYS else text


def expiry(lang: str, view: QuotaView) -> str:
    """When the quota expires, and in how many days (or how long ago)."""
    return expiry_words(lang, view.quota.expires_on, view.days_left)


def expiry_words(lang: str, expires_on: date, left: int) -> str:
    """An expiry date with how many days are left (or how long ago it passed)."""
    on = day(lang, expires_on)
    if left < -1:
        return t(lang, "quota.expired", day=on, n=-left)
    if left == -1:
        return t(lang, "quota.expired_yesterday", day=on)
    if left == 0:
        return t(lang, "quota.expires_today", day=on)
    if left == 1:
        return t(lang, "quota.expires_tomorrow", day=on)
    return t(lang, "quota.expires", day=on, n=left)
