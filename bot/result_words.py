"""Words about results that the console and Slack both say: where a run is, the submission
as given, a template's history and one of its versions. Plain text from the catalogue; the
console prints it, the Block Kit replies lay it out (neither imports the other)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from zoneinfo import ZoneInfo

from bot.i18n import DEFAULT, counted, language, t, when
from bot.said import template_fields
from scheduler.door import TEMPLATE_VERSION, TemplateHistory, TemplateVersionView

COMMAND = "cmd"  # the submit key of a job's command


def cards_on_hosts(lang: str, cards: Sequence[tuple[str, str, int]]) -> str:
    """Where a run is or was: "gpu-a (2× A100-80GB), gpu-b (1× A100-80GB)"."""
    by_host: dict[str, list[str]] = {}
    for host, gpu_type, count in cards:
        by_host.setdefault(host, []).append(t(lang, "status.cards", n=count, gpu_type=gpu_type))
    sep = _CARD_SEPARATOR[language(lang)]
    return sep.join(
        t(lang, "status.cards_on", host=host, cards=sep.join(kinds))
        for host, kinds in by_host.items()
    )


_CARD_SEPARATOR = {"en": ", ", "zh": "、"}


def spec_line(lang: str, spec: Mapping[str, Any]) -> str:
    """The submission as given, as the `/gpu submit` that repeats it (the template's
    version is said apart, and is no submit key); the command last, as the longest, so a
    cut spares the short keys."""
    given = sorted(spec.items(), key=lambda item: item[0] == COMMAND)
    keys = {key: value for key, value in given if key != TEMPLATE_VERSION}
    return t(lang, "status.spec", spec=template_fields(lang, keys))


def template_history_words(result: TemplateHistory, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    """A template's versions, newest first, each with what it changed."""
    lines = [t(lang, "template.history.header", name=result.name, team=result.team)]
    for view in result.versions:
        line = _version_line(lang, view, zone)
        if view.version == result.latest:
            line += " " + t(lang, "template.history.in_use")
        lines += [line, "  " + _changed(lang, view)]
    if result.more:
        lines.append(
            counted(lang, "template.history.more", result.more, n=result.more, name=result.name)
        )
    if result.latest is None:
        lines.append(t(lang, "template.history.deleted"))
    return "\n".join(lines)


def template_version_words(result: TemplateVersionView, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    """One version of a template: when, by whom, its fields and what it changed."""
    return t(
        lang,
        "template.version.shown",
        name=result.name,
        version=result.version,
        at=when(lang, result.at, zone),
        author=result.author,
        fields=template_fields(lang, result.fields),
        changes=_changed(lang, result),
    )


def _version_line(lang: str, view: TemplateVersionView, zone: ZoneInfo) -> str:
    return t(
        lang,
        "template.history.version",
        version=view.version,
        at=when(lang, view.at, zone),
        author=view.author,
        fields=template_fields(lang, view.fields),
    )


def _changed(lang: str, view: TemplateVersionView) -> str:
    """What a version changed against the one before it."""
    if view.first:
        return t(lang, "template.history.first")
    if not view.changed:
        return t(lang, "template.history.same")
    return t(lang, "template.history.changed", keys=", ".join(view.changed))
