"""The bot's words in English and Simplified Chinese, read from `messages.yml`.

Every string a user sees comes from the catalogue through `t()`. The scheduler hands over
codes and the values they name (a wait, a problem); `wait_words()` says why a job waits.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from datetime import UTC, date, datetime
from functools import cache
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

import yaml

from scheduler.door import Wait, WaitCode

Lang = Literal["en", "zh"]
LANGUAGES: tuple[Lang, ...] = ("en", "zh")
DEFAULT: Lang = "en"

CATALOGUE_PATH = Path(__file__).with_name("messages.yml")
# libyaml's parser when PyYAML has it: the catalogue is read at every command's start, and
# the pure-Python parser takes a quarter of a second over it (libyaml: 25 ms).
SAFE_LOADER: type[yaml.SafeLoader | yaml.CSafeLoader] = getattr(
    yaml, "CSafeLoader", yaml.SafeLoader
)


def language(code: str | None, default: Lang = DEFAULT) -> Lang:
    """A supported language from a code such as "zh", "zh-CN" or "en_US"; else `default`."""
    if code:
        base = code.replace("_", "-").split("-")[0].lower()
        for lang in LANGUAGES:
            if base == lang:
                return lang
    return default


@cache
def catalogue() -> Mapping[str, Mapping[Lang, str]]:
    """Every message, by key and language (read once)."""
    raw = yaml.load(CATALOGUE_PATH.read_text(encoding="utf-8"), Loader=SAFE_LOADER)
    if not isinstance(raw, dict):
        raise ValueError(f"{CATALOGUE_PATH.name} must map message keys to translations")
    messages: dict[str, Mapping[Lang, str]] = {}
    for key, entry in raw.items():
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(lang), str) for lang in LANGUAGES
        ):
            raise ValueError(f"{CATALOGUE_PATH.name}: {key} needs en and zh strings")
        messages[str(key)] = {lang: entry[lang] for lang in LANGUAGES}
    return messages


def t(lang: str, key: str, **params: object) -> str:
    """The message `key` in `lang` (English when `lang` is not supported), filled in.

    An unknown key raises KeyError: it is a bug in the caller, not something to hide.
    """
    return catalogue()[key][language(lang)].format(**params)


def counted(lang: str, key: str, count: float, **params: object) -> str:
    """The message `key`, or its singular `key.one` when `count` is 1: English says "1 job"
    and "2 jobs" (and "0 jobs"). Chinese has one form, so its `.one` is the same sentence.
    `count` only picks the form; the message takes its values from `params`."""
    one = f"{key}.one"
    return t(lang, one if count == 1 and has(one) else key, **params)


def amount(lang: str, noun: str, n: int) -> str:
    """A number of things, for a sentence that counts several: `amount(lang, "count.jobs", 1)`
    is "1 job"."""
    return counted(lang, noun, n, n=n)


def has(key: str) -> bool:
    """Whether the catalogue holds `key`."""
    return key in catalogue()


def term(lang: str, group: str, value: str) -> str:
    """The name of a stored value (a job state, a priority class …) in `lang`.

    Values come from the database; one the catalogue does not know yet is shown as stored
    rather than failing the whole reply.
    """
    key = f"{group}.{value}"
    return t(lang, key) if has(key) else value


def placeholders(template: str) -> frozenset[str]:
    """The names a message template fills in."""
    return frozenset(
        name.split(".")[0].split("[")[0]
        for _, name, _, _ in string.Formatter().parse(template)
        if name
    )


def when(lang: str, moment: datetime | None, zone: ZoneInfo) -> str:
    """A moment in the install's time zone, to the minute."""
    if moment is None:
        return t(lang, "time.unknown")
    if moment.tzinfo is None:  # SQLite hands back naive datetimes; paika stores UTC
        moment = moment.replace(tzinfo=UTC)
    return t(lang, "time.moment", moment=moment.astimezone(zone))


def day(lang: str, value: date) -> str:
    """A calendar date."""
    return t(lang, "time.day", day=value)


def duration(lang: str, seconds: float, *, to_the_minute: bool = False) -> str:
    """A length of time in `lang`: the bot's one way of saying how long.

    Roughly by default, for what is estimated or counted in hours: "25 min" (at least 1)
    below 90 minutes, "3.5 h" below 48 hours, "3 days" beyond. `to_the_minute` for what has
    been counted exactly, such as a wait so far: "45 min", "3 h 20 min", "2 d 4 h".

    Babel's `format_timedelta` says one unit only, rounded ("2 hours" for an hour and a half,
    "1 day" for thirty hours): too coarse for a queue's estimates (bench/duration_words.py).
    """
    if to_the_minute:
        minutes = max(0, int(seconds // 60))
        days, rest = divmod(minutes, 24 * 60)
        hours, minutes = divmod(rest, 60)
        if days:
            return t(lang, "time.span.days", d=days, h=hours)
        if hours:
            return t(lang, "time.span.hours", h=hours, m=minutes)
        return t(lang, "time.minutes", n=minutes)
    rough = max(1, round(seconds / 60))
    if rough < 90:
        return t(lang, "time.minutes", n=rough)
    in_hours = seconds / 3600
    if in_hours < 48:
        return t(lang, "time.hours", n=in_hours)
    return t(lang, "time.days", n=round(in_hours / 24))


def in_about(lang: str, seconds: float) -> str:
    """How far away a moment is, roughly: "in about 5 min", "约 3.5 小时后"."""
    if seconds < 60:
        return t(lang, "time.any_moment")
    return t(lang, "time.in_about", span=duration(lang, seconds))


def eta(lang: str, moment: float | None, zone: ZoneInfo, now: float) -> str:
    """An estimated start (POSIX seconds) as a time and how far away it is."""
    if moment is None:
        return t(lang, "eta.unknown")
    if moment <= now:
        return t(lang, "eta.now")
    at = when(lang, datetime.fromtimestamp(moment, UTC), zone)
    return t(lang, "eta.at", at=at, rel=in_about(lang, moment - now))


def wait_words(lang: str, wait: Wait, now: float) -> str:
    """Why a job waits, in `lang`, from the policy's code and the numbers beside it."""
    code = wait.code
    gpu_type = wait.gpu_type or t(lang, "wait.any_type")
    if code is WaitCode.BEHIND_HIGHER_PRIORITY:
        key = (
            "wait.behind_higher_priority.one" if wait.higher == 1 else "wait.behind_higher_priority"
        )
        return t(lang, key, n=wait.higher, gpu_type=gpu_type)
    if code is WaitCode.BEHIND_EARLIER:
        key = "wait.behind_earlier.one" if wait.earlier == 1 else "wait.behind_earlier"
        return t(lang, key, n=wait.earlier, gpu_type=gpu_type)
    if code is WaitCode.NO_TYPE_FREE:
        if wait.eta is None:
            return t(lang, "wait.no_type_free_unknown", gpu_type=gpu_type)
        if wait.eta > now:
            return t(
                lang, "wait.no_type_free", gpu_type=gpu_type, span=duration(lang, wait.eta - now)
            )
        return t(lang, "wait.next_for_type", gpu_type=gpu_type)
    if code is WaitCode.WAITING_FOR_CHEAPER_TYPE:
        if wait.free_at is None:
            return t(
                lang,
                "wait.waiting_for_cheaper_type_unknown",
                gpu_type=gpu_type,
                costlier=wait.costlier,
            )
        return t(
            lang,
            "wait.waiting_for_cheaper_type",
            gpu_type=gpu_type,
            costlier=wait.costlier,
            span=duration(lang, max(0.0, wait.free_at - now)),
        )
    if code is WaitCode.NEVER_FITS:
        key = "wait.never_fits.headroom" if wait.keeps_headroom else "wait.never_fits"
        return counted(lang, key, wait.gpus, gpus=wait.gpus)
    if code is WaitCode.WAITING_FOR_HOSTS:
        if not wait.hosts:
            return t(lang, "wait.waiting_for_hosts.unknown")
        named = [_host_words(lang, host, why) for host, why in wait.hosts]
        return t(lang, "wait.waiting_for_hosts", hosts=_HOST_SEPARATOR[language(lang)].join(named))
    if code is WaitCode.QUOTA_EXHAUSTED:
        return t(lang, "wait.quota_exhausted", left=wait.left_hours, needs=wait.needs_hours)
    if code is WaitCode.BOOKED_FOR_TEAM:
        span = duration(lang, max(0.0, (wait.free_at or now) - now))
        return t(lang, "wait.booked_for_team", gpu_type=gpu_type, team=wait.team, span=span)
    if code is WaitCode.ARRAY_THROTTLED:
        return t(lang, "wait.array_throttled", array=wait.array or "?")
    if code is WaitCode.WAITING_FOR_JOB or code is WaitCode.UPSTREAM_FAILED:
        return t(lang, f"wait.{code.value}", upstream=wait.upstream or "?")
    if code is WaitCode.REFUSED_BY_HOST:
        refusal = refusal_words(lang, wait.refusal, wait.refused_by, {})
        return t(lang, "wait.refused_by_host", host=wait.refused_by, refusal=refusal)
    return t(lang, f"wait.{code.value}", gpu_type=gpu_type)


_HOST_SEPARATOR = {"en": ", ", "zh": "、"}


def _host_words(lang: str, host: str, why: str) -> str:
    """A host a job waits for, with why it takes no jobs now."""
    key = f"wait.host.{why}"
    return t(lang, key if has(key) else "wait.host.down", host=host)


def refusal_words(lang: str, code: object, host: object, values: Mapping[str, Any]) -> str:
    """Why a host refuses a job's start for good, and what to do about it (a refusal code;
    one without words of its own is said in the agent's words, `values["problem"]`)."""
    key = f"notice.event.refusal.{code}"
    if not has(key):
        key = "notice.event.refusal.other"
    return t(lang, key, host=host or "?", problem=values.get("problem") or "?")
