"""The /gpu grammar in words: what a valid value looks like, and `/gpu help`, said from the
catalogue in a reader's language.

The grammar hands over data (`Expected`, `Help`); the console and Block Kit both say it
through here, so the two cannot drift apart in their words.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.i18n import language, t
from scheduler.grammar import Help, Key, Subcommand, ValueKind
from scheduler.grammar.values import Expected, example_arg, expected

INDENT = "  "
# Commands and choices listed in one sentence.
SEPARATOR = {"en": ", ", "zh": "、"}
# A key's traits in help: "(optional, default: 1)".
TRAIT_SEPARATOR = {"en": ", ", "zh": "，"}


def expected_words(lang: str, rule: Expected) -> str:
    """What a valid value looks like, e.g. "a whole number from 1 to 64"."""
    kind = rule.kind
    if kind in (ValueKind.INT, ValueKind.FLOAT):
        number = t(lang, f"grammar.value.{kind.value}", range=_range(lang, rule))
        if not rule.units:
            return number
        units = joined(lang, rule.units)
        return t(lang, "grammar.value.units", number=number, units=units)
    if kind is ValueKind.CHOICE:
        return t(lang, "grammar.value.choice", choices=joined(lang, rule.choices))
    if kind is ValueKind.DURATION:
        return t(
            lang,
            "grammar.value.duration",
            low=duration_text(rule.minimum or 0),
            high=duration_text(rule.maximum or 0),
        )
    if kind in (ValueKind.DATE, ValueKind.TIME):
        return t(lang, f"grammar.value.{kind.value}", earliest=rule.earliest, latest=rule.latest)
    if rule.max_length is not None:  # text whose description names the longest value
        return t(lang, f"grammar.value.{kind.value}", length=rule.max_length)
    if kind is ValueKind.JOB_IDS:
        return t(lang, "grammar.value.job_ids", most=int(rule.maximum or 0))
    return t(lang, f"grammar.value.{kind.value}")


def joined(lang: str, items: Sequence[str]) -> str:
    """Names in one sentence: "core, normal, idle"."""
    return SEPARATOR[language(lang)].join(items)


def key_help(lang: str, key: Key) -> str:
    """The one line that says what a key is for (the submit modal's hints say it too)."""
    return t(lang, key.help_code)


def summary(lang: str, command: Subcommand) -> str:
    """The one line that says what a command does."""
    return t(lang, command.summary_code)


def command_line(lang: str, command: Subcommand) -> str:
    """The command as typed and what it does: "/gpu status: Show one job."."""
    return t(
        lang, "grammar.help.command", invocation=command.invocation, summary=summary(lang, command)
    )


def help_lines(lang: str, shown: Help) -> list[str]:
    """`/gpu help` as plain lines: the overview, a group's commands or one command's keys."""
    if shown.command is not None:
        return _command_help(lang, shown.command)
    if not shown.topic:
        return _overview(lang, shown.commands)
    group = " ".join(shown.topic)
    return [
        t(lang, "grammar.help.group", group=group),
        "",
        *command_table(lang, shown.commands),
    ]


def command_table(lang: str, commands: Sequence[Subcommand], width: int | None = None) -> list[str]:
    """One line per command: its words, in a column `width` wide, then what it does."""
    width = width or column_width(commands)
    return [
        f"{INDENT}{command.heading.ljust(width)}{summary(lang, command)}" for command in commands
    ]


def column_width(commands: Sequence[Subcommand]) -> int:
    """How wide the column of command words is, so the summaries line up."""
    return max(len(command.heading) for command in commands) + 2


def sections(commands: Sequence[Subcommand]) -> dict[str, list[Subcommand]]:
    """The overview's sections in spec order, each with its commands."""
    grouped: dict[str, list[Subcommand]] = {}
    for command in commands:
        grouped.setdefault(command.section.value, []).append(command)
    return grouped


def section_title(lang: str, section: str, commands: Sequence[Subcommand]) -> str:
    """A section's name, marked when only admins may use its commands."""
    name = t(lang, f"grammar.section.{section}")
    if all(command.admin for command in commands):
        return t(lang, "grammar.help.admins_only", section=name)
    return name


def key_lines(lang: str, key: Key) -> list[str]:
    """A key's title with its traits, what it is for, and what its value looks like."""
    return [
        INDENT + key_title(lang, key),
        INDENT * 2 + key_help(lang, key),
        INDENT * 2 + value_line(lang, key),
    ]


def key_title(lang: str, key: Key) -> str:
    """How the key is written, and whether it is required, its default and how it is given:
    "gpus (optional, default: 1)"."""
    traits = [t(lang, "grammar.help.required" if key.required else "grammar.help.optional")]
    if key.default_word is not None:
        default = t(lang, f"grammar.default.{key.default_word.value}")
        traits.append(t(lang, "grammar.help.default", value=default))
    elif key.shown_default is not None:
        traits.append(t(lang, "grammar.help.default", value=key.shown_default))
    if key.repeatable:
        traits.append(t(lang, "grammar.help.repeatable"))
    if key.positional:
        traits.append(t(lang, "grammar.help.or_as", name=key.name))
    if key.aliases:
        names = joined(lang, [f"{alias}=" for alias in key.aliases])
        traits.append(t(lang, "grammar.help.also", names=names))
    title = key.placeholder if key.positional else key.name
    return t(
        lang, "grammar.help.key", title=title, traits=TRAIT_SEPARATOR[language(lang)].join(traits)
    )


def value_line(lang: str, key: Key) -> str:
    """What a valid value looks like, and an example of the key as typed."""
    return t(
        lang,
        "grammar.help.value",
        expected=expected_words(lang, expected(key)),
        example=example_arg(key),
    )


def _overview(lang: str, commands: Sequence[Subcommand]) -> list[str]:
    lines = [t(lang, "grammar.help.overview")]
    width = column_width(commands)
    for section, members in sections(commands).items():
        lines += ["", section_title(lang, section, members), *command_table(lang, members, width)]
    return lines


def _command_help(lang: str, command: Subcommand) -> list[str]:
    lines = [command_line(lang, command), t(lang, "grammar.help.usage", usage=command.usage)]
    if command.keys:
        lines += ["", t(lang, "grammar.help.keys")]
        for key in command.keys:
            lines += key_lines(lang, key)
    if command.template_key is not None:
        lines += ["", t(lang, "grammar.help.template", name=command.template_key)]
    lines += ["", t(lang, "error.example", example=command.example)]
    return lines


def _range(lang: str, rule: Expected) -> str:
    low, high = rule.minimum, rule.maximum
    if low is not None and high is not None:
        code = "between_above" if rule.above_minimum else "between"
        return t(lang, f"grammar.range.{code}", low=_number(low), high=_number(high))
    if low is not None:
        code = "above" if rule.above_minimum else "at_least"
        return t(lang, f"grammar.range.{code}", low=_number(low))
    if high is not None:
        return t(lang, "grammar.range.at_most", high=_number(high))
    return ""


def duration_text(seconds: float) -> str:
    """A length of time as it is typed: 30s, 5m, 2h (the largest unit that divides it)."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{_number(seconds / size)}{unit}"
    return f"{_number(seconds)}s"


def _number(value: float) -> str:
    """A bound as the user would type it: 10000000, not 1e+07."""
    return str(int(value)) if value == int(value) else f"{value:g}"
