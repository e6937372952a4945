"""The digest as plain text, for the terminal (`paika digest --print`) and anyone without Slack.

In English it is laid out for the terminal here; why a job waits is said by `wait_words`. In
another language (the policy's `slack.default_language`, or `--lang`) it is the channel
message's own sentences from the catalogue, as plain text: the same words the team reads in
Slack every morning."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bot.blocks.digest import digest_blocks, output_lines
from bot.board_words import none_next_up
from bot.i18n import amount, wait_words
from bot.i18n import t as say
from scheduler.digest.model import Digest, JobLine, QuotaWarning
from scheduler.service.records import PriorityClass


def render_text(digest: Digest, zone: ZoneInfo, lang: str = "en") -> str:
    """Every part of the digest, in the order the Slack message shows them, in `lang`."""
    if lang != "en":
        return _from_blocks(digest_blocks(digest, lang, zone).blocks)
    parts = [
        [f"paika daily GPU board — {digest.day.isoformat()} (as of {_when(digest.at, zone)})"]
        + (
            [say("en", "config.in_force", version=digest.config_version)]
            if digest.config_version is not None
            else []
        ),
        _cards(digest),
        [_queue(digest)],
        _ready(digest),
        _waiting_data(digest),
        _next_up(digest, zone),
        _yesterday(digest),
        _idle(digest),
        _quotas(digest),
    ]
    return "\n\n".join("\n".join(lines) for lines in parts if lines) + "\n"


def _when(moment: datetime | None, zone: ZoneInfo) -> str:
    return "-" if moment is None else moment.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")


def duration(span: timedelta) -> str:
    """A wait as people say it: "12 min", "3 h 20 min", "2 d 4 h"."""
    minutes = max(0, int(span.total_seconds() // 60))
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min"


def _cards(digest: Digest) -> list[str]:
    if not digest.types:
        return ["GPUs: none registered yet (an admin adds hosts with /gpu admin host add)."]
    busy = sum(t.busy for t in digest.types)
    idle = sum(t.idle_held for t in digest.types)
    down = sum(t.down for t in digest.types)
    lines = [
        f"GPUs: {digest.total_gpus} on {amount('en', 'count.hosts', digest.hosts)}"
        f" · {digest.free_gpus} free · "
        f"{busy} busy · {idle} idle but held · {down} unavailable"
    ]
    width = max(len(t.gpu_type) for t in digest.types)
    for t in digest.types:
        lines.append(
            f"  {t.gpu_type:<{width}} {t.total:>4}: {t.free} free · {t.busy} busy · "
            f"{t.idle_held} idle · {t.down} unavailable"
        )
    return lines


def _queue(digest: Digest) -> str:
    waiting = ", ".join(
        f"{digest.waiting_by_class.get(p.value, 0)} {p.value}" for p in PriorityClass
    )
    return (
        f"Queue: {digest.running} running · waiting: {waiting} · "
        f"{digest.waiting_for_data} waiting for data"
    )


def _job(line: JobLine) -> str:
    kind = f" {line.gpu_type}" if line.gpu_type else ""
    return (
        f"#{line.job_id} {line.name} · {line.team} · {line.priority} · "
        f"{line.gpus}×GPU{kind} · {line.est_gpu_hours:g} GPU-hours"
    )


def _more(shown: int, total: int) -> list[str]:
    return [f"  … and {total - shown} more"] if total > shown else []


def _ready(digest: Digest) -> list[str]:
    if not digest.ready_total:
        return ["Ready to run: none waiting with its data in place."]
    lines = [f"Ready to run ({digest.ready_total}), in queue order:"]
    lines += [f"  {_job(line)}" for line in digest.ready]
    return lines + _more(len(digest.ready), digest.ready_total)


def _waiting_data(digest: Digest) -> list[str]:
    if not digest.waiting_for_data:
        return ["Waiting for data: none."]
    lines = [f"Waiting for data ({digest.waiting_for_data}), longest first:"]
    for line in digest.waiting_data:
        where = f" · data at {line.data_location}" if line.data_location else ""
        lines.append(
            f"  #{line.job_id} {line.name} · {line.team} · owner {line.owner} · "
            f"waiting {duration(digest.at - line.submitted_at)}{where}"
        )
    return lines + _more(len(digest.waiting_data), digest.waiting_for_data)


def _next_up(digest: Digest, zone: ZoneInfo) -> list[str]:
    if not digest.next_up:
        said = none_next_up("en", digest.waiting, digest.waiting_for_data)
        return [f"Next up: {said[:1].lower()}{said[1:]}"]  # one sentence after the heading
    lines = ["Next up:"]
    waiting = [line for line in digest.next_up if line.wait is not None]
    for number, line in enumerate(waiting, 1):  # by when it should start, as on the board
        wait = line.wait
        assert wait is not None
        eta = f" · ETA {_when(wait.eta, zone)}" if wait.eta is not None else ""
        words = wait_words("en", wait.to_wait(line.job_id), digest.at.timestamp())
        lines.append(f"  {number}. #{line.job_id} {line.name} — {words}{eta}")
    return lines


def _yesterday(digest: Digest) -> list[str]:
    usage = digest.yesterday
    head = f"Yesterday ({usage.day.isoformat()}): "
    # What the spend produced: runs finished by outcome, each project's figures.
    outputs = [f"  {line}" for line in output_lines("en", usage)]
    if not usage.rows:
        return [head + "no GPU time was used.", *outputs]
    lines = [
        head + f"{usage.total_gpu_hours:.1f} GPU-hours, cost {usage.total_cost:.2f}, "
        f"{amount('en', 'count.jobs', usage.job_count)}",
        *outputs,
    ]
    for row in usage.rows:
        lines.append(
            f"  {row.team} · {row.gpu_type} · {row.gpu_hours:.1f} GPU-hours · "
            f"cost {row.cost:.2f} · {amount('en', 'count.jobs', row.jobs)}"
        )
    return lines


def _idle(digest: Digest) -> list[str]:
    idle = digest.idle
    head = f"Idle but held yesterday (below {idle.threshold_pct:g}% utilization): "
    if idle.gpu_hours <= 0:
        return [head + "none."]
    types = ", ".join(f"{name} {hours:.1f}" for name, hours in idle.by_type.items())
    lines = [head + f"{idle.gpu_hours:.1f} GPU-hours ({types})"]
    for job in idle.jobs:
        lines.append(
            f"  #{job.job_id} {job.name} · {job.team} · owner {job.owner} · "
            f"{job.gpu_type} · {job.gpu_hours:.1f} GPU-hours"
        )
    return lines + _more(len(idle.jobs), idle.job_count)


def quota_words(warning: QuotaWarning) -> str:
    """When the quota expires, in days."""
    if warning.days_left == 0:
        return "expires today"
    if warning.days_left == 1:
        return "expires tomorrow"
    return f"expires in {warning.days_left} days"


def _quotas(digest: Digest) -> list[str]:
    if not digest.quota_warnings:
        return ["Quota warnings: none."]
    lines = ["Quota warnings:"]
    for w in digest.quota_warnings:
        lines.append(
            f"  #{w.quota_id} {w.team} · {w.gpu_type or 'any type'} · "
            f"{w.left_hours:.1f} of {w.total_hours:g} GPU-hours left ({w.used_pct:.0f}% used) · "
            f"{quota_words(w)} ({w.expires_on.isoformat()}) · owner {w.owner}"
        )
    return lines


# Slack's bold (*…*) and code (`…`) marks around a run of text; escaped &, < and > come back.
_MARKED = re.compile(r"\*([^*\n]+)\*|`([^`\n]+)`")


def _plain(text: str) -> str:
    # "*队列：* 运行中" is bold then a space in Slack; in a terminal the space after a
    # full-width colon is one too many.
    unmarked = html.unescape(_MARKED.sub(lambda m: m[1] or m[2], text))
    return re.sub("： +", "：", unmarked)


def _from_blocks(blocks: Sequence[Mapping[str, Any]]) -> str:
    """The channel message's blocks as terminal text: a blank line for each divider."""
    parts: list[list[str]] = [[]]
    for block in blocks:
        kind = block.get("type")
        if kind == "divider":
            parts.append([])
        elif kind == "context":
            parts[-1].append(" · ".join(_plain(e["text"]) for e in block["elements"]))
        elif "text" in block:
            parts[-1].append(_plain(block["text"]["text"]))
        for item in block.get("fields", ()):
            parts[-1].append(_plain(item["text"]))
    return "\n\n".join("\n".join(lines) for lines in parts if lines) + "\n"
