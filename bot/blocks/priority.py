"""`/gpu priority`: a waiting job's place in the order, term by term, said the same on the
console and in Slack (Block Kit escapes what people named: job and team names)."""

from __future__ import annotations

from collections.abc import Callable
from zoneinfo import ZoneInfo

from bot.blocks.common import MESSAGE_BLOCKS, Message, header, listing, mrkdwn_escape
from bot.blocks.job import priority, state
from bot.i18n import t, when
from scheduler.door import JobState, PriorityResult

Escape = Callable[[str], str]
HOUR = 3600.0
# Jobs ahead named one by one (the nearest first in line); the rest are counted.
AHEAD_SHOWN = 10
# States whose moment of note is when they ended, not when they started.
_ENDED = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


def priority_header(lang: str, result: PriorityResult, escape: Escape = str) -> str:
    job = result.job
    if result.terms is None:
        return t(lang, "rank.header_not_waiting", id=job.id, name=escape(job.name))
    return t(
        lang,
        "rank.header",
        id=job.id,
        name=escape(job.name),
        position=result.position,
        total=result.queue_length,
    )


def priority_lines(
    lang: str, result: PriorityResult, zone: ZoneInfo, escape: Escape = str
) -> list[str]:
    """The breakdown, one term a line; for a job not waiting, where it is instead."""
    job, terms, knobs = result.job, result.terms, result.knobs
    if terms is None:
        ended = job.state in _ENDED
        since = job.ended_at if ended else job.started_at or job.submitted_at
        return [
            t(
                lang,
                "rank.not_waiting",
                id=job.id,
                state=state(lang, job.state),
                since=when(lang, since, zone),
            )
        ]
    team = escape(result.team)
    lines = [
        t(lang, "rank.class", priority=priority(lang, job.priority))
        if knobs.respect_classes
        else t(lang, "rank.class_ignored", priority=priority(lang, job.priority))
    ]
    lines.append(
        t(
            lang,
            "rank.size",
            hours=terms.size_gpu_s / HOUR,
            estimate=job.est_gpu_hours,
        )
    )
    aging = "rank.aging_capped" if terms.aging_capped else "rank.aging"
    lines.append(
        t(
            lang,
            aging,
            waited=terms.wait_s / HOUR,
            factor=terms.aging_factor,
            every=knobs.aging_hours,
            cap=knobs.max_aging_factor or 0.0,
        )
    )
    lines.append(
        t(
            lang,
            "rank.fair_share",
            team=team,
            share=terms.team_share * 100,
            factor=terms.fair_share,
            weight=knobs.fair_share_weight,
        )
    )
    usage = ", ".join(
        t(lang, "rank.usage_row", team=escape(u.team), hours=u.gpu_hours, share=u.share * 100)
        for u in result.usage
    )
    lines.append(
        t(lang, "rank.usage", half_life=knobs.half_life_hours, teams=usage)
        if usage
        else t(lang, "rank.usage_none", half_life=knobs.half_life_hours)
    )
    lines.append(_backstop(lang, result))
    if terms.by_submit:
        lines.append(t(lang, "rank.by_submit"))
    else:
        lines.append(t(lang, "rank.score", score=terms.score))
    lines.append(_ahead(lang, result, escape))
    return lines


def _backstop(lang: str, result: PriorityResult) -> str:
    terms, after = result.terms, result.knobs.starve_after_hours
    assert terms is not None
    if after is None:
        return t(lang, "rank.backstop_off")
    if terms.starving:
        return t(lang, "rank.backstop_applies", hours=after)
    return t(lang, "rank.backstop_later", hours=after, left=after - terms.wait_s / HOUR)


def _ahead(lang: str, result: PriorityResult, escape: Escape) -> str:
    if not result.ahead:
        return t(lang, "rank.first")
    nearest = result.ahead[-AHEAD_SHOWN:]  # those just ahead of it matter most
    named = ", ".join(
        t(lang, "rank.ahead_row", id=a.id, priority=priority(lang, a.priority), team=escape(a.team))
        for a in nearest
    )
    rest = len(result.ahead) - len(nearest)
    if rest:
        return t(lang, "rank.ahead_more", jobs=named, more=rest)
    return t(lang, "rank.ahead", jobs=named)


def priority_message(result: PriorityResult, lang: str, zone: ZoneInfo) -> Message:
    """The breakdown as Block Kit: a header, then one line a term."""
    title = priority_header(lang, result)
    lines = priority_lines(lang, result, zone, mrkdwn_escape)
    more = listing(
        lines, MESSAGE_BLOCKS - 1, lambda shown: t(lang, "status.more", n=len(lines) - shown)
    )
    return Message(mrkdwn_escape(title), [header(title), *more])
