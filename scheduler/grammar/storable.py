"""Refuse characters no database column can hold, before anything else reads the text."""

from __future__ import annotations

import re

from scheduler.grammar.errors import Mistake, ParseError

# NUL is refused by PostgreSQL in text; a lone surrogate (half of an emoji pair, e.g. from a
# broken copy and paste) cannot be encoded as UTF-8 at all, so every driver fails on it.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def check_storable(text: str, key: str | None = None, example: str | None = None) -> None:
    """Raise ParseError if `text` holds a character that cannot be stored.

    `key` names the value the text is for; without it the text is the whole command.
    """
    match = _UNSTORABLE.search(text)
    if match is None:
        return
    char = match[0]
    # Which character it is, as a name bot/ says: an invisible NUL, or half an emoji.
    kind = "nul" if char == "\x00" else "surrogate"
    at = match.start() + 1
    code_point = f"U+{ord(char):04X}"
    if key is None:
        raise ParseError(
            Mistake.UNSTORABLE_IN_COMMAND, example=example, char=kind, code=code_point, at=at
        )
    raise ParseError(
        Mistake.UNSTORABLE_IN_VALUE, key=key, example=example, char=kind, code=code_point, at=at
    )
