"""Names people choose (teams, jobs, templates, projects, rounds) in any script.

A name is letters and digits of any language (what `str.isalnum` says of each character),
the marks that complete them (Hindi's vowel signs, Thai's tone marks), and '.', '_' or '-';
it starts with a letter or digit and is kept NFC-normalised, so 医疗 typed on two keyboards
is one name. Characters that would make a name read differently from what is stored are
refused by their Unicode category, naming the character and why:

- control characters (Cc): tabs, escapes, what a terminal acts on;
- format characters (Cf): bidi overrides (U+202E makes "gs-1fb" read "bf1-sg"), zero-width
  spaces and joiners (U+200B, U+200D), which make two names that look the same differ;
- private-use characters (Co): drawn differently, or not at all, from one font to the next;
- unassigned code points (Cn): no font draws them and a later Unicode may give them a meaning.

Column lengths (storage/limits.py) count characters on every backend: PostgreSQL's
varchar(n) and MariaDB's utf8mb4 varchar(n) hold n characters of up to four bytes, and
SQLite does not count. Where a name must be ASCII (an object key) storage/ encodes it.

On MySQL and MariaDB the name columns are binary-collated (storage.types.name_string,
migration 0013): their default utf8mb4 collation takes "equipe" for "équipe", and every
character beyond the BMP (𠀀, 𠀁) for every other.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from enum import StrEnum

SEPARATORS = frozenset("._-")
_MARKS = frozenset({"Mn", "Mc", "Me"})


class Unfit(StrEnum):
    """Why a character may not be in a name; each is a catalogue key grammar.char.<value>."""

    CONTROL = "control"  # Cc
    FORMAT = "format"  # Cf: bidi controls, zero-width spaces and joiners
    PRIVATE_USE = "private_use"  # Co
    UNASSIGNED = "unassigned"  # Cn
    SPACE = "space"  # Zs, Zl, Zp
    SYMBOL = "symbol"  # punctuation and symbols other than . _ -
    FIRST = "first"  # a separator or mark that starts the name


_CATEGORIES = {
    "Cc": Unfit.CONTROL,
    "Cf": Unfit.FORMAT,
    "Co": Unfit.PRIVATE_USE,
    "Cn": Unfit.UNASSIGNED,
    "Zs": Unfit.SPACE,
    "Zl": Unfit.SPACE,
    "Zp": Unfit.SPACE,
}


@dataclass(frozen=True)
class BadChar:
    """The first character of a name that may not be there: its 1-based position, its code
    point written U+XXXX, and why."""

    at: int
    code: str
    why: Unfit


def bad_char(text: str) -> BadChar | None:
    """The first character of `text` a name may not hold, or None when every one is fine."""
    for index, char in enumerate(text):
        why = _unfit(char, first=index == 0)
        if why is not None:
            return BadChar(at=index + 1, code=f"U+{ord(char):04X}", why=why)
    return None


def _unfit(char: str, *, first: bool) -> Unfit | None:
    if char.isalnum():
        return None
    category = unicodedata.category(char)
    if category in _CATEGORIES:
        return _CATEGORIES[category]
    if char in SEPARATORS or category in _MARKS:
        return Unfit.FIRST if first else None
    return Unfit.SYMBOL


def normal(text: str) -> str:
    """`text` NFC-normalised: how a name is kept and looked up."""
    return unicodedata.normalize("NFC", text)
