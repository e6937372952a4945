"""parse(): /gpu command text to a ParsedCommand, the one grammar Slack and the CLI share."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.grammar.errors import ParseError
from scheduler.grammar.lookup import resolve_command, resolve_topic, top_level_words
from scheduler.grammar.spec import SPEC, Key, Subcommand
from scheduler.grammar.tokens import Token, tokenize
from scheduler.grammar.values import convert, quote_got

HELP_PATH = ("help",)


@dataclass(frozen=True)
class ParsedCommand:
    """A command path and the typed values of only the keys the user gave."""

    path: tuple[str, ...]
    args: dict[str, object]


def parse(text: str) -> ParsedCommand:
    """Parse the text typed after /gpu; raises ParseError and nothing else."""
    tokens = tokenize(text)
    if not tokens:
        return ParsedCommand(HELP_PATH, {})
    command, used = _command(tokens)
    args = _Arguments(command)
    args.bind(tokens[used:])
    values = args.values()
    if command.template_key is None or command.template_key not in values:
        check_required(command.path, values)
    topic = values.get("topic")
    if command.path == HELP_PATH and isinstance(topic, tuple):
        resolve_topic(topic)  # "help sumbit" fails here, like "sumbit" would
    return ParsedCommand(command.path, values)


def check_required(path: Sequence[str], args: Mapping[str, object]) -> None:
    """Raise the missing-keys ParseError unless `args` holds every required key of `path`."""
    command = subcommand(path)
    missing = [key.name for key in command.keys if key.required and key.name not in args]
    if missing:
        raise ParseError(
            f"{command.invocation} is missing {_and_list(missing)}.", example=command.example
        )


def defaults(path: Sequence[str]) -> dict[str, object]:
    """Typed defaults of `path`'s keys, for the service to fill in what the user left out."""
    return {
        key.name: convert(key, key.default)
        for key in subcommand(path).keys
        if key.default is not None
    }


def subcommand(path: Sequence[str]) -> Subcommand:
    """The definition of the command at `path`; ParseError if there is none."""
    command = SPEC.get(tuple(path))
    if command is None:
        resolved, _ = resolve_command(path)  # raises the unknown-command error
        raise ParseError(f"Unexpected words after {resolved.invocation}: {' '.join(path)}.")
    return command


def _command(tokens: Sequence[Token]) -> tuple[Subcommand, int]:
    if tokens[0].key is not None:
        raise ParseError(
            f"Start with a command, not {quote_got(tokens[0].raw)}. "
            f"Commands: {', '.join(top_level_words())}. Try /gpu help."
        )
    words = []
    for token in tokens:
        if token.key is not None:
            break
        words.append(token.value)
    return resolve_command(words)


class _Arguments:
    """Collects converted values for one command, checking keys as they arrive."""

    def __init__(self, command: Subcommand) -> None:
        self._command = command
        self._values: dict[str, object] = {}
        self._repeated: dict[str, list[object]] = {}
        self._given: dict[str, Token] = {}

    def bind(self, tokens: Sequence[Token]) -> None:
        """Bind key=value tokens by name, then bare words to positional keys in order."""
        for token in tokens:
            if token.key is not None:
                self._add(self._known_key(token.key, token), token, token.value)
        words = [token for token in tokens if token.key is None]
        slots = self._command.positionals
        for index, word in enumerate(words):
            if index >= len(slots):
                raise self._too_many(word)
            slot = slots[index]
            if slot.rest:
                rest = " ".join(token.value for token in words[index:])
                self._add(slot, word, rest)
                return
            self._add(slot, word, word.value)

    def values(self) -> dict[str, object]:
        """The bound values; repeatable keys become tuples."""
        repeated = {name: tuple(items) for name, items in self._repeated.items()}
        return {**self._values, **repeated}

    def _add(self, key: Key, token: Token, raw: str) -> None:
        earlier = self._given.get(key.name)
        if earlier is not None and not key.repeatable:
            raise ParseError(
                f"{key.name} is given twice: {quote_got(earlier.raw)} and {quote_got(token.raw)}. "
                "Give it once."
            )
        self._given[key.name] = token
        # A bare word is best corrected by the command's example; key=value by the key's.
        example = self._command.example if token.key is None else None
        value = convert(key, raw, example)
        if key.repeatable:
            self._repeated.setdefault(key.name, []).append(value)
        else:
            self._values[key.name] = value

    def _known_key(self, name: str, token: Token) -> Key:
        key = self._command.key(name)
        if key is not None:
            return key
        command = self._command
        if not command.keys:
            raise ParseError(
                f"{command.invocation} takes no keys, got {quote_got(token.raw)}.",
                example=command.example,
            )
        names = [key.name for key in command.keys]
        message = f"Unknown key {quote_got(name)} for {command.invocation}."
        close = difflib.get_close_matches(name, names, n=1)
        if close:
            message += f' Did you mean "{close[0]}"?'
        raise ParseError(f"{message} Valid keys: {', '.join(names)}.")

    def _too_many(self, word: Token) -> ParseError:
        command = self._command
        slots = command.positionals
        if not slots:
            message = f"{command.invocation} takes no words after it, got {quote_got(word.raw)}."
        else:
            taken = " ".join(key.placeholder for key in slots)
            message = f"Unexpected {quote_got(word.raw)}: {command.invocation} takes only {taken}."
        if any(not key.positional for key in command.keys):
            message += " Give other values as key=value, in quotes if they contain spaces."
        return ParseError(f"{message} Usage: {command.usage}.", example=command.example)


def _and_list(names: Sequence[str]) -> str:
    if len(names) == 1:
        return names[0]
    return f"{', '.join(names[:-1])} and {names[-1]}"
