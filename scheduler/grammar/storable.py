"""Refuse characters no database column can hold, before anything else reads the text."""

from __future__ import annotations

import re

from scheduler.grammar.errors import ParseError

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
    what = "an invisible NUL character" if char == "\x00" else "half of a broken emoji or symbol"
    subject, fix = (key, "value") if key is not None else ("The text", "command")
    raise ParseError(
        f"{subject} contains a character that cannot be stored: {what} (U+{ord(char):04X}) "
        f"at character {match.start() + 1}. Retype the {fix} without it.",
        key=key,
        example=example,
    )
