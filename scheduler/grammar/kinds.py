"""What a key's value is (its kind) and what a valid one looks like (its bounds), as data:
the grammar checks values against them, its errors name them, bot/ says them in words."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from enum import StrEnum


class ValueKind(StrEnum):
    """How a key's text is read."""

    INT = "int"
    ID = "id"  # a record number, also written #7
    FLOAT = "float"
    CHOICE = "choice"
    TEXT = "text"
    IMAGE = "image"  # a container image reference, checked as the host agent checks it
    URL = "url"
    NAME = "name"  # ASCII: a Unix account, a host, a GPU type, a metric
    LABEL = "label"  # a name people choose, in any script (scheduler.grammar.names)
    JOB_REF = "job_ref"
    JOB_IDS = "job_ids"  # job ids separated by commas: #12,#13
    USER = "user"
    CHANNEL = "channel"  # a Slack channel: its mention <#C…|name> or id, or #name
    GPU_TYPES = "gpu_types"
    GPU_TYPE_OR_ANY = "gpu_type_or_any"
    DATE = "date"
    TIME = "time"  # a moment: YYYY-MM-DDTHH:MM[:SS], in the policy's zone unless an offset is given
    DATA = "data"
    METRIC = "metric"
    DURATION = "duration"  # minutes (5), or with a unit: 90s, 5m, 1h
    LOCATION = "location"  # an absolute path or a URL
    WORDS = "words"  # the rest of the line as lowercase words (help topics)


@dataclass(frozen=True)
class Expected:
    """What a valid value for a key looks like, as data: its kind and only the bounds,
    choices or length that kind is checked against. bot/ says it in words, in errors and
    in help alike."""

    kind: ValueKind
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    above_minimum: bool = False  # the minimum itself is not allowed
    max_length: int | None = None
    units: tuple[str, ...] = ()  # unit words a number may end with (GB, GiB, G)
    earliest: date | None = None
    latest: date | None = None
