"""Plain text of queue-and-cluster snapshots (`paika state show | diff | restore`): the board
and the queue as they were, drawn by the console's own board and queue, what changed between
two snapshots, and what a restore wrote. Every word comes from the catalogue."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from bot.blocks.job import priority, state
from bot.console import render
from bot.i18n import DEFAULT, amount, counted, t, term, wait_words, when
from scheduler.door import (
    DiffField,
    DiffKind,
    RestoreResult,
    SnapshotView,
    StateChange,
    StateDiff,
    StateValue,
    Wait,
    WaitCode,
)


def exact_moment(lang: str, moment: datetime, zone: ZoneInfo) -> str:
    """A snapshot's moment to the second, in the form `--at` takes back (the zone's
    abbreviation after it): to the minute, it would name the snapshot before."""
    if moment.tzinfo is None:  # SQLite hands back naive datetimes; paika stores UTC
        moment = moment.replace(tzinfo=UTC)
    return t(lang, "time.moment_exact", moment=moment.astimezone(zone))


@render.register
def _snapshot(result: SnapshotView, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    at = exact_moment(lang, result.taken_at, zone)
    if result.config_version is None:
        header = t(lang, "snapshot.header_unversioned", at=at)
    else:
        header = t(lang, "snapshot.header", at=at, version=result.config_version)
    return "\n".join(
        [header, "", render(result.board, zone, lang), "", render(result.queue, zone, lang)]
    )


@render.register
def _diff(result: StateDiff, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    since, until = when(lang, result.since, zone), when(lang, result.until, zone)
    if result.empty:
        return t(lang, "snapshot.diff.none", since=since, until=until)
    lines = [t(lang, "snapshot.diff.header", since=since, until=until)]
    for key, found in (("snapshot.diff.added", result.added), ("snapshot.diff.removed", result.removed)):  # fmt: skip
        lines += [
            "  " + t(lang, key, kind=term(lang, "snapshot.kind", item.kind), subject=item.subject)
            for item in found
        ]
    lines += ["  " + _change(lang, change) for change in result.changed]
    if result.came_and_went:
        shown = ", ".join(f"#{job}" for job in result.came_and_went[:_CAME_SHOWN])
        more = len(result.came_and_went) - _CAME_SHOWN
        if more > 0:
            shown = t(lang, "snapshot.diff.and_more", shown=shown, n=more)
        lines.append(
            "  "
            + counted(lang, "snapshot.diff.came_and_went", len(result.came_and_went), jobs=shown)
        )
    return "\n".join(lines)


_CAME_SHOWN = 20  # jobs that came and went named one by one; the rest counted


def _change(lang: str, change: StateChange) -> str:
    return t(
        lang,
        "snapshot.diff.changed",
        kind=term(lang, "snapshot.kind", change.kind),
        subject=change.subject,
        field=term(lang, "snapshot.field", change.field),
        old=_value(lang, change, change.old),
        new=_value(lang, change, change.new),
    )


def _value(lang: str, change: StateChange, value: StateValue) -> str:
    if value is None or value == "":
        return t(lang, "snapshot.value.none")
    if isinstance(value, bool):
        return t(lang, "snapshot.value.yes" if value else "snapshot.value.no")
    if isinstance(value, Mapping):  # a wait reason, said as the queue says it
        wait = Wait(**{"eta": None, **value, "code": WaitCode(value["code"])})
        return wait_words(lang, wait, wait.as_of)
    if change.field is DiffField.STATE and isinstance(value, str):
        if change.kind is DiffKind.JOB:
            return state(lang, value)
        if change.kind is DiffKind.HOST:
            return term(lang, "host.health", value)
    if change.field is DiffField.PRIORITY and isinstance(value, str):
        return priority(lang, value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def restored(lang: str, result: RestoreResult, database: str, zone: ZoneInfo) -> str:
    """What a restore wrote into `database` (its URL without a password), and what next."""
    lines = [
        t(
            lang,
            "snapshot.restored",
            at=exact_moment(lang, result.taken_at, zone),
            database=database,
            # Counted nouns, each in its own form: "1 team, 3 quotas, 1 host with 8 GPUs".
            teams=amount(lang, "count.teams", result.teams),
            quotas=amount(lang, "count.quotas", result.quotas),
            hosts=amount(lang, "count.hosts", result.hosts),
            gpus=amount(lang, "count.gpus", result.gpus),
            jobs=amount(lang, "count.jobs", result.jobs),
            running=result.running,
            allocations=amount(lang, "count.gpus", result.allocations),
        )
    ]
    if result.without_command:
        lines.append(
            t(
                lang,
                "snapshot.restored_without_command",
                jobs=amount(lang, "count.jobs", len(result.without_command)),
                ids=", ".join(f"#{job_id}" for job_id in result.without_command),
            )
        )
    if result.config_version is not None:
        lines.append(t(lang, "snapshot.restored_policy", version=result.config_version))
    return "\n".join(lines)
