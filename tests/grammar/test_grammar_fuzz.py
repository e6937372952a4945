"""parse() and help_for() raise ParseError and nothing else, whatever is typed, and what
they give is said in both languages."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.said import problem
from bot.usage import help_lines
from scheduler.grammar import SPEC, ParseError, help_for, parse

FRAGMENTS = [
    "submit",
    "ready",
    "queue",
    "status",
    "cancel",
    "bump",
    "approve",
    "deny",
    "done",
    "quota",
    "template",
    "save",
    "help",
    "admin",
    "team",
    "member",
    "host",
    "add",
    "list",
    "name",
    "gpus",
    "type",
    "mem",
    "hours",
    "priority",
    "data",
    "cmd",
    "metric",
    "expires",
    "owner",
    "url",
    "job",
    "topic",
    "42",
    "#7",
    "#0",
    "1e999",
    "nan",
    "-1",
    "0.5",
    "any",
    "ready",
    "core",
    "2025-02-30",
    "loss:0.3",
    ":",
    ",",
    "=",
    " ",
    "  ",
    "\n",
    "\t",
    '"',
    "'",
    "\\",
    "“",
    "”",
    "‘",
    "’",
    "„",
    "<@",
    "<@U012AB3CD|al>",
    "<#C1|x>",
    "<http://a.b|a.b>",
    "<!here>",
    "<",
    ">",
    "|",
    "&amp;",
    "&lt;",
    "&gt;",
    "&",
    "@",
    "U012AB3CD",
    "9" * 30,
]
MIXED = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=4), max_size=14).map("".join)
SETTINGS = settings(max_examples=500, deadline=None, database=None)


def _parse_only_raises_parse_error(text: str) -> None:
    try:
        parsed = parse(text)
    except ParseError as error:
        assert problem("en", error) and problem("zh", error)
    else:
        assert parsed.path in SPEC


@SETTINGS
@given(st.text())
def test_parse_any_text(text: str) -> None:
    _parse_only_raises_parse_error(text)


@SETTINGS
@given(MIXED)
def test_parse_command_like_text(text: str) -> None:
    _parse_only_raises_parse_error(text)


@SETTINGS
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=6), max_size=4))
def test_help_any_path(path: list[str]) -> None:
    try:
        shown = help_for(path)
    except ParseError as error:
        assert problem("en", error) and problem("zh", error)
    else:
        assert help_lines("en", shown) and help_lines("zh", shown)
