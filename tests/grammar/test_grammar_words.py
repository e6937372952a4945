"""The grammar carries no sentences: what it says is codes and values, and bot/ holds the
words (bot/messages.yml). These fail when someone writes English into scheduler/grammar
again, be it an error message, a key's help or a command's summary."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import scheduler.grammar
from scheduler.grammar import SUBCOMMANDS, Key, ParseError, Subcommand
from scheduler.grammar.errors import Mistake

GRAMMAR = Path(scheduler.grammar.__file__).parent
# Three words in a row, the way a sentence runs: "needs a value", "Unknown key for".
SENTENCE = re.compile(r"[A-Za-z]+,? [a-z]+ [a-z]+")


def _examples() -> set[str]:
    """Example commands and values: the only text in the grammar written for people."""
    examples = {command.example for command in SUBCOMMANDS}
    return examples | {key.example for command in SUBCOMMANDS for key in command.keys}


def _is_example(text: str, examples: set[str]) -> bool:
    return any(text in example for example in examples)


def _docstrings(tree: ast.AST) -> set[int]:
    """Ids of the constants that are docstrings (they speak to programmers)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def sentences(source: str, examples: set[str]) -> list[str]:
    """String literals in `source` that read like English sentences, examples aside."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and SENTENCE.search(node.value)
        and not _is_example(node.value, examples)
    ]


def test_the_scan_finds_a_sentence_written_the_old_way() -> None:
    old = 'raise ParseError(f"{key.name} needs a value.", key=key.name)\n'
    assert sentences(old, _examples()) == [" needs a value."]
    help_text = 'Key("gpus", ValueKind.INT, "Number of GPUs the job needs.", "2")\n'
    assert sentences(help_text, _examples()) == ["Number of GPUs the job needs."]
    example = 'Key("reason", ValueKind.TEXT, "paper deadline on Friday")\n'
    assert sentences(example, _examples()) == []


def test_no_module_of_the_grammar_writes_a_sentence() -> None:
    examples = _examples()
    found = {
        path.name: sentences(path.read_text(encoding="utf-8"), examples)
        for path in sorted(GRAMMAR.glob("*.py"))
    }
    assert {name: texts for name, texts in found.items() if texts} == {}


def test_errors_keys_and_commands_have_no_field_for_words() -> None:
    assert not {"message", "hint"} & set(vars(ParseError))
    error = ParseError(Mistake.EMPTY_VALUE, key="cmd", example='cmd="python train.py"')
    assert not hasattr(error, "message") and not hasattr(error, "hint")
    assert "help" not in {field.name for field in dataclasses.fields(Key)}
    assert "summary" not in {field.name for field in dataclasses.fields(Subcommand)}
