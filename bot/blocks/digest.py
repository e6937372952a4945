"""The daily digest in Block Kit: the cards, the queue, who waits for data, what starts
next, yesterday's ledger, idle GPU-hours and quota warnings.

It goes to a shared channel, so people are named, not mentioned: a mention would ping
every owner in the digest every morning. Names come from `names` (Slack user id →
display name, looked up by the poster); without one, the user id is shown as text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.blocks.common import (
    MESSAGE_BLOCKS,
    MESSAGE_CHARS,
    Block,
    Message,
    context,
    divider,
    header,
    listing,
    mrkdwn_escape,
    section,
    text_size,
)
from bot.blocks.job import gpu_hours, priority, ref, state, why_and_when
from bot.blocks.quotas import expiry_words
from bot.board_words import none_next_up
from bot.i18n import amount, counted, day, duration, t, when
from bot.notice_words import notification
from scheduler.door import DayUsage, Digest, JobLine, PriorityClass, QuotaWarning

# Blocks and characters each part may use; what does not fit is summarised in its last
# line. Seven parts at most this size, and the few lines between them, stay within
# MESSAGE_CHARS, so a digest is never refused as too long.
LIST_BLOCKS = 3
LIST_CHARS = 1500
CARDS_CHARS = 1400
AHEAD_CHARS = 600  # the maintenance and bookings ahead: one block, beside the seven parts


def digest_blocks(
    digest: Digest,
    lang: str,
    zone: ZoneInfo,
    *,
    names: Mapping[str, str] | None = None,
) -> Message:
    """The digest as one channel message: at most 50 blocks, every list summarised when cut."""
    people = _Names(names or {})
    blocks: list[Block] = [
        header(t(lang, "digest.header", day=day(lang, digest.day))),
        context(
            t(lang, "digest.as_of", at=when(lang, digest.at, zone)),
            *(
                [t(lang, "config.in_force", version=digest.config_version)]
                if digest.config_version is not None
                else []
            ),
        ),
        *_cards(digest, lang),
        section(_queue(digest, lang)),
        divider(),
        *_ready(digest, lang),
        *_waiting_data(digest, lang, people),
        *_next_up(digest, lang, zone, people),
        *_ahead(digest, lang, zone),
        divider(),
        *_yesterday(digest, lang),
        *_idle(digest, lang, people),
        *_quotas(digest, lang, people),
        divider(),
        context(t(lang, "digest.footer", board="`/gpu board`", queue="`/gpu queue mine`")),
    ]
    if len(blocks) > MESSAGE_BLOCKS or text_size(blocks) > MESSAGE_CHARS:
        # Each part is bounded (above), so only a change to those bounds gets here.
        raise ValueError(f"digest of {len(blocks)} blocks, {text_size(blocks)} characters")
    return Message(notification(digest, lang), blocks)


class _Names:
    """People by name, never as a mention."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self.names = names

    def __call__(self, user_id: str) -> str:
        return mrkdwn_escape(self.names.get(user_id) or user_id or "-")


def _cards(digest: Digest, lang: str) -> list[Block]:
    if not digest.types:
        return [section(t(lang, "board.no_hosts"))]
    heading = t(
        lang,
        "digest.cards",
        total=digest.total_gpus,
        hosts=amount(lang, "count.hosts", digest.hosts),
        free=digest.free_gpus,
        busy=sum(c.busy for c in digest.types),
        idle=sum(c.idle_held for c in digest.types),
        down=sum(c.down for c in digest.types),
    )
    if digest.shared_gpus:
        heading = t(lang, "board.type_shared", line=heading, n=digest.shared_gpus)
    lines = []
    for count in digest.types:
        line = t(
            lang,
            "board.type_line",
            gpu_type=mrkdwn_escape(count.gpu_type),
            total=count.total,
            free=count.free,
            busy=count.busy,
            idle=count.idle_held,
            down=count.down,
        )
        lines.append(
            t(lang, "board.type_shared", line=line, n=count.shared) if count.shared else line
        )
    return listing(lines, LIST_BLOCKS, _more(lang, len(lines)), chars=CARDS_CHARS, heading=heading)


def _queue(digest: Digest, lang: str) -> str:
    waiting = digest.waiting_by_class
    return t(
        lang,
        "board.queue",
        running=digest.running,
        core=waiting.get(PriorityClass.CORE.value, 0),
        normal=waiting.get(PriorityClass.NORMAL.value, 0),
        idle=waiting.get(PriorityClass.IDLE.value, 0),
        data=digest.waiting_for_data,
    )


def _needs(lang: str, line: JobLine) -> str:
    gpus = t(lang, "needs.gpus", n=line.gpus)
    return f"{gpus} {mrkdwn_escape(line.gpu_type)}" if line.gpu_type else gpus


def _part(
    heading: str, lines: Sequence[str], total: int, more: Callable[[int], str]
) -> list[Block]:
    """One list of the digest under its bold heading, within its share of the message."""
    return listing(
        lines,
        LIST_BLOCKS,
        more,
        total=total,
        chars=LIST_CHARS,
        heading=heading,
    )


def _more(lang: str, total: int) -> Callable[[int], str]:
    return lambda shown: t(lang, "status.more", n=total - shown)


def _ready(digest: Digest, lang: str) -> list[Block]:
    if not digest.ready_total:
        return [section(t(lang, "digest.ready_none"))]
    lines = [
        f"{ref(line.job_id, line.name)} · {mrkdwn_escape(line.team)} · "
        f"{priority(lang, line.priority)} · {_needs(lang, line)} · "
        f"{gpu_hours(lang, line.est_gpu_hours)}"
        for line in digest.ready
    ]
    heading = t(lang, "digest.ready", n=digest.ready_total)
    return _part(heading, lines, digest.ready_total, _more(lang, digest.ready_total))


def _waiting_data(digest: Digest, lang: str, people: _Names) -> list[Block]:
    if not digest.waiting_for_data:
        return [section(t(lang, "digest.data_none"))]
    lines = []
    for line in digest.waiting_data:
        where = (
            t(lang, "digest.data_at", location=mrkdwn_escape(line.data_location))
            if line.data_location
            else ""
        )
        if line.wait is not None and line.wait.upstream is not None:
            where += t(lang, "digest.data_from", upstream=line.wait.upstream)
        lines.append(
            t(
                lang,
                "digest.data_line",
                job=ref(line.job_id, line.name),
                team=mrkdwn_escape(line.team),
                owner=people(line.owner),
                waited=duration(
                    lang, (digest.at - line.submitted_at).total_seconds(), to_the_minute=True
                ),
                where=where,
            )
        )
    heading = t(lang, "digest.data", n=digest.waiting_for_data)
    total = digest.waiting_for_data
    return _part(heading, lines, total, _more(lang, total))


def _next_up(digest: Digest, lang: str, zone: ZoneInfo, people: _Names) -> list[Block]:
    if not digest.next_up:
        return [section(none_next_up(lang, digest.waiting, digest.waiting_for_data))]
    lines = []
    for number, line in enumerate(digest.next_up, 1):
        wait = line.wait
        place = f"{number}."  # by when it should start, not its place in the queue
        why = why_and_when(lang, wait.to_wait(line.job_id), zone, digest.at) if wait else ""
        lines.append(
            f"{place} {ref(line.job_id, line.name)} · {people(line.owner)} · "
            f"{priority(lang, line.priority)} — {why}"
        )
    heading = f"*{t(lang, 'board.next_up')}*"
    return _part(heading, lines, len(lines), _more(lang, len(lines)))


def _ahead(digest: Digest, lang: str, zone: ZoneInfo) -> list[Block]:
    """Planned maintenance and booked cards not over yet, soonest first (nothing when none)."""
    lines = ahead_lines(digest, lang, lambda moment: when(lang, moment, zone), mrkdwn_escape)
    if not lines:
        return []
    return listing(
        lines,
        1,
        _more(lang, len(lines)),
        total=len(lines),
        chars=AHEAD_CHARS,
        heading=f"*{t(lang, 'digest.ahead')}*",
    )


def ahead_lines(
    digest: Digest,
    lang: str,
    moment: Callable[[datetime], str],
    escape: Callable[[str], str] = str,
) -> list[str]:
    """Each maintenance and booking not over yet, soonest first, a line each: in Slack and
    on the terminal alike (`moment` says a time, `escape` a name for the medium)."""
    items = [
        (
            w.starts,
            t(
                lang,
                "digest.ahead_maintenance",
                host=escape(w.host),
                starts=moment(w.starts),
                ends=moment(w.ends),
                reason=escape(w.reason),
            ),  # fmt: skip
        )
        for w in digest.maintenance
    ]
    items += [
        (
            b.starts,
            t(
                lang,
                "digest.ahead_booking",
                gpus=b.gpus,
                gpu_type=escape(b.gpu_type),
                team=escape(b.team),
                starts=moment(b.starts),
                ends=moment(b.ends),
                reason=escape(b.reason),
            ),  # fmt: skip
        )
        for b in digest.bookings
    ]
    return [said for _, said in sorted(items, key=lambda item: item[0])]


def _yesterday(digest: Digest, lang: str) -> list[Block]:
    usage = digest.yesterday
    outputs = output_lines(lang, usage, mrkdwn_escape)
    if not usage.rows and not outputs:
        return [section(t(lang, "digest.yesterday_none", day=day(lang, usage.day)))]
    heading = (
        counted(
            lang,
            "digest.yesterday",
            usage.job_count,
            day=day(lang, usage.day),
            hours=usage.total_gpu_hours,
            cost=usage.total_cost,
            jobs=usage.job_count,
        )
        if usage.rows
        else t(lang, "digest.yesterday_none", day=day(lang, usage.day))
    )
    # What the day's spend produced comes first: the team × type rows are cut first.
    lines = outputs + [
        counted(
            lang,
            "report.row",
            row.jobs,
            team=mrkdwn_escape(row.team),
            gpu_type=mrkdwn_escape(row.gpu_type),
            hours=row.gpu_hours,
            cost=row.cost,
            jobs=row.jobs,
        )
        for row in usage.rows
    ]
    return _part(heading, lines, len(lines), _more(lang, len(lines)))


def output_lines(lang: str, usage: DayUsage, escape: Callable[[str], str] = str) -> list[str]:
    """The day's spend linked to outputs: the runs that finished by outcome, then each
    project's GPU-hours, cost, runs finished and best metrics (names go through `escape`)."""
    lines = []
    if usage.finished:
        outcomes = ", ".join(
            t(
                lang,
                "digest.finished_kind",
                runs=kind.runs,
                state=state(lang, kind.state),
                hours=kind.gpu_hours,
                cost=kind.cost,
            )
            for kind in usage.finished
        )
        lines.append(t(lang, "digest.finished", outcomes=outcomes))
    for project in usage.projects:
        name = escape(project.project) if project.project else t(lang, "digest.no_project")
        line = counted(
            lang,
            "digest.project",
            project.finished,
            project=name,
            hours=project.gpu_hours,
            cost=project.cost,
            runs=project.finished,
        )
        if project.best:
            metrics = ", ".join(
                t(lang, "digest.metric", name=escape(m.name), value=m.value, job_id=m.job_id)
                for m in project.best
            )
            line = t(lang, "digest.project_best", line=line, metrics=metrics)
        lines.append(line)
    return lines


def _idle(digest: Digest, lang: str, people: _Names) -> list[Block]:
    idle = digest.idle
    if idle.gpu_hours <= 0:
        return [section(t(lang, "digest.idle_none", pct=idle.threshold_pct))]
    types = ", ".join(f"{mrkdwn_escape(name)} {hours:.1f}" for name, hours in idle.by_type.items())
    heading = t(lang, "digest.idle", pct=idle.threshold_pct, hours=idle.gpu_hours, types=types)
    lines = [
        t(
            lang,
            "digest.idle_line",
            job=ref(job.job_id, job.name),
            team=mrkdwn_escape(job.team),
            owner=people(job.owner),
            gpu_type=mrkdwn_escape(job.gpu_type),
            hours=job.gpu_hours,
        )
        for job in idle.jobs
    ]
    return _part(heading, lines, idle.job_count, _more(lang, idle.job_count))


def _quotas(digest: Digest, lang: str, people: _Names) -> list[Block]:
    warnings = digest.quota_warnings
    if not warnings:
        return [section(t(lang, "digest.quotas_none"))]
    lines = [_quota_line(lang, warning, people) for warning in warnings]
    heading = f"*{t(lang, 'digest.quotas')}*"
    return _part(
        heading,
        lines,
        len(lines),
        lambda shown: counted(lang, "quota.more", len(lines) - shown, n=len(lines) - shown),
    )


def _quota_line(lang: str, warning: QuotaWarning, people: _Names) -> str:
    return t(
        lang,
        "digest.quota_line",
        id=warning.quota_id,
        team=mrkdwn_escape(warning.team),
        gpu_type=mrkdwn_escape(warning.gpu_type) if warning.gpu_type else t(lang, "quota.any_type"),
        left=warning.left_hours,
        total=warning.total_hours,
        pct=warning.used_pct,
        expiry=_expiry(lang, warning),
        owner=people(warning.owner),
    )


def _expiry(lang: str, warning: QuotaWarning) -> str:
    return expiry_words(lang, warning.expires_on, warning.days_left)


def picture_words(digest: Digest, lang: str) -> tuple[str, str, str]:
    """The uploaded picture's title, the comment posted with it, and its alt text."""
    return (
        t(lang, "digest.picture_title", day=day(lang, digest.day)),
        t(lang, "digest.picture_comment"),
        t(
            lang,
            "digest.picture_alt",
            total=amount(lang, "count.gpus", digest.total_gpus),
            free=digest.free_gpus,
            at=_hhmm(digest.at, ZoneInfo(digest.timezone)),
        ),
    )


def _hhmm(moment: datetime, zone: ZoneInfo) -> str:
    return moment.astimezone(zone).strftime("%H:%M")
