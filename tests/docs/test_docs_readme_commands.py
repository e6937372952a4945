"""Every `paika` command the README shows is one the `paika` command has, with options it
takes, and every `paika cmd "…"` text is one the /gpu grammar reads; the README's first two
commands are still the demo and the tests."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import typer

from bot.cli import app
from scheduler.grammar.parser import parse

README = Path(__file__).resolve().parents[2] / "README.md"
BASH = re.compile(r"^\s*```bash\n(.*?)^\s*```", re.MULTILINE | re.DOTALL)


def _blocks() -> list[str]:
    return BASH.findall(README.read_text(encoding="utf-8"))


def _paika_calls(block: str) -> list[list[str]]:
    """Each `paika …` in a block's lines (after `&&`, `;` or env assignments), as words."""
    calls = []
    for line in block.splitlines():
        line = line.split(" #", 1)[0].strip()
        for part in re.split(r"&&|;|\|\|", line):
            try:
                words = shlex.split(part)
            except ValueError:
                continue
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
                words = words[1:]
            if words and Path(words[0]).name == "paika":
                calls.append(words[1:])
    return calls


def _resolve(words: list[str]) -> tuple[Any, list[str]]:
    """The command `paika WORDS` runs (typer's click command), and the words left for it."""
    command: Any = typer.main.get_command(app)
    ctx = command.context_class(command)
    while hasattr(command, "get_command") and words and not words[0].startswith("-"):
        found = command.get_command(ctx, words[0])
        assert found is not None, f"paika has no command {words[0]!r} (README: paika {words})"
        command, words = found, words[1:]
        ctx = command.context_class(command, parent=ctx)
    return command, words


def test_the_first_two_commands_are_the_demo_and_the_tests() -> None:
    first, second = _blocks()[:2]
    assert first.strip().endswith(".venv/bin/paika demo")
    assert second.strip().endswith(".venv/bin/python -m pytest")


def test_every_paika_command_in_the_readme_exists_with_its_options() -> None:
    calls = [call for block in _blocks() for call in _paika_calls(block)]
    named = {" ".join(w for w in call if not w.startswith("-"))[:20] for call in calls}
    assert len(calls) >= 7, calls  # the first day's steps are there
    for want in ("doctor", "agent init", "deploy units", "agent-secret", "cmd"):
        assert any(n.startswith(want) for n in named), (want, named)
    for call in calls:
        command, rest = _resolve(call)
        options = {opt for param in command.params for opt in param.opts}
        for word in rest:
            if word.startswith("--"):
                assert word.split("=")[0] in options, f"paika {' '.join(call)}: no {word}"
        if command.name == "cmd":
            parse(rest[0])  # a /gpu text the grammar reads (it raises on one it cannot)
