"""The console speaks only the catalogue's words: `bot/console.py` holds no English sentence
of its own, so its replies and Block Kit's cannot drift apart and both can be said in Chinese."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import bot.console
import bot.console_state

CONSOLE = Path(bot.console.__file__)
# The console's words for snapshots (`paika state …`) live in a module of their own.
FACES = (CONSOLE, Path(bot.console_state.__file__))
# A catalogue key ("console.board.free") or group ("bump_state") is a name, not words.
KEY = re.compile(r"[a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)*")
# A `/gpu …` example is a value: what the user types, the same in every language.
COMMAND = re.compile(r"/gpu\b.*")
# strftime directives ("%Y-%m-%d") are a format, not words.
DIRECTIVE = re.compile(r"%[A-Za-z]")
WORD = re.compile(r"[A-Za-z]{2,}")


def sentences(source: str) -> list[tuple[int, str]]:
    """Every string in `source` that says something in English: two or more words, outside
    docstrings, catalogue keys, `/gpu` examples, format specs and errors raised for programmers."""
    tree = ast.parse(source)
    skipped: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skipped.add(id(body[0].value))  # a docstring
        if isinstance(node, ast.Raise):
            skipped.update(id(inner) for inner in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.JoinedStr):
            # An f-string reads as a whole: its fields are values, its text around them words.
            skipped.update(id(part) for part in ast.walk(node) if part is not node)
            text = "".join(
                part.value if isinstance(part, ast.Constant) else "{}" for part in node.values
            )
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if _says_something(text):
            found.append((node.lineno, text))
    return found


def _says_something(text: str) -> bool:
    if KEY.fullmatch(text):
        return False
    words = WORD.findall(DIRECTIVE.sub("", COMMAND.sub("", text)))
    return len(words) >= 2


@pytest.mark.parametrize("face", FACES, ids=lambda path: path.name)
def test_the_console_holds_no_english_sentence_of_its_own(face: Path) -> None:
    found = sentences(face.read_text(encoding="utf-8"))
    assert not found, f"say these through the catalogue (bot/messages.yml): {found}"


def test_the_scan_finds_a_planted_sentence_in_every_form_a_reply_is_written() -> None:
    source = CONSOLE.read_text(encoding="utf-8")
    planted = [
        'NOTE = "Nothing is waiting."',
        'def _more(n: int) -> str:\n    return f"and {n} more"',
        'def _eta(at: str) -> str:\n    return "estimated start " + at',
        'LABELS = {"mine": "your jobs"}',
    ]
    for line in planted:
        found = sentences(source + "\n\n" + line + "\n")
        assert len(found) == 1, (line, found)


def test_the_scan_leaves_values_keys_and_formats_alone() -> None:
    source = "\n".join(
        [
            '"""A module docstring with many words in it."""',
            'KEY = "console.board.queue_by_class"',
            'HINT = "/gpu status #<id>"',
            'CMD = f"/gpu approve {request_id}"',
            'STAMP = "%Y-%m-%d %H:%M %Z"',
            'RUN = f"gpu{first}-{last}"',
            'MENTION = f"<@{user}>"',
            'SEPARATOR = " · "',
            'def f() -> None:\n    raise TypeError(f"no text form for {kind}")',
        ]
    )
    assert sentences(source) == []
