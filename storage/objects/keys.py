"""Every object key paika writes, in one place (the layout is part of the take-over story:
a new install reads what an old one wrote).

    config/policy.yml                        versioned: each policy config version (YAML), with
                                             paika-version, -author, -at, -reason, -source meta
    templates/<team>/<name>.json             versioned: each template version
    specs/<job id>.json                      written once: a job's submitted spec
    snapshots/<YYYY-MM-DD>/<stamp>.json.gz   written once: the queue and cluster at <stamp>
    decisions/<YYYY-MM-DD>/<first>-<last>.jsonl  written once: decision log lines, by row id
    digests/<YYYY-MM-DD>.json | .png         written once: the day's digest data and picture
    audit/<YYYY-MM-DD>.jsonl                 written once: the day's audit events
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from hashlib import sha256
from urllib.parse import quote

CONFIG = "config/policy.yml"
SNAPSHOTS = "snapshots/"
DECISIONS = "decisions/"
STAMP = "%Y%m%dT%H%M%S%fZ"


# The longest a name's key segment may be: with ".json.versions" after it, it stays well under
# the 255 bytes a file name may have in the local store, and two segments stay far under S3's
# 1024-byte keys. A 64-character Chinese name percent-encodes to 576 characters.
SEGMENT_MAX = 160
_HASHED_HEAD = SEGMENT_MAX - 17  # room for "~" and 16 hex digits


def _part(name: str) -> str:
    """A team's or template's name as one safe ASCII key segment (no '/' or '..' escapes):
    percent-encoded UTF-8, so 语音组 is %E8%AF%AD%E9%9F%B3%E7%BB%84. A name whose encoding
    is longer than SEGMENT_MAX keeps its first characters whole and ends in "~" and 16 hex
    digits of its SHA-256, so two long names that start alike stay apart ("~" is in no name)."""
    if name in (".", ".."):
        return quote(name, safe="")
    whole = quote(name, safe="-_.")
    if len(whole) <= SEGMENT_MAX:
        return whole
    head = ""
    for char in name:
        piece = quote(char, safe="-_.")
        if len(head) + len(piece) > _HASHED_HEAD:
            break
        head += piece
    return f"{head}~{sha256(name.encode()).hexdigest()[:16]}"


def template(team: str, name: str) -> str:
    return f"templates/{_part(team)}/{_part(name)}.json"


def spec(job_id: int) -> str:
    return f"specs/{job_id:010d}.json"


def snapshot(at: datetime) -> str:
    at = at.astimezone(UTC)
    return f"{SNAPSHOTS}{at.date().isoformat()}/{at.strftime(STAMP)}.json.gz"


def snapshot_day(day: date) -> str:
    return f"{SNAPSHOTS}{day.isoformat()}/"


def snapshot_time(key: str) -> datetime:
    """When the snapshot under `key` was taken (its name says it)."""
    stamp = key.rsplit("/", 1)[-1].removesuffix(".json.gz")
    return datetime.strptime(stamp, STAMP).replace(tzinfo=UTC)


def decisions(day: date, first: int, last: int) -> str:
    return f"{DECISIONS}{day.isoformat()}/{first:012d}-{last:012d}.jsonl"


def decisions_day(day: date) -> str:
    return f"{DECISIONS}{day.isoformat()}/"


def digest(day: date, suffix: str) -> str:
    return f"digests/{day.isoformat()}.{suffix}"


def audit(day: date) -> str:
    return f"audit/{day.isoformat()}.jsonl"
