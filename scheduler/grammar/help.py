"""Help text generated from the spec, so it always says what the parser accepts."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.grammar.lookup import commands_under, resolve_topic
from scheduler.grammar.spec import SUBCOMMANDS, Key, Subcommand
from scheduler.grammar.values import describe, example_arg

_INDENT = "  "


def help_text(path: Sequence[str] = ()) -> str:
    """The overview, one command's keys, or a group's commands; ParseError for unknown words."""
    if not path:
        return _overview()
    topic, command = resolve_topic(path)
    if command is not None:
        return _command_help(command)
    return _group_help(topic)


def _overview() -> str:
    lines = ["/gpu commands. Type /gpu help <command> for its keys, e.g. /gpu help submit."]
    width = _column_width(SUBCOMMANDS)
    sections: dict[str, list[Subcommand]] = {}
    for command in SUBCOMMANDS:
        sections.setdefault(command.section, []).append(command)
    for section, commands in sections.items():
        admins_only = " (admins only)" if all(command.admin for command in commands) else ""
        lines += ["", section + admins_only, *_command_table(commands, width)]
    return "\n".join(lines)


def _group_help(path: tuple[str, ...]) -> str:
    group = " ".join(path)
    lines = [f"/gpu {group} commands. Type /gpu help {group} <command> for its keys."]
    commands = commands_under(path)
    return "\n".join((*lines, "", *_command_table(commands, _column_width(commands))))


def _column_width(commands: Sequence[Subcommand]) -> int:
    return max(len(command.heading) for command in commands) + 2


def _command_table(commands: Sequence[Subcommand], width: int) -> list[str]:
    return [f"{_INDENT}{command.heading.ljust(width)}{command.summary}" for command in commands]


def _command_help(command: Subcommand) -> str:
    lines = [f"{command.invocation}: {command.summary}", f"Usage: {command.usage}"]
    if command.keys:
        lines += ["", "Keys:"]
        for key in command.keys:
            lines += _key_help(key)
    if command.template_key is not None:
        lines += [
            "",
            f"With {command.template_key}=…, keys you leave out come from that saved "
            "template; keys you give win.",
        ]
    lines += ["", f"Example: {command.example}"]
    return "\n".join(lines)


def _key_help(key: Key) -> list[str]:
    traits = ["required" if key.required else "optional"]
    if key.shown_default is not None:
        traits.append(f"default: {key.shown_default}")
    if key.repeatable:
        traits.append("may be repeated")
    if key.positional:
        traits.append(f"or as {key.name}=…")
    title = key.placeholder if key.positional else key.name
    return [
        f"{_INDENT}{title} ({', '.join(traits)})",
        f"{_INDENT * 2}{key.help}",
        f"{_INDENT * 2}Value: {describe(key)}. Example: {example_arg(key)}",
    ]
