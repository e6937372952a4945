"""The /gpu config answers in words: a version's header, its changes, history and diffs.

The console and Block Kit say them through here; Block Kit shows the stored file in a code
block of its own, trimmed to fit a message.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

from bot.i18n import counted, t, when
from scheduler.door import (
    ConfigChange,
    ConfigChanged,
    ConfigDiff,
    ConfigHistory,
    ConfigShown,
    VersionInfo,
)

# Changes listed under one version in the history before the rest are counted.
HISTORY_CHANGES = 5


def in_force(lang: str, version: int | None) -> str | None:
    """ "config v3": which version a board or digest was made under (None: none stored)."""
    return None if version is None else t(lang, "config.in_force", version=version)


def header(lang: str, info: VersionInfo, zone: ZoneInfo) -> str:
    """Who made a version, when, from where and why."""
    if info.source == "file":
        # No person made it: say which file it came from.
        where = "config.file.bundled" if info.author == "bundled" else "config.file.given"
        return t(
            lang,
            "config.header_file",
            version=info.version,
            file=t(lang, where, name=info.author),
            at=when(lang, info.at, zone),
            reason=info.reason,
        )
    if info.source == "rollback" and info.rolled_back_to is not None:
        source = t(lang, "config.source.rollback", target=info.rolled_back_to)
    else:
        source = t(lang, f"config.source.{info.source}")
    return t(
        lang,
        "config.header",
        version=info.version,
        source=source,
        author=_who(info.author),
        at=when(lang, info.at, zone),
        reason=info.reason,
    )


def change(lang: str, found: ConfigChange) -> str:
    """One key's old and new value."""
    absent = t(lang, "config.absent")
    return t(
        lang,
        "config.change",
        name=found.key,
        old=absent if found.old is None else found.old,
        new=absent if found.new is None else found.new,
    )


def shown_lines(lang: str, result: ConfigShown, zone: ZoneInfo) -> list[str]:
    """The version in force and one value, or the heading of the whole file."""
    lines = [header(lang, result.info, zone)]
    if result.key is not None:
        lines.append(t(lang, "config.value", name=result.key, value=result.value))
    else:
        lines.append(t(lang, "config.content"))
    return lines


def changed_lines(lang: str, result: ConfigChanged, zone: ZoneInfo) -> list[str]:
    """What a set or rollback stored."""
    info = result.info
    if info.rolled_back_to is not None:
        done = t(lang, "config.rolled_back", version=info.version, target=info.rolled_back_to)
    else:
        done = t(lang, "config.stored", version=info.version)
    return [done, header(lang, info, zone), *(change(lang, c) for c in info.changes)]


def history_lines(lang: str, result: ConfigHistory, zone: ZoneInfo) -> list[str]:
    """Versions, newest first, each with its first few changes."""
    if not result.versions:
        return [t(lang, "config.history.none")]
    lines = [t(lang, "config.history.header", shown=len(result.versions), total=result.total)]
    for info in result.versions:
        lines.append(header(lang, info, zone))
        lines += ["  " + change(lang, c) for c in info.changes[:HISTORY_CHANGES]]
        if len(info.changes) > HISTORY_CHANGES:
            more = len(info.changes) - HISTORY_CHANGES
            lines.append("  " + counted(lang, "config.history.more", more, n=more))
    return lines


def diff_lines(lang: str, result: ConfigDiff) -> list[str]:
    """Every key that differs between two versions."""
    if not result.changes:
        return [t(lang, "config.diff.none", first=result.first, second=result.second)]
    heading = t(lang, "config.diff.header", first=result.first, second=result.second)
    return [heading, *(change(lang, c) for c in result.changes)]


def _who(author: str) -> str:
    """A person as a mention; the policy file ("PAIKA_CONFIG", "bundled") as it is."""
    return f"<@{author}>" if author[:1] in ("U", "W") and author.isalnum() else author
