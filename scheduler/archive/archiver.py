"""The archiver: hands the team's memory to the object store, off the scheduling path.

After each cycle the leader reads what is new in SQL and adds it to the spool, a bounded
queue on local disk (storage/objects/spool.py) that the shipper sends to the store in order
(storage/objects/shipper.py). Nothing here waits for the store: when it is down, the spool
fills and the cycle goes on. What it hands over:

    config versions      every new row of config_versions   → config/policy.yml (a version each)
    template versions    every new row of template_versions → templates/<team>/<name>.json
    job specs            every new job                      → specs/<job id>.json
    the decision log     new decision rows, about a minute's → decisions/<day>/<first>-<last>.jsonl
    snapshots            the queue and cluster, when changed → snapshots/<day>/<stamp>.json.gz
    the audit trail      yesterday's events, once a day      → audit/<day>.jsonl
    the digest           its data and its picture            → digests/<day>.json, .png

Commands (a job's, in its spec; a template's `cmd`) are kept as the policy's
`archive.commands` says: masked (the default: what looks like a secret replaced by ***),
full, or none (masking.py); the queue's snapshots keep them the same way (state.py).

Each stream's mark (archive_marks) moves only after its objects are in the spool, and every
object's key and idempotency token are fixed by its content's identity, so a crash between
the two hands an object over twice and the store keeps it once.

When the shipper cannot reach the store for longer than the alert threshold, the channel
hears it once (a `store_down` notice), and once more when the store answers again.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, TypeVar

from sqlalchemy import Engine

from scheduler.archive import state
from scheduler.archive.masking import kept_command, kept_fields
from scheduler.config import PolicyConfig
from scheduler.notices.kinds import NoticeKind
from scheduler.notices.outbox import Announcement, claim
from scheduler.policy.plan import Wait
from storage.db import consistent_reads, session_scope
from storage.objects import keys
from storage.objects.shipper import Shipper
from storage.objects.spool import Kind, Spool
from storage.queries import archive as queries

log = logging.getLogger(__name__)
T = TypeVar("T")

BATCH = 500  # rows of one stream handed over per pass; the rest follow next pass
# Row ids are handed out when a row is written, not when it is committed: a transaction that
# started first may commit after a later one (two submits at once). A gap in the ids is
# waited for this long before it is taken for a rolled-back row and passed over.
GAP_SETTLES = timedelta(seconds=60)
# How much of a config version's reason its object's meta carries (S3 allows 2 KB of meta).
REASON_BYTES = 300


@dataclass(frozen=True)
class ArchivePace:
    """How often each kind of object is written."""

    # A snapshot is considered after a cycle that changed something, at most this often …
    snapshot_min_seconds: float = 60.0
    # … and at least this often whatever happened (commands change state between cycles);
    # it is written only when its content differs from the last one written.
    snapshot_every_seconds: float = 300.0
    # Decision lines are gathered this long into one object, so objects per day follow the
    # changes, not the cycles.
    decisions_every_seconds: float = 60.0
    # The channel hears of a store that has not answered for this long.
    down_alert_seconds: float = 600.0


@dataclass
class ArchiveResult:
    """What one pass handed to the spool (for logs and tests)."""

    objects: int = 0
    snapshot: str | None = None  # the snapshot's key, when one was written


# The digest's picture, drawn by the face that knows pictures (bot/digest/picture.py).
Picture = Callable[[Mapping[str, Any]], bytes]


class Archiver:
    """Run by the leader after each cycle (`after_cycle`) and with the daily work (`daily`)."""

    def __init__(
        self,
        engine: Engine,
        spool: Spool,
        shipper: Shipper,
        *,
        pace: ArchivePace | None = None,
        picture: Picture | None = None,
    ) -> None:
        self.engine, self.spool, self.shipper = engine, spool, shipper
        self.pace = pace or ArchivePace()
        self.picture = picture
        self._last_built: datetime | None = None
        self._dirty = True
        self._last_decisions: datetime | None = None
        self._down_told: datetime | None = None  # the outage the channel was told of

    @property
    def where(self) -> str:
        return self.shipper.store.where

    def close(self) -> None:
        """Stop the shipper after one last try at sending what waits (the rest stays in the
        spool for the next start), and let the spool folder go."""
        self.shipper.stop()
        try:
            self.shipper.flush()
        except Exception:
            log.exception("the last flush of the object spool failed; it is sent next start")
        self.spool.close()

    # ------------------------------------------------------------------ the passes

    def after_cycle(
        self,
        now: datetime,
        policy: PolicyConfig,
        *,
        waits: Mapping[int, Wait] | None,
        changed: bool,
        config_version: int | None = None,
    ) -> ArchiveResult:
        """Hand over what is new since the last pass; each stream on its own, so one
        failing (a bad row, a full disk) does not keep the others back."""
        result = ArchiveResult()
        self._dirty = self._dirty or changed
        steps: tuple[tuple[str, Callable[[], int]], ...] = (
            ("config versions", lambda: self._config_versions(now)),
            ("template versions", lambda: self._template_versions(now, policy)),
            ("job specs", lambda: self._specs(now, policy)),
            ("decisions", lambda: self._decisions(now)),
        )
        for name, step in steps:
            try:
                result.objects += step()
            except Exception:
                log.exception("archiving %s failed; it is tried again next cycle", name)
        try:
            result.snapshot = self._snapshot(now, policy, waits, config_version)
            result.objects += result.snapshot is not None
        except Exception:
            log.exception("archiving a snapshot failed; it is tried again next cycle")
        try:
            self._tell_outage(now)
        except Exception:
            log.exception("telling the channel about the object store failed")
        if result.objects:
            self.shipper.wake()
        return result

    def daily(self, now: datetime, policy: PolicyConfig) -> int:
        """Yesterday's audit events, once (the day in the policy's time zone)."""
        yesterday = now.astimezone(policy.zone).date() - timedelta(days=1)
        with session_scope(self.engine) as session:
            if queries.mark(session=session, stream="audit").position >= yesterday.toordinal():
                return 0
            start = _start_of(yesterday, policy)
            events = queries.audit_between(
                session=session, start=start, end=_start_of(yesterday + timedelta(days=1), policy)
            )
            lines = [
                {
                    "id": event.id,
                    "at": event.at.isoformat(),
                    "actor": event.actor,
                    "action": event.action,
                    "target_kind": event.target_kind,
                    "target_id": event.target_id,
                    "detail": event.detail,
                }
                for event in events
            ]
            self._add(keys.audit(yesterday), _jsonl(lines), "audit", {"paika-day": str(yesterday)})
            queries.set_mark(
                session=session, stream="audit", position=yesterday.toordinal(), at=now
            )
        self.shipper.wake()
        return len(lines)

    def digest(self, announcement: Announcement) -> None:
        """The day's digest as posted: its data, and its picture when a face can draw it."""
        detail = dict(announcement.detail)
        day = date.fromisoformat(str(detail.get("subject") or announcement.at.date()))
        self._add(keys.digest(day, "json"), _json(detail), "digest", {"paika-day": str(day)})
        if self.picture is not None:
            try:
                png = self.picture(detail)
            except Exception:  # the data is archived; a picture that cannot be drawn is not
                log.exception("the digest's picture of %s could not be drawn for the archive", day)
            else:
                self._add(keys.digest(day, "png"), png, "digest", {"paika-day": str(day)})
        self.shipper.wake()

    # ------------------------------------------------------------------ streams

    def _config_versions(self, now: datetime) -> int:
        with session_scope(self.engine) as session:
            last = queries.mark(session=session, stream="config").position
            rows = queries.config_versions_after(session=session, version=last, limit=BATCH)
            for row in rows:
                meta = {
                    "paika-version": str(row.version),
                    "paika-author": row.author,
                    "paika-at": row.at.isoformat(),
                    "paika-reason": _short(row.reason),
                    "paika-source": row.source,
                }
                self._add(keys.CONFIG, row.content.encode(), "config", meta)
            if rows:
                queries.set_mark(
                    session=session, stream="config", position=rows[-1].version, at=now
                )
        return len(rows)

    def _template_versions(self, now: datetime, policy: PolicyConfig) -> int:
        with session_scope(self.engine) as session:
            last = queries.mark(session=session, stream="templates").position
            found = queries.template_versions_after(session=session, row_id=last, limit=BATCH)
            rows = settled(found, last, now, lambda pair: (pair[0].id or 0, pair[0].at))
            for row, team in rows:
                body = {
                    "team": team,
                    "name": row.name,
                    "version": row.version,
                    "fields": kept_fields(row.fields, policy.archive.commands),
                    "author": row.author,
                    "at": row.at.isoformat(),
                }
                meta = {"paika-version": str(row.version), "paika-author": row.author}
                self._add(keys.template(team, row.name), _json(body), "template", meta)
            if rows:
                queries.set_mark(
                    session=session, stream="templates", position=rows[-1][0].id or 0, at=now
                )
        return len(rows)

    def _specs(self, now: datetime, policy: PolicyConfig) -> int:
        with session_scope(self.engine) as session:
            last = queries.mark(session=session, stream="specs").position
            found = queries.jobs_after(session=session, job_id=last, limit=BATCH)
            rows = settled(found, last, now, lambda pair: (pair[0].id or 0, pair[0].submitted_at))
            for job, team in rows:
                body = {
                    "job_id": job.id,
                    "name": job.name,
                    "owner": job.owner,
                    "team": team,
                    "submitted_at": job.submitted_at.isoformat(),
                    "template": job.template,
                    "template_version": job.template_version,
                    "command": kept_command(job.command, policy.archive.commands),
                    "image": job.image,
                    "account": job.account,
                    "spec": kept_fields(job.spec, policy.archive.commands),
                }
                self._add(keys.spec(job.id or 0), _json(body), "spec", {"paika-owner": job.owner})
            if rows:
                queries.set_mark(
                    session=session, stream="specs", position=rows[-1][0].id or 0, at=now
                )
        return len(rows)

    def _decisions(self, now: datetime) -> int:
        every = timedelta(seconds=self.pace.decisions_every_seconds)
        if self._last_decisions is not None and now - self._last_decisions < every:
            return 0
        self._last_decisions = now
        written = 0
        with session_scope(self.engine) as session:
            last = queries.mark(session=session, stream="decisions").position
            found = queries.decisions_after(session=session, row_id=last, limit=BATCH * 10)
            rows = settled(found, last, now, lambda row: (row.id or 0, row.at))
            by_day: dict[date, list[Any]] = defaultdict(list)
            for row in rows:
                by_day[row.at.astimezone(UTC).date()].append(row)
            for day, lines in sorted(by_day.items()):
                first, final = lines[0].id or 0, lines[-1].id or 0
                body = _jsonl(
                    {
                        "id": row.id,
                        "at": row.at.isoformat(),
                        "job_id": row.job_id,
                        "kind": row.kind,
                        **(row.detail or {}),
                    }
                    for row in lines
                )
                self._add(keys.decisions(day, first, final), body, "decisions", {})
                written += 1
            if rows:
                queries.set_mark(
                    session=session, stream="decisions", position=rows[-1].id or 0, at=now
                )
        return written

    def _snapshot(
        self,
        now: datetime,
        policy: PolicyConfig,
        waits: Mapping[int, Wait] | None,
        config_version: int | None,
    ) -> str | None:
        since = None if self._last_built is None else (now - self._last_built).total_seconds()
        due = (
            since is None
            or since >= self.pace.snapshot_every_seconds
            or (self._dirty and since >= self.pace.snapshot_min_seconds)
        )
        if not due:
            return None
        self._last_built, self._dirty = now, False
        with consistent_reads(self.engine) as session:
            document = state.build_document(session, policy, waits, now, config_version)
        digest = state.content_digest(document)
        with session_scope(self.engine) as session:
            if queries.mark(session=session, stream="snapshot").digest == digest:
                return None  # the same queue and cluster as the last snapshot written
            key = keys.snapshot(now)
            self._add(key, state.encode(document), "snapshot", {"paika-digest": digest})
            queries.set_mark(session=session, stream="snapshot", position=0, digest=digest, at=now)
        return key

    # ------------------------------------------------------------------ outages

    def _tell_outage(self, now: datetime) -> None:
        """The channel hears once that the store is down past the threshold, and once that
        it is back (for that outage); what the spool holds and dropped is said with it."""
        down_since = self.shipper.down_since
        if down_since is not None:
            long_enough = (now - down_since).total_seconds() >= self.pace.down_alert_seconds
            if long_enough and self._down_told != down_since:
                self._announce(NoticeKind.STORE_DOWN, down_since, now)
                self._down_told = down_since
        elif self._down_told is not None:
            self._announce(NoticeKind.STORE_BACK, self._down_told, now)
            self._down_told = None

    def _announce(self, kind: NoticeKind, down_since: datetime, now: datetime) -> None:
        detail = {
            "subject": "object-store",
            "where": self.where,
            "since": down_since.isoformat(),
            "minutes": round((now - down_since).total_seconds() / 60),
            "error": self.shipper.last_error or "",
            "waiting": len(self.spool),
            "dropped": dict(self.spool.dropped),
        }
        announcement = Announcement(
            key=f"{kind.value}:{down_since.isoformat()}",
            kind=kind.value,
            at=now,
            to_channel=True,
            detail=detail,
        )
        with session_scope(self.engine) as session:
            claim(session, announcement)

    # ------------------------------------------------------------------ the spool

    def _add(self, key: str, data: bytes, kind: Kind, meta: Mapping[str, str]) -> None:
        dropped = self.spool.add(key, data, meta, kind=kind)
        if dropped:
            log.warning(
                "the object store's spool is full: dropped %s to keep %s",
                ", ".join(f"{gone.kind} {gone.key}" for gone in dropped),
                key,
            )


def settled(
    rows: Sequence[T], last: int, now: datetime, identity: Callable[[T], tuple[int, datetime]]
) -> Sequence[T]:
    """The rows that may be handed over now: those before the first gap in their ids that
    is younger than GAP_SETTLES (the missing row may still be committed), so no row is ever
    passed over by a mark that moved past it."""
    expected = last + 1
    for index, row in enumerate(rows):
        row_id, at = identity(row)
        if row_id != expected and now - at < GAP_SETTLES:
            return rows[:index]
        expected = row_id + 1
    return rows


def _short(text: str, limit: int = REASON_BYTES) -> str:
    """A reason cut to fit the store's small meta budget (the SQL row keeps it whole)."""
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode(errors="ignore") + "…"


def _start_of(day: date, policy: PolicyConfig) -> datetime:
    return datetime.combine(day, time.min, tzinfo=policy.zone).astimezone(UTC)


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str).encode()


def _jsonl(lines: Iterable[Any]) -> bytes:
    return b"".join(_json(line) + b"\n" for line in lines)
