"""tokenize(): quoting, Slack markup and HTML entities."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.grammar import Token, tokenize
from scheduler.grammar.tokens import quote_value


def test_token_records_key_column_and_raw_text() -> None:
    assert tokenize('ready  Job="a b"') == [
        Token("ready", None, 1, "ready", False),
        Token("a b", "job", 8, 'Job="a b"', True),
    ]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("<@U012AB3CD|alice>", "<@U012AB3CD|alice>", id="user-kept-for-user-kind"),
        pytest.param("<#C0123|general>", "#general", id="channel"),
        pytest.param("<#C0123>", "#C0123", id="channel-without-name"),
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


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(alphabet=st.characters(blacklist_characters="<&"), max_size=40))
def test_quote_value_round_trips(value: str) -> None:
    [token] = tokenize("cmd=" + quote_value(value))
    assert (token.key, token.value) == ("cmd", value)
