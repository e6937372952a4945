"""The digest as plain text, for the terminal (`paika digest --print`) and anyone without Slack.

Laid out for the terminal here, in the reader's language (the policy's
`slack.default_language`, or `--lang`); every sentence comes from the catalogue
(`digest.text.*`), and why a job waits is said by `wait_words`, as in Slack."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from bot.blocks.digest import ahead_lines, output_lines
from bot.board_words import none_next_up
from bot.i18n import amount, counted, duration, term, wait_words
from bot.i18n import t as say
from bot.said import LIST_SEPARATOR
from scheduler.door import Digest, JobLine, PriorityClass, QuotaWarning


def render_text(digest: Digest, zone: ZoneInfo, lang: str = "en") -> str:
    """Every part of the digest, in the order the Slack message shows them, in `lang`."""
    parts = [
        [say(lang, "digest.text.header", day=digest.day.isoformat(), at=_when(digest.at, zone))]
        + (
            [say(lang, "config.in_force", version=digest.config_version)]
            if digest.config_version is not None
            else []
        ),
        _cards(digest, lang),
        [_queue(digest, lang)],
        _ready(digest, lang),
        _waiting_data(digest, lang),
        _next_up(digest, zone, lang),
        _ahead(digest, zone, lang),
        _yesterday(digest, lang),
        _idle(digest, lang),
        _quotas(digest, lang),
    ]
    return "\n\n".join("\n".join(lines) for lines in parts if lines) + "\n"


def _when(moment: datetime | None, zone: ZoneInfo) -> str:
    return "-" if moment is None else moment.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")


def _cards(digest: Digest, lang: str) -> list[str]:
    if not digest.types:
        return [say(lang, "digest.text.no_gpus")]
    lines = [
        say(
            lang,
            "digest.text.gpus",
            total=digest.total_gpus,
            hosts=amount(lang, "count.hosts", digest.hosts),
            free=digest.free_gpus,
            busy=sum(t.busy for t in digest.types),
            idle=sum(t.idle_held for t in digest.types),
            down=sum(t.down for t in digest.types),
        )
    ]
    if digest.shared_gpus:
        lines[0] = say(lang, "digest.text.shared", line=lines[0], n=digest.shared_gpus)
    width = max(len(t.gpu_type) for t in digest.types)
    for t in digest.types:
        counts = say(
            lang, "digest.text.type_counts", free=t.free, busy=t.busy, idle=t.idle_held, down=t.down
        )
        if t.shared:
            counts = say(lang, "digest.text.shared", line=counts, n=t.shared)
        lines.append(f"  {t.gpu_type:<{width}} {t.total:>4}: {counts}")
    return lines


def _queue(digest: Digest, lang: str) -> str:
    waiting = LIST_SEPARATOR[lang].join(
        say(
            lang,
            "digest.text.class_count",
            n=digest.waiting_by_class.get(p.value, 0),
            priority=term(lang, "priority", p.value),
        )
        for p in PriorityClass
    )
    return say(
        lang,
        "digest.text.queue",
        running=digest.running,
        waiting=waiting,
        data=digest.waiting_for_data,
    )


def _job(line: JobLine, lang: str) -> str:
    return say(
        lang,
        "digest.text.job",
        id=line.job_id,
        name=line.name,
        team=line.team,
        priority=term(lang, "priority", line.priority),
        gpus=line.gpus,
        kind=f" {line.gpu_type}" if line.gpu_type else "",
        hours=line.est_gpu_hours,
    )


def _more(shown: int, total: int, lang: str) -> list[str]:
    return ["  " + say(lang, "digest.text.more", n=total - shown)] if total > shown else []


def _ready(digest: Digest, lang: str) -> list[str]:
    if not digest.ready_total:
        return [say(lang, "digest.text.ready_none")]
    lines = [say(lang, "digest.text.ready", n=digest.ready_total)]
    lines += [f"  {_job(line, lang)}" for line in digest.ready]
    return lines + _more(len(digest.ready), digest.ready_total, lang)


def _waiting_data(digest: Digest, lang: str) -> list[str]:
    if not digest.waiting_for_data:
        return [say(lang, "digest.text.data_none")]
    lines = [say(lang, "digest.text.data", n=digest.waiting_for_data)]
    for line in digest.waiting_data:
        where = (
            say(lang, "digest.text.data_at", location=line.data_location)
            if line.data_location
            else ""
        )
        if line.wait is not None and line.wait.upstream is not None:
            where += say(lang, "digest.text.data_from", upstream=line.wait.upstream)
        said = say(
            lang,
            "digest.text.data_line",
            id=line.job_id,
            name=line.name,
            team=line.team,
            owner=line.owner,
            waited=duration(
                lang, (digest.at - line.submitted_at).total_seconds(), to_the_minute=True
            ),
            where=where,
        )
        lines.append(f"  {said}")
    return lines + _more(len(digest.waiting_data), digest.waiting_for_data, lang)


def _next_up(digest: Digest, zone: ZoneInfo, lang: str) -> list[str]:
    if not digest.next_up:
        said = none_next_up(lang, digest.waiting, digest.waiting_for_data)
        # One sentence after the heading.
        return [say(lang, "digest.text.next_none", said=f"{said[:1].lower()}{said[1:]}")]
    lines = [say(lang, "digest.text.next_up")]
    waiting = [line for line in digest.next_up if line.wait is not None]
    for number, line in enumerate(waiting, 1):  # by when it should start, as on the board
        wait = line.wait
        assert wait is not None
        eta = say(lang, "digest.text.eta", at=_when(wait.eta, zone)) if wait.eta is not None else ""
        words = wait_words(lang, wait.to_wait(line.job_id), digest.at.timestamp())
        said = say(
            lang, "digest.text.next_line", n=number, id=line.job_id, name=line.name,
            words=words, eta=eta,
        )  # fmt: skip
        lines.append(f"  {said}")
    return lines


def _ahead(digest: Digest, zone: ZoneInfo, lang: str) -> list[str]:
    """Planned maintenance and booked cards not over yet, soonest first (nothing when none)."""
    lines = ahead_lines(digest, lang, lambda moment: _when(moment, zone))
    if not lines:
        return []
    return [say(lang, "digest.text.ahead"), *(f"  {line}" for line in lines)]


def _yesterday(digest: Digest, lang: str) -> list[str]:
    usage = digest.yesterday
    day = usage.day.isoformat()
    # What the spend produced: runs finished by outcome, each project's figures.
    outputs = [f"  {line}" for line in output_lines(lang, usage)]
    if not usage.rows:
        return [say(lang, "digest.text.yesterday_none", day=day), *outputs]
    lines = [
        say(
            lang,
            "digest.text.yesterday",
            day=day,
            hours=usage.total_gpu_hours,
            cost=usage.total_cost,
            jobs=amount(lang, "count.jobs", usage.job_count),
        ),
        *outputs,
    ]
    for row in usage.rows:
        said = say(
            lang, "digest.text.usage_row", team=row.team, gpu_type=row.gpu_type,
            hours=row.gpu_hours, cost=row.cost, jobs=amount(lang, "count.jobs", row.jobs),
        )  # fmt: skip
        lines.append(f"  {said}")
    return lines


def _idle(digest: Digest, lang: str) -> list[str]:
    idle = digest.idle
    if idle.gpu_hours <= 0:
        return [say(lang, "digest.text.idle_none", pct=idle.threshold_pct)]
    types = LIST_SEPARATOR[lang].join(f"{name} {hours:.1f}" for name, hours in idle.by_type.items())
    lines = [
        say(lang, "digest.text.idle", pct=idle.threshold_pct, hours=idle.gpu_hours, types=types)
    ]
    for job in idle.jobs:
        said = say(
            lang, "digest.text.idle_row", id=job.job_id, name=job.name, team=job.team,
            owner=job.owner, gpu_type=job.gpu_type, hours=job.gpu_hours,
        )  # fmt: skip
        lines.append(f"  {said}")
    return lines + _more(len(idle.jobs), idle.job_count, lang)


def quota_words(warning: QuotaWarning, lang: str = "en") -> str:
    """When the quota expires, in days."""
    if warning.days_left == 0:
        return say(lang, "digest.text.expires_today")
    if warning.days_left == 1:
        return say(lang, "digest.text.expires_tomorrow")
    return counted(lang, "digest.text.expires_in", warning.days_left, n=warning.days_left)


def _quotas(digest: Digest, lang: str) -> list[str]:
    if not digest.quota_warnings:
        return [say(lang, "digest.text.quotas_none")]
    lines = [say(lang, "digest.text.quotas")]
    for w in digest.quota_warnings:
        said = say(
            lang, "digest.text.quota_row", id=w.quota_id, team=w.team,
            gpu_type=w.gpu_type or say(lang, "digest.text.any_type"), left=w.left_hours,
            total=w.total_hours, pct=w.used_pct, expires=quota_words(w, lang),
            date=w.expires_on.isoformat(), owner=w.owner,
        )  # fmt: skip
        lines.append(f"  {said}")
    return lines
