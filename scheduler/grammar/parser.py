"""parse(): /gpu command text to a ParsedCommand, the one grammar Slack and the CLI share."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scheduler.grammar.errors import Mistake, ParseError
from scheduler.grammar.lookup import resolve_command, resolve_topic, top_level_words
from scheduler.grammar.sharing import check_share
from scheduler.grammar.spec import SPEC, Key, Subcommand
from scheduler.grammar.tokens import Token, tokenize
from scheduler.grammar.values import FreeValue, convert, shorten

HELP_PATH = ("help",)
SUBMIT_PATH = ("submit",)


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
    if command.free_keys is not None and command.free_keys not in values:
        raise ParseError(Mistake.NO_SETTINGS, example=command.example, command=command.invocation)
    complete = not command.fills_later(values)
    if complete:
        check_required(command.path, values)
    # A template (saved, or the one submit names) may still bring mem=; the rest clash now.
    check_share(values, complete=complete and command.path == SUBMIT_PATH)
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
            Mistake.MISSING_KEYS,
            example=command.example,
            command=command.invocation,
            missing=tuple(missing),
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
        raise ParseError(
            Mistake.WORDS_AFTER_COMMAND, command=resolved.invocation, got=shorten(" ".join(path))
        )
    return command


def _command(tokens: Sequence[Token]) -> tuple[Subcommand, int]:
    if tokens[0].key is not None:
        raise ParseError(
            Mistake.KEY_BEFORE_COMMAND, got=shorten(tokens[0].raw), commands=top_level_words()
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
        self._free: dict[str, FreeValue] = {}

    def bind(self, tokens: Sequence[Token]) -> None:
        """Bind key=value tokens by name, then bare words to positional keys in order."""
        for token in tokens:
            if token.key is not None and self._is_free(token.key):
                self._add_free(token)
            elif token.key is not None:
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
        free = self._command.free_keys
        taken = {free: dict(self._free)} if free is not None and self._free else {}
        return {**self._values, **repeated, **taken}

    def _is_free(self, name: str) -> bool:
        return self._command.free_keys is not None and self._command.key(name) is None

    def _add_free(self, token: Token) -> None:
        name = token.typed_key or token.key or ""
        earlier = self._given.get(name)
        if earlier is not None:
            raise ParseError(
                Mistake.GIVEN_TWICE,
                name=name,
                first=shorten(earlier.raw),
                second=shorten(token.raw),
            )
        if not token.value.strip():
            raise ParseError(Mistake.EMPTY_VALUE, key=name, example=self._command.example)
        self._given[name] = token
        self._free[name] = FreeValue(token.value, token.quoted)

    def _add(self, key: Key, token: Token, raw: str) -> None:
        earlier = self._given.get(key.name)
        if (
            earlier is not None
            and None not in (earlier.key, token.key)
            and earlier.key != token.key  # mem=20 gpu_mem=20GB
        ):
            raise ParseError(
                Mistake.SAME_KEY_TWO_NAMES,
                key=key.name,
                first=shorten(earlier.raw),
                second=shorten(token.raw),
            )
        if earlier is not None and not key.repeatable:
            raise ParseError(
                Mistake.GIVEN_TWICE,
                name=key.name,
                first=shorten(earlier.raw),
                second=shorten(token.raw),
            )
        self._given[key.name] = token
        # A bare word is best corrected by the command's example; key=value by the key's.
        example = self._command.example if token.key is None else None
        # A value typed under an alias is explained under the name the person typed.
        typed = replace(key, name=token.key) if token.key and token.key != key.name else key
        value = convert(typed, raw, example)
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
                Mistake.TAKES_NO_KEYS,
                example=command.example,
                command=command.invocation,
                got=shorten(token.raw),
            )
        names = tuple(key.name for key in command.keys)
        typed_as = names + tuple(alias for key in command.keys for alias in key.aliases)
        close = difflib.get_close_matches(name, typed_as, n=1)
        if close:
            raise ParseError(
                Mistake.UNKNOWN_KEY_MEANT,
                got=shorten(name),
                command=command.invocation,
                meant=close[0],
                keys=names,
            )
        raise ParseError(
            Mistake.UNKNOWN_KEY, got=shorten(name), command=command.invocation, keys=names
        )

    def _too_many(self, word: Token) -> ParseError:
        command = self._command
        slots = command.positionals
        # Where the command also has key=value keys, the error says to give the rest so.
        takes_keys = any(not key.positional for key in command.keys)
        got, usage = shorten(word.raw), command.usage
        if not slots:
            mistake = Mistake.TAKES_NO_WORDS_USE_KEYS if takes_keys else Mistake.TAKES_NO_WORDS
            return ParseError(
                mistake, example=command.example, command=command.invocation, got=got, usage=usage
            )
        mistake = Mistake.TOO_MANY_WORDS_USE_KEYS if takes_keys else Mistake.TOO_MANY_WORDS
        return ParseError(
            mistake,
            example=command.example,
            command=command.invocation,
            got=got,
            taken=" ".join(key.placeholder for key in slots),
            usage=usage,
        )
