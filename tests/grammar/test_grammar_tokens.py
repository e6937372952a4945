"""tokenize(): quoting, Slack markup and HTML entities."""

from __future__ import annotations

import contextlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scheduler.grammar.tokens as tokens_module
from bot.said import problem
from scheduler.grammar import ParseError, Token, tokenize
from scheduler.grammar.tokens import quote_value


def test_token_records_key_column_and_raw_text() -> None:
    assert tokenize('ready  Job="a b"') == [
        Token("ready", None, 1, "ready", False),
        Token("a b", "job", 8, 'Job="a b"', True, "Job"),
    ]


def test_dotted_keys_are_keys_and_keep_their_case() -> None:
    token = tokenize("scheduler.headroom.A100-80GB=2")[0]
    assert (token.key, token.typed_key, token.value) == (
        "scheduler.headroom.a100-80gb",
        "scheduler.headroom.A100-80GB",
        "2",
    )
    # a word with a dot that does not end in "=" stays a word; "--lr=3" is no key
    assert [t.key for t in tokenize("train.py --lr=3 a.b")] == [None, None, None]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("<@U012AB3CD|alice>", "<@U012AB3CD|alice>", id="user-kept-for-user-kind"),
        pytest.param("<#C0123|general>", "<#C0123|general>", id="channel-kept-for-its-id"),
        pytest.param("<#C0123>", "<#C0123>", id="channel-without-name"),
        pytest.param("<https://x.y/z?a=1&amp;b=2>", "https://x.y/z?a=1&b=2", id="link"),
        pytest.param("<mailto:a@b.c|a@b.c>", "a@b.c", id="mailto-label"),
        pytest.param("<http://train.py|train.py>", "train.py", id="autolinked-filename"),
        pytest.param("<!here>", "@here", id="special-mention"),
        pytest.param("&amp;lt;", "&lt;", id="entities-decoded-once"),
        pytest.param("a<b", "a<b", id="unclosed-bracket-literal"),
        pytest.param("<in.txt>", "<in.txt>", id="cli-brackets-literal"),
        pytest.param("back\\slash", "back\\slash", id="backslash-literal-unquoted"),
        pytest.param('"a\\\\b\\c"', "a\\b\\c", id="backslash-escapes-backslash-in-quotes"),
        pytest.param("„low“", "low", id="low-nine-quote"),
        pytest.param('""', "", id="empty-quoted"),
        pytest.param('"ab"cd', "abcd", id="text-after-closing-quote-joins"),
    ],
)
def test_single_value(text: str, value: str) -> None:
    [token] = tokenize(text)
    assert token.value == value


def test_quoted_value_may_hold_key_like_text() -> None:
    [token] = tokenize('"name=x"')
    assert (token.key, token.value) == (None, "name=x")


# NUL and lone surrogates (Cs) are left out: tokenize refuses them, no database stores them.
CHARACTERS = st.characters(exclude_categories=["Cs"], exclude_characters="<&\x00")


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(alphabet=CHARACTERS, max_size=40))
def test_quote_value_round_trips(value: str) -> None:
    [token] = tokenize("cmd=" + quote_value(value))
    assert (token.key, token.value) == ("cmd", value)


# ---------------------------------------------------------------- no input makes it quadratic

MEGABYTE = 1_000_000
# Each would rescan the rest of the text per character if markup lookahead were unbounded.
PATHOLOGICAL = [
    pytest.param("<", id="angles"),
    pytest.param('"', id="quotes"),
    pytest.param("=", id="equals"),
    pytest.param("<@U", id="mention-openers"),
    pytest.param("<#C1|", id="channel-openers"),
    pytest.param("&lt", id="entity-prefixes"),
    pytest.param("a=“", id="smart-quotes-after-keys"),
]


@pytest.mark.parametrize("unit", PATHOLOGICAL)
def test_a_megabyte_of_one_pattern_tokenizes(unit: str) -> None:
    # No time is asserted: quadratic work on a megabyte would take minutes, not a second.
    text = unit * (MEGABYTE // len(unit))
    try:
        tokens = tokenize(text)
    except ParseError as error:  # an unterminated quote is a fine answer too
        assert problem("en", error).startswith("Unterminated quote")
    else:
        assert "".join(token.raw for token in tokens) == text


def test_a_megabyte_of_angles_is_one_literal_value() -> None:
    [token] = tokenize("<" * MEGABYTE)
    assert token.value == "<" * MEGABYTE


class _CountingSearch:
    """Stands in for the markup-edge pattern and counts the characters its searches cover."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self._pattern = pattern
        self.scanned = 0

    def search(self, text: str, pos: int) -> re.Match[str] | None:
        match = self._pattern.search(text, pos)
        self.scanned += (match.end() if match else len(text)) - pos
        return match


@pytest.mark.parametrize(
    "text",
    [
        "<" * 100_000,
        "<" * 100_000 + ">",
        "<a" * 50_000,
        "<@U1|x" * 20_000 + ">",
        "<" + "x" * 100_000,
        "a<b " * 25_000 + ">",
        '"<' * 50_000 + '"',
    ],
)
def test_markup_lookahead_reads_each_character_at_most_twice(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Counting work instead of timing it: every character may be read by the lookahead of
    # the "<" before it, never by those of all the "<" before it.
    counter = _CountingSearch(tokens_module._MARKUP_EDGE)
    monkeypatch.setattr(tokens_module, "_MARKUP_EDGE", counter)
    with contextlib.suppress(ParseError):  # some of them leave a quote open
        tokenize(text)
    assert 0 < counter.scanned <= 2 * len(text)
