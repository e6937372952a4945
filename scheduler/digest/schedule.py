"""When the daily digest goes out, and raising it through the alerts outbox exactly once.

The digest of a day is due from the configured minute (`digest.time`, in the policy's
time zone) for `digest.late_minutes` more minutes. A digest missed by more than that
(paika was down all morning) is skipped, not posted in the afternoon: a board of how
things stood hours ago, posted as if fresh, misleads more than no board. The next day's
digest goes out as usual.

`raise_digest` builds the digest and claims its occasion (`digest:<YYYY-MM-DD>`) in one
transaction; the caller then delivers it with `deliver_pending(..., kind="digest")`,
which retries a failed post until it gets through. Two instances, or a restart between
raising and delivering, cannot post one day's digest twice: only one claim succeeds.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import Engine

from scheduler.config import PolicyConfig
from scheduler.digest.data import build_digest, system_context
from scheduler.notices.kinds import NoticeKind
from scheduler.notices.outbox import Announcement, claim
from storage.db import session_scope
from storage.queries import notices as notice_queries

KIND = NoticeKind.DIGEST


def digest_key(day: date) -> str:
    """The alert key of one day's digest."""
    return f"{KIND}:{day.isoformat()}"


def digest_due(policy: PolicyConfig, now: datetime, last_sent_date: date | None) -> date | None:
    """The day whose digest should go out at `now`, or None.

    Due from the configured minute until `late_minutes` after that minute, so a digest set
    for 23:30 with three late hours may still go out at 01:00 the next day, for its own
    day. Never a day at or before `last_sent_date`.
    """
    settings = policy.digest
    if not settings.enabled:
        return None
    hour, minute = (int(part) for part in settings.time.split(":"))
    local_today = now.astimezone(policy.zone).date()
    grace = timedelta(minutes=1 + settings.late_minutes)
    # The latest scheduled moment at or before now: today's, or an earlier day's.
    for back in range(0, 2 + int(settings.late_minutes // (24 * 60))):
        day = local_today - timedelta(days=back)
        scheduled = datetime.combine(day, time(hour, minute), tzinfo=policy.zone).astimezone(UTC)
        if scheduled > now:
            continue
        if now >= scheduled + grace:
            return None  # missed by more than late_minutes: skipped
        if last_sent_date is not None and day <= last_sent_date:
            return None
        return day
    return None


def raise_digest(engine: Engine, policy: PolicyConfig, now: datetime) -> Announcement | None:
    """If a digest is due and not yet claimed, build it and claim it; the announcement, or None.

    Cheap when nothing is due or the day's digest was already claimed (one lookup), so it
    may be called every few minutes.
    """
    due = digest_due(policy, now, None)
    if due is None:
        return None
    key = digest_key(due)
    with session_scope(engine) as session:
        if notice_queries.get_notice(session=session, key=key) is not None:
            return None
        digest = build_digest(system_context(session, policy, now), due)
        announcement = Announcement(
            key=key,
            kind=KIND,
            at=now,
            to_channel=True,
            detail={**digest.to_json(), "subject": due.isoformat()},
        )
        if not claim(session, announcement):
            return None  # another instance claimed it between our lookup and our claim
    return announcement
