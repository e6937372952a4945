"""The /gpu command grammar: one pure parser and help text shared by Slack and the CLI."""

from scheduler.grammar.errors import ParseError
from scheduler.grammar.help import help_text
from scheduler.grammar.parser import ParsedCommand, check_required, defaults, parse, subcommand
from scheduler.grammar.spec import SPEC, SUBCOMMANDS, Key, Subcommand
from scheduler.grammar.tokens import Token, tokenize
from scheduler.grammar.values import DataSpec, JobRef, Metric, ValueKind

__all__ = [
    "SPEC",
    "SUBCOMMANDS",
    "DataSpec",
    "JobRef",
    "Key",
    "Metric",
    "ParseError",
    "ParsedCommand",
    "Subcommand",
    "Token",
    "ValueKind",
    "check_required",
    "defaults",
    "help_text",
    "parse",
    "subcommand",
    "tokenize",
]
