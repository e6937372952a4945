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
from urllib.parse import quote

CONFIG = "config/policy.yml"
SNAPSHOTS = "snapshots/"
DECISIONS = "decisions/"
STAMP = "%Y%m%dT%H%M%S%fZ"


def _part(name: str) -> str:
    """A team's or template's name as one safe key segment (no '/' or '..' escapes)."""
    return quote(name, safe="-_.") if name not in (".", "..") else quote(name, safe="")


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
