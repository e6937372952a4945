"""The /gpu command grammar: one pure parser and its help, shared by Slack and the CLI.

It speaks in codes and values (`Mistake`, `Help`); bot/ says them from the catalogue."""

from scheduler.grammar.errors import Mistake, ParseError
from scheduler.grammar.help import Help, help_for
from scheduler.grammar.parser import ParsedCommand, check_required, defaults, parse, subcommand
from scheduler.grammar.spec import SPEC, SUBCOMMANDS, Key, Subcommand
from scheduler.grammar.tokens import Token, tokenize
from scheduler.grammar.values import DataSpec, Duration, FreeValue, JobRef, Metric, ValueKind

__all__ = [
    "SPEC",
    "SUBCOMMANDS",
    "DataSpec",
    "Duration",
    "FreeValue",
    "JobRef",
    "Key",
    "Help",
    "Metric",
    "Mistake",
    "ParseError",
    "ParsedCommand",
    "Subcommand",
    "Token",
    "ValueKind",
    "check_required",
    "defaults",
    "help_for",
    "parse",
    "subcommand",
    "tokenize",
]
