"""/gpu help as data read from the spec, so it always says what the parser accepts; bot/
says it in the reader's language."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.grammar.lookup import commands_under, resolve_topic
from scheduler.grammar.spec import SUBCOMMANDS, Subcommand


@dataclass(frozen=True)
class Help:
    """What `/gpu help [words …]` shows: the overview (empty topic), a group of commands, or
    one command with its keys.

    `commands` are the commands to list, in spec order; for one command it is that command
    alone and `command` is set. Each command carries its words, keys, examples and defaults;
    its summary and its keys' help are catalogue keys (`summary_code`, `help_code`).
    """

    topic: tuple[str, ...]
    commands: tuple[Subcommand, ...]
    command: Subcommand | None = None


def help_for(path: Sequence[str] = ()) -> Help:
    """The overview, one command's keys, or a group's commands; ParseError for unknown words."""
    if not path:
        return Help((), SUBCOMMANDS)
    topic, command = resolve_topic(path)
    if command is not None:
        return Help(topic, (command,), command)
    return Help(topic, commands_under(topic))
