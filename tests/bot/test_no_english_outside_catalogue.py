"""No module of bot/ writes English of its own (issue 30): every sentence a reader sees comes
from the catalogue (bot/messages.yml), in en and zh, so that a Chinese team reads all of it in
Chinese. That holds for Block Kit, the console, `paika digest --print` and the paika command's
messages to whoever runs a command in a language (--lang).

The scan reads every module's syntax tree. A string says something when, with its values
taken out (a `/gpu …` example, an emoji code, a format's fields and directives), two words of
letters stand side by side with spaces between; a catalogue key says nothing. What is not
for a reader is let through by where it stands, each for its reason (`CONTEXTS`), and the few
named places and proper names that stay English are listed with why (`OPERATORS`, `NAMES`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import bot

BOT = Path(bot.__file__).parent

# Two words side by side: "no quota", "picture written to {}", "Slack's valid signature".
WORDS = re.compile(r"[A-Za-z]{2,}[,;:.!?)'\"]*\s+[(\"']*[A-Za-z]{2,}")
# A catalogue key, or one with a field ("grammar.value.{}"): a name, not words.
KEY = re.compile(r"[a-z_][a-z0-9_]*(?:\.(?:[a-z0-9_]+|\{\}))*")
# A /gpu example is a value: what the user types, the same in every language (up to a
# backtick that closes it as code, or the line's end).
COMMAND = re.compile(r"/gpu\b[^`\n]*")
EMOJI = re.compile(r":[a-z0-9_+-]+:")
DIRECTIVE = re.compile(r"%[A-Za-z]")  # strftime's and the log's %s
FIELD = re.compile(r"\{[^{}]*\}")  # a format's field, or an f-string's: a value

# The logger's methods: the log is the operator's, in one language to search and to quote.
LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical"})
LOGGERS = frozenset({"log", "logger", "logging", "_log"})
# Keyword arguments whose text is not said to a reader in a language:
KEYWORDS = {
    # typer's (Click's) help for commands and options: drawn by Click before the command
    # runs, so before any --lang is read; the command line's reference is English, as its
    # option names are.
    "help": "Click's help",
    "short_help": "Click's help",
    "epilog": "Click's help",
    # matplotlib's legend placement ("upper left") is a value of its API.
    "loc": "matplotlib",
}


@dataclass(frozen=True)
class Allowed:
    """A named place of bot/ that says English of its own, and why."""

    module: str  # relative to bot/
    names: frozenset[str]  # the functions, classes or constants; "*" is the whole module
    why: str


# Operators' messages of the commands that take no --lang: they set up and serve paika, and
# speak English as the log they write beside them does. A command that takes --lang (cmd,
# digest, doctor, state, init) says its messages through the catalogue in that language.
OPERATORS = (
    Allowed(
        "up.py",
        frozenset({"*"}),
        "paika up: the service an operator starts and watches in its log",
    ),
    Allowed(
        "cli.py",
        frozenset({"up", "db_upgrade", "db_current", "deploy_units", "agent_secret"}),
        "paika up, db, deploy units and agent-secret: an operator's commands, without --lang",
    ),
    Allowed(
        "cli.py",
        frozenset({"main"}),
        "a GPU host's install lacks the server's packages, PyYAML (the catalogue's reader) among them",
    ),
    Allowed(
        "http.py",
        frozenset({"events", "slack_request", "too_large"}),
        "plain-text refusals to whoever calls the events URL: Slack shows them to no one",
    ),
    Allowed(
        "digest/picture.py",
        frozenset({"FONT", "CJK_FAMILIES", "CJK_INSTALL", "CJK_INSTALL_OTHERS"}),
        "font family names, and the shell commands that install a CJK font",
    ),
)
# Proper names, the same in every language.
NAMES = {
    "Socket Mode": "Slack's name for its WebSocket connection (SlackBot.where, for the log)",
}


@dataclass(frozen=True)
class Said:
    module: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"bot/{self.module}:{self.line}: {self.text!r}"


def says_something(text: str) -> bool:
    """Whether `text` holds English words for a reader once its values are taken out."""
    if KEY.fullmatch(text) or text in NAMES:
        return False
    bare = FIELD.sub("", DIRECTIVE.sub("", EMOJI.sub("", COMMAND.sub("", text))))
    return WORDS.search(bare) is not None


def _text(node: ast.JoinedStr) -> str:
    """An f-string as it reads: its fields are values ("{}"), the text around them words."""
    return "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)


def _is_log_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in LOG_METHODS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in LOGGERS
    )


def _named(node: ast.AST) -> set[str]:
    """The names a statement gives: a function's, a class's, or an assignment's targets."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {target.id for target in node.targets if isinstance(target, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


def _walk(node: ast.AST, owners: frozenset[str]) -> Iterator[tuple[ast.AST, frozenset[str]]]:
    """Every node with the names of the statements around it, leaving out what is not said
    to a reader: docstrings, raised exceptions (for the programmer; whoever catches one
    says what it means), log calls and the keyword arguments of KEYWORDS."""
    body = getattr(node, "body", None)
    docstring = None
    if (
        isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and isinstance(body, list)
        and body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        docstring = body[0]
    for child in ast.iter_child_nodes(node):
        if child is docstring or isinstance(child, ast.Raise) or _is_log_call(child):
            continue
        if isinstance(child, ast.keyword) and child.arg in KEYWORDS:
            continue
        inner = owners | _named(child)
        yield child, inner
        if not isinstance(child, ast.JoinedStr):  # an f-string reads as one text
            yield from _walk(child, inner)


def english(module: str, source: str) -> list[Said]:
    """The English that `source` (bot/`module`) writes outside the catalogue."""
    allowed = set().union(*(a.names for a in OPERATORS if a.module == module))
    if "*" in allowed:
        return []
    found = []
    for node, owners in _walk(ast.parse(source), frozenset()):
        if owners & allowed:
            continue
        if isinstance(node, ast.JoinedStr):
            text = _text(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if says_something(text):
            found.append(Said(module, getattr(node, "lineno", 0), text))
    return found


def modules() -> list[Path]:
    return sorted(BOT.rglob("*.py"))


@pytest.mark.parametrize("path", modules(), ids=lambda path: str(path.relative_to(BOT)))
def test_no_module_of_bot_writes_english_of_its_own(path: Path) -> None:
    module = path.relative_to(BOT).as_posix()
    found = english(module, path.read_text(encoding="utf-8"))
    assert not found, "say these through the catalogue (bot/messages.yml), en and zh:\n" + (
        "\n".join(map(str, found))
    )


PLANTED = [
    # A Block Kit text field, a returned phrase, an f-string, a label table, words joined on.
    'def f() -> dict:\n    return {"type": "mrkdwn", "text": "Nothing is waiting."}',
    'def f(n: int) -> str:\n    return f"and {n} more"',
    'def f(at: str) -> str:\n    return "estimated start " + at',
    'LABELS = {"mine": "your jobs"}',
    # What the paika command prints to a reader who gave --lang.
    'def digest_command(png: str) -> None:\n    typer.echo(f"picture written to {png}", err=True)',
    # Around a /gpu example, the words are still words.
    'def f() -> str:\n    return "Run `/gpu queue mine` to see your jobs"',
]


@pytest.mark.parametrize("line", PLANTED)
def test_the_scan_finds_english_planted_in_a_module_of_bot(line: str) -> None:
    board = BOT / "blocks" / "board.py"
    source = board.read_text(encoding="utf-8") + "\n\n" + line + "\n"
    assert len(english("blocks/board.py", source)) == 1, line


def test_the_paika_commands_operator_allowance_is_only_for_commands_without_a_language() -> None:
    source = "def cmd() -> None:\n    typer.echo('paika cmd: give --user to act as', err=True)\n"
    assert len(english("cli.py", source)) == 1
    assert english("cli.py", source.replace("def cmd", "def db_upgrade")) == []


def test_the_scan_leaves_values_keys_logs_and_programmers_words_alone() -> None:
    source = "\n".join(
        [
            '"""A module docstring with many words in it."""',
            'KEY = "console.board.queue_by_class"',
            'COMPUTED = f"grammar.value.{kind}"',
            'HINT = "/gpu status #<id>"',
            'CMD = f"/gpu approve {request_id}"',
            'STAMP = "%Y-%m-%d %H:%M %Z"',
            'MARK = ":white_check_mark: "',
            'MENTION = f"<@{user}>"',
            'NAME = "paika-slack-post"',
            'MIME = "application/json"',
            'SEPARATOR = " · "',
            'def f() -> None:\n    """Words for the programmer."""\n    log.warning("could not post to %s", 1)',
            'def g() -> None:\n    raise TypeError(f"no text form for {kind}")',
            'OPTION = typer.Option("--lang", help="The language: en or zh.")',
            'LEGEND = axes.legend(loc="upper left")',
        ]
    )
    assert english("blocks/board.py", source) == []


def test_every_allowance_names_what_is_there_and_says_why() -> None:
    """An allowance outlives what it was for only as a hole: each names a module of bot/ and
    functions, classes or constants it defines."""
    for allowed in OPERATORS:
        path = BOT / allowed.module
        assert path.exists() and allowed.why.strip(), allowed
        if allowed.names == {"*"}:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = set().union(*(_named(node) for node in ast.walk(tree)))
        assert allowed.names <= defined, (allowed.module, sorted(allowed.names - defined))
    assert all(why.strip() for why in NAMES.values())
