"""Find the subcommand named by the leading words, or explain why none matches."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field

from scheduler.grammar.errors import Mistake, ParseError
from scheduler.grammar.spec import SUBCOMMANDS, Subcommand
from scheduler.grammar.values import shorten


@dataclass
class _Node:
    """One word of a command path; built once at import and never changed after."""

    command: Subcommand | None = None
    children: dict[str, _Node] = field(default_factory=dict)


def _build_tree() -> _Node:
    root = _Node()
    for command in SUBCOMMANDS:
        node = root
        for word in command.path:
            node = node.children.setdefault(word, _Node())
        node.command = command
    return root


_ROOT = _build_tree()


def resolve_command(words: Sequence[str]) -> tuple[Subcommand, int]:
    """The command named by the longest run of leading `words`, and how many words it used."""
    node, depth = _ROOT, 0
    found: tuple[Subcommand, int] | None = None
    for word in words:
        child = node.children.get(word.lower())
        if child is None:
            break
        node, depth = child, depth + 1
        if node.command is not None:
            found = (node.command, depth)
    if found is not None:
        return found
    path = tuple(word.lower() for word in words[:depth])
    if depth < len(words):
        raise unknown_command(path, words[depth])
    raise _incomplete(path)


def resolve_topic(words: Sequence[str]) -> tuple[tuple[str, ...], Subcommand | None]:
    """The command or group that all of `words` name, for help; a group gives None."""
    node = _ROOT
    path: tuple[str, ...] = ()
    for word in words:
        child = node.children.get(word.lower())
        if child is None:
            raise unknown_command(path, word)
        node, path = child, (*path, word.lower())
    return path, node.command


def commands_under(path: tuple[str, ...]) -> tuple[Subcommand, ...]:
    """Every command whose path starts with `path`, in spec order."""
    return tuple(command for command in SUBCOMMANDS if command.path[: len(path)] == path)


def top_level_words() -> tuple[str, ...]:
    """The first words of all commands, in spec order."""
    return tuple(_ROOT.children)


def unknown_command(path: tuple[str, ...], word: str) -> ParseError:
    """The error for `word` after the known command words `path`."""
    node = _node_at(path)
    typed = shorten(" ".join((*path, word)))
    suggestion = _suggest(path, word.lower())
    listed = tuple(node.children)
    if not path:
        if suggestion:
            return ParseError(
                Mistake.UNKNOWN_COMMAND_MEANT, got=typed, meant=suggestion, commands=listed
            )
        return ParseError(Mistake.UNKNOWN_COMMAND, got=typed, commands=listed)
    group = " ".join(path)
    if not listed:
        return ParseError(Mistake.UNKNOWN_AFTER_COMMAND, got=typed, group=group)
    if suggestion:
        return ParseError(
            Mistake.UNKNOWN_IN_GROUP_MEANT,
            got=typed,
            meant=suggestion,
            group=group,
            commands=listed,
        )
    return ParseError(Mistake.UNKNOWN_IN_GROUP, got=typed, group=group, commands=listed)


def _incomplete(path: tuple[str, ...]) -> ParseError:
    listed = tuple(_node_at(path).children)
    if not path:
        return ParseError(Mistake.NO_COMMAND, commands=listed)
    return ParseError(Mistake.GROUP_NEEDS_A_WORD, group=" ".join(path), commands=listed)


def _node_at(path: tuple[str, ...]) -> _Node:
    node = _ROOT
    for word in path:
        node = node.children[word]
    return node


def _suggest(path: tuple[str, ...], word: str) -> str | None:
    """The command the person probably meant, as words to type after /gpu."""
    close = difflib.get_close_matches(word, list(_node_at(path).children), n=1)
    if close:
        return " ".join((*path, close[0]))
    if path:
        return None
    # A word from deeper down typed on its own ("host") points at its group when unambiguous.
    deeper = {
        command.path[: index + 1]
        for command in SUBCOMMANDS
        for index in range(1, len(command.path))
        if command.path[index] == word
    }
    return " ".join(deeper.pop()) if len(deeper) == 1 else None
