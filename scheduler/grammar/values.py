"""Value kinds of /gpu keys, the typed values they produce, and their converters."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Protocol

from scheduler.agent.protocol import IMAGE_RE
from scheduler.grammar import names
from scheduler.grammar.errors import Mistake, ParseError
from scheduler.grammar.kinds import Expected as Expected
from scheduler.grammar.kinds import ValueKind as ValueKind
from scheduler.grammar.storable import check_storable
from scheduler.grammar.tokens import quote_value
from storage.limits import EARLIEST_DATE, LATEST_DATE, ROW_ID_MAX


@dataclass(frozen=True)
class JobRef:
    """A job named by id (42, #42), one job of an array (#40.3: the array's number, then its
    place in it), or by name."""

    id: int | None = None
    name: str | None = None
    member: int | None = None


@dataclass(frozen=True)
class DataSpec:
    """Whether a job's data is on the GPU hosts yet, and where it is being copied to."""

    ready: bool
    location: str | None = None
    # `data=after:#12`: the data is ready when job #12 succeeds (it produces it).
    after: int | None = None


@dataclass(frozen=True)
class FreeValue:
    """The text given for a free key (`/gpu config set scheduler.cycle_seconds=5`), read by
    the service that knows what the key means; `quoted` text is meant as text."""

    text: str
    quoted: bool


@dataclass(frozen=True)
class Duration:
    """A length of time typed as minutes (5) or with a unit (90s, 5m, 1h); written back in
    seconds with its unit ("300s"), so a stored one reads the same again."""

    seconds: float

    def __str__(self) -> str:
        return f"{self.seconds:g}s"


@dataclass(frozen=True)
class Metric:
    """One result a finished run reports, such as loss:0.31."""

    name: str
    value: float


class KeyRules(Protocol):
    """The parts of a key definition that conversion needs (spec.Key provides them)."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> ValueKind: ...
    @property
    def example(self) -> str: ...
    @property
    def choices(self) -> tuple[str, ...]: ...
    @property
    def minimum(self) -> float | None: ...
    @property
    def maximum(self) -> float | None: ...
    @property
    def above_minimum(self) -> bool: ...
    @property
    def max_length(self) -> int: ...
    @property
    def units(self) -> tuple[str, ...]: ...


class _Invalid(Exception):
    """Raised by a converter: the value is not of the key's form (or, with `length`, too long;
    with `largest`, a record number past the largest the column holds; with `char`, a name
    holding a character no name may hold)."""

    def __init__(
        self,
        *,
        length: int | None = None,
        largest: int | None = None,
        char: names.BadChar | None = None,
    ) -> None:
        super().__init__(length, largest, char)
        self.length = length
        self.largest = largest
        self.char = char


# Kinds whose values are text checked against the key's max_length.
_LENGTH_KINDS = frozenset(
    {
        ValueKind.TEXT,
        ValueKind.IMAGE,
        ValueKind.NAME,
        ValueKind.LABEL,
        ValueKind.URL,
        ValueKind.DATA,
        ValueKind.CHANNEL,
        ValueKind.LOCATION,
    }
)


# Names and GPU types; how long one may be is the key's max_length (its column's length).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_METRIC_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/@-]{0,63}")
_WHOLE = re.compile(r"[0-9]{1,15}")  # bounded: int() refuses very long digit strings
_ID = re.compile(r"#?([0-9]{1,15})")
_MEMBER = re.compile(r"#?([0-9]{1,15})\.([0-9]{1,4})")  # #40.3: an array's third job
# data=after:#12: another job's success is the data's readiness.
DATA_AFTER = "after:"
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2})?(?:Z|[+-][0-9]{2}:[0-9]{2})?",
    re.IGNORECASE,
)
_DURATION = re.compile(r"([0-9]{1,7}(?:\.[0-9]{1,6})?)\s*(s|m|h|min)?", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "min": 60, "h": 3600}
_URL = re.compile(r"https?://[^\s/?#]+\S*", re.IGNORECASE)
_USER_FORMS = (
    re.compile(r"<@([UW][A-Z0-9]{2,})(?:\|[^>]*)?>"),
    re.compile(r"@?([UW][A-Z0-9]{2,})"),
)
# A channel picked from Slack's autocomplete arrives escaped as <#C0123ABCD|name>: kept as its
# id, so renaming the channel later does not break posting to it. A typed #name is kept as
# a name (the bot looks its id up), and so is a bare id.
_CHANNEL_MENTION = re.compile(r"<#([CG][A-Z0-9]{2,})(?:\|[^>]*)?>")
_CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{8,}")
_CHANNEL_NAME = re.compile(r"#?([a-z0-9][a-z0-9_-]*)")
_GOT_LIMIT = 40


def example_arg(key: KeyRules) -> str:
    """The key's example as the user would type it, e.g. gpus=2."""
    return f"{key.name}={quote_value(key.example)}"


def convert(key: KeyRules, raw: str, example: str | None = None) -> object:
    """Turn the text typed for `key` into its typed value, or raise ParseError."""
    shown = example if example is not None else example_arg(key)
    # Values from the submit modal reach here without tokenize, which checks whole commands.
    check_storable(raw, key.name, shown)
    if not raw.strip():
        raise ParseError(Mistake.EMPTY_VALUE, key=key.name, example=shown)
    try:
        return _CONVERTERS[key.kind](key, raw)
    except _Invalid as invalid:
        rule = expected(key)
        if invalid.length is not None:
            raise ParseError(
                Mistake.VALUE_TOO_LONG,
                key=key.name,
                example=shown,
                expected=rule,
                length=invalid.length,
            ) from None
        if invalid.char is not None:
            raise ParseError(
                Mistake.NAME_CHAR,
                key=key.name,
                example=shown,
                expected=rule,
                char=invalid.char.why.value,
                code=invalid.char.code,
                at=invalid.char.at,
            ) from None
        if invalid.largest is not None:
            raise ParseError(
                Mistake.ID_TOO_LARGE,
                key=key.name,
                example=shown,
                expected=rule,
                got=shorten(raw),
                largest=invalid.largest,
            ) from None
        raise ParseError(
            Mistake.BAD_VALUE, key=key.name, example=shown, expected=rule, got=shorten(raw)
        ) from None


def expected(key: KeyRules) -> Expected:
    """What a valid value for `key` looks like; shared by errors and help."""
    kind = key.kind
    if kind in (ValueKind.INT, ValueKind.FLOAT, ValueKind.DURATION):
        return Expected(
            kind,
            minimum=key.minimum,
            maximum=key.maximum,
            above_minimum=key.above_minimum,
            units=key.units,
        )
    if kind is ValueKind.CHOICE:
        return Expected(kind, choices=key.choices)
    if kind in (ValueKind.DATE, ValueKind.TIME):
        return Expected(kind, earliest=EARLIEST_DATE, latest=LATEST_DATE)
    if kind in _LENGTH_KINDS:
        return Expected(kind, max_length=key.max_length)
    if kind is ValueKind.JOB_IDS:
        return Expected(kind, maximum=key.maximum)
    return Expected(kind)


def shorten(raw: str) -> str:
    """What the user typed, shortened so one bad paste does not flood the reply."""
    return raw if len(raw) <= _GOT_LIMIT else raw[:_GOT_LIMIT] + "…"


def _check_range(key: KeyRules, value: float) -> None:
    low, high = key.minimum, key.maximum
    if low is not None and (value <= low if key.above_minimum else value < low):
        raise _Invalid
    if high is not None and value > high:
        raise _Invalid


def _finite_number(raw: str) -> float:
    if not _NUMBER.fullmatch(raw):
        raise _Invalid
    value = float(raw)
    if not math.isfinite(value):  # 1e999 overflows to inf
        raise _Invalid
    return value


def _to_int(key: KeyRules, raw: str) -> int:
    if not _WHOLE.fullmatch(raw):
        raise _Invalid
    value = int(raw)
    _check_range(key, value)
    return value


def _to_id(key: KeyRules, raw: str) -> int:
    match = _ID.fullmatch(raw)
    if not match or int(match[1]) < 1:
        raise _Invalid
    return _row_id(raw, int(match[1]))


def _row_id(raw: str, number: int) -> int:
    # A number the id column cannot hold is an "integer out of range" error on PostgreSQL.
    if number > ROW_ID_MAX:
        raise _Invalid(largest=ROW_ID_MAX)
    return number


def _to_float(key: KeyRules, raw: str) -> float:
    value = _finite_number(_without_unit(key, raw))
    _check_range(key, value)
    return value


def _without_unit(key: KeyRules, raw: str) -> str:
    """The number of "20GB" when the key takes that unit: every unit it takes means the
    key's own (GB, GiB and G are all GiB, as the catalog counts a card)."""
    lowered = raw.lower()
    for unit in sorted(key.units, key=len, reverse=True):  # GiB before G
        if lowered.endswith(unit.lower()) and len(raw) > len(unit):
            return raw[: -len(unit)].rstrip()
    return raw


def _to_choice(key: KeyRules, raw: str) -> str:
    lowered = raw.lower()
    if lowered not in key.choices:
        raise _Invalid
    return lowered


def _check_length(key: KeyRules, raw: str) -> None:
    # Saying how long it was tells the user what to fix; quoting a long paste would not.
    if len(raw) > key.max_length:
        raise _Invalid(length=len(raw))


def _to_text(key: KeyRules, raw: str) -> str:
    _check_length(key, raw)
    return raw


def _to_url(key: KeyRules, raw: str) -> str:
    _check_length(key, raw)
    if not _URL.fullmatch(raw):
        raise _Invalid
    return raw


def _to_image(key: KeyRules, raw: str) -> str:
    _check_length(key, raw)
    # The agent's own rule: an image it would refuse must not wait in the queue until then.
    if not IMAGE_RE.fullmatch(raw):
        raise _Invalid
    return raw


def _is_name(key: KeyRules, raw: str) -> bool:
    return len(raw) <= key.max_length and _NAME.fullmatch(raw) is not None


def _to_name(key: KeyRules, raw: str) -> str:
    if not _is_name(key, raw):
        raise _Invalid
    return raw


def _to_label(key: KeyRules, raw: str) -> str:
    """A name in any script, NFC-normalised; a character no name may hold is named."""
    if (bad := names.bad_char(raw)) is not None:
        raise _Invalid(char=bad)
    name = names.normal(raw)
    if len(name) > key.max_length:
        raise _Invalid(length=len(name))
    return name


def _to_job_ref(key: KeyRules, raw: str) -> JobRef:
    if match := _ID.fullmatch(raw):
        if int(match[1]) < 1:
            raise _Invalid
        return JobRef(id=_row_id(raw, int(match[1])))
    if match := _MEMBER.fullmatch(raw):
        if int(match[1]) < 1 or int(match[2]) < 1:
            raise _Invalid
        return JobRef(id=_row_id(raw, int(match[1])), member=int(match[2]))
    # A job's name is a label: its own rules, and the character at fault named.
    return JobRef(name=_to_label(key, raw))


def _to_job_ids(key: KeyRules, raw: str) -> tuple[int, ...]:
    ids: list[int] = []
    for part in raw.split(","):
        match = _ID.fullmatch(part.strip())
        if match is None or int(match[1]) < 1:
            raise _Invalid
        number = _row_id(raw, int(match[1]))
        if number not in ids:
            ids.append(number)
    if key.maximum is not None and len(ids) > key.maximum:
        raise _Invalid
    return tuple(ids)


def _to_user(key: KeyRules, raw: str) -> str:
    for form in _USER_FORMS:
        if (match := form.fullmatch(raw)) and len(match[1]) <= key.max_length:
            return match[1]
    raise _Invalid


def _to_channel(key: KeyRules, raw: str) -> str:
    if mention := _CHANNEL_MENTION.fullmatch(raw):
        channel = mention[1]
    elif _CHANNEL_ID.fullmatch(raw):
        channel = raw
    elif name := _CHANNEL_NAME.fullmatch(raw):
        channel = "#" + name[1]
    else:
        raise _Invalid
    if len(channel) > key.max_length:
        raise _Invalid(length=len(channel))
    return channel


def _to_gpu_types(key: KeyRules, raw: str) -> tuple[str, ...]:
    # "any" would otherwise be read as a GPU type called "any" that no host has.
    if raw.lower() == "any":
        raise _Invalid
    names = raw.split(",")
    if not all(_is_name(key, name) for name in names):  # max_length bounds each name
        raise _Invalid
    return tuple(dict.fromkeys(names))


def _to_gpu_type_or_any(key: KeyRules, raw: str) -> str | None:
    if raw.lower() == "any":
        return None
    if not _is_name(key, raw):
        raise _Invalid
    return raw


def _to_date(key: KeyRules, raw: str) -> date:
    if not _DATE.fullmatch(raw):
        raise _Invalid
    try:
        day = date.fromisoformat(raw)
    except ValueError:  # a well-formed but impossible date such as 2025-02-30
        raise _Invalid from None
    # Beyond the window, date arithmetic (reminders, time zones) overflows later.
    if not EARLIEST_DATE <= day <= LATEST_DATE:
        raise _Invalid
    return day


def _to_time(key: KeyRules, raw: str) -> datetime:
    """A moment; without an offset it is naive, and the service reads it in the policy's
    zone (the grammar knows no zone)."""
    if not _TIME.fullmatch(raw):
        raise _Invalid
    try:
        moment = datetime.fromisoformat(raw.upper().replace("Z", "+00:00"))
    except ValueError:  # well-formed but impossible: 2026-02-30T10:00, 25:00
        raise _Invalid from None
    if not EARLIEST_DATE <= moment.date() <= LATEST_DATE:
        raise _Invalid
    return moment


def _to_data(key: KeyRules, raw: str) -> DataSpec:
    lowered = raw.lower()
    if lowered == "ready":
        return DataSpec(ready=True)
    if lowered == "pending":
        return DataSpec(ready=False)
    if lowered.startswith(DATA_AFTER):
        # Another job's success makes the data ready: after:#12 (never a location, though
        # it holds a colon).
        match = _ID.fullmatch(raw[len(DATA_AFTER) :].strip())
        if match is None or int(match[1]) < 1:
            raise _Invalid
        return DataSpec(ready=False, after=_row_id(raw, int(match[1])))
    # A location must look like a path or URL, so a typo such as "reddy" is an error
    # instead of a job that waits forever for data that is already there.
    _check_length(key, raw)
    if not ("/" in raw or ":" in raw):
        raise _Invalid
    return DataSpec(ready=False, location=raw)


def _to_metric(key: KeyRules, raw: str) -> Metric:
    name, colon, number = raw.rpartition(":")
    if not colon or not _METRIC_NAME.fullmatch(name):
        raise _Invalid
    return Metric(name=name, value=_finite_number(number))


def _to_duration(key: KeyRules, raw: str) -> Duration:
    """Minutes, or a number with s, m (min) or h; the key's bounds are in seconds."""
    match = _DURATION.fullmatch(raw.strip())
    if not match:
        raise _Invalid
    seconds = float(match[1]) * _UNIT_SECONDS[(match[2] or "m").lower()]
    _check_range(key, seconds)
    return Duration(seconds)


def _to_location(key: KeyRules, raw: str) -> str:
    """An absolute path (/mnt/nas/ckpt) or a URL (s3://bucket/run): where something is kept."""
    _check_length(key, raw)
    if raw != raw.strip() or any(c.isspace() for c in raw):
        raise _Invalid
    if not (raw.startswith("/") or re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*://\S+", raw)):
        raise _Invalid
    return raw


def _to_words(key: KeyRules, raw: str) -> tuple[str, ...]:
    return tuple(word.lower() for word in raw.split())


_CONVERTERS: dict[ValueKind, Callable[[KeyRules, str], object]] = {
    ValueKind.INT: _to_int,
    ValueKind.ID: _to_id,
    ValueKind.FLOAT: _to_float,
    ValueKind.CHOICE: _to_choice,
    ValueKind.TEXT: _to_text,
    ValueKind.IMAGE: _to_image,
    ValueKind.URL: _to_url,
    ValueKind.NAME: _to_name,
    ValueKind.LABEL: _to_label,
    ValueKind.JOB_REF: _to_job_ref,
    ValueKind.JOB_IDS: _to_job_ids,
    ValueKind.USER: _to_user,
    ValueKind.CHANNEL: _to_channel,
    ValueKind.GPU_TYPES: _to_gpu_types,
    ValueKind.GPU_TYPE_OR_ANY: _to_gpu_type_or_any,
    ValueKind.DATE: _to_date,
    ValueKind.TIME: _to_time,
    ValueKind.DATA: _to_data,
    ValueKind.METRIC: _to_metric,
    ValueKind.DURATION: _to_duration,
    ValueKind.LOCATION: _to_location,
    ValueKind.WORDS: _to_words,
}
