"""Split /gpu command text into words and key=value pairs, undoing Slack's escaping."""

from __future__ import annotations

import re
from dataclasses import dataclass

from scheduler.grammar.errors import Mistake, ParseError
from scheduler.grammar.storable import check_storable

# Closing quotes accepted for each opening quote. Slack clients "smarten" straight quotes and
# some keyboards produce mirrored or low-9 forms, so a curly opener takes either curly closer.
_CLOSERS: dict[str, str] = {
    '"': '"',
    "'": "'",
    "\u201c": "\u201d\u201c",  # “ … ”
    "\u201d": "\u201d\u201c",  # ” … ”
    "\u201e": "\u201c\u201d",  # „ … “
    "\u2018": "\u2019\u2018",  # ‘ … ’
    "\u2019": "\u2019\u2018",  # ’ … ’
}
_QUOTES = frozenset(_CLOSERS)
# A key is a word; a dotted one (`scheduler.cycle_seconds`, `scheduler.headroom.A100-80GB`)
# names a value inside a policy document, for the commands that take free keys.
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_][A-Za-z0-9_-]*)+|[A-Za-z_]+)=")
_ENTITY = re.compile(r"&(amp|lt|gt);")
_ENTITY_CHARS = {"amp": "&", "lt": "<", "gt": ">"}

# What Slack wraps in <...>. A raw "<" only ever comes from Slack (it escapes typed ones as
# &lt;), but CLI text is not escaped, so anything else in angle brackets stays literal.
_USER = re.compile(r"@[UW][A-Z0-9]+(?:\|[^>]*)?")
_CHANNEL = re.compile(r"#(C[A-Z0-9]+)(?:\|([^>]*))?")
_SPECIAL = re.compile(r"!([^|>]+)(?:\|([^>]*))?")
_LINK = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*:[^\s|>]+)(?:\|([^>]*))?")
# Where a <...> candidate ends: its ">", or the next "<", which means it is not markup. Stopping
# at the next "<" keeps tokenizing linear: looking for ">" alone rereads the rest of the text
# for every "<" (a megabyte of "<" took tens of seconds).
_MARKUP_EDGE = re.compile(r"[<>]")
# A run of characters that need no attention outside quotes, read in one step.
_PLAIN = re.compile(r"[^\s<&]+")

_SNIPPET = 24


@dataclass(frozen=True)
class Token:
    """One word or key=value pair; `value` is unquoted, unescaped and unwrapped."""

    value: str
    key: str | None
    column: int  # 1-based position in the text, for messages
    raw: str  # as typed, for messages
    quoted: bool
    typed_key: str | None = None  # the key as typed: free keys keep their case (A100-80GB)


def tokenize(text: str) -> list[Token]:
    """Split command text on whitespace, honouring quotes and Slack's markup.

    Text holding a character no database can store is refused first, whatever it is for.
    """
    check_storable(text)
    tokens: list[Token] = []
    index = 0
    while index < len(text):
        if text[index].isspace():
            index += 1
            continue
        token, index = _read_token(text, index)
        tokens.append(token)
    return tokens


def quote_value(value: str) -> str:
    """Write `value` so that tokenize reads it back as one value."""
    if value and not any(ch.isspace() for ch in value) and value[0] not in _QUOTES:
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def decode_entities(text: str) -> str:
    """Undo Slack's HTML escaping of &, < and > in one pass, so &amp;lt; stays &lt;."""
    return _ENTITY.sub(lambda match: _ENTITY_CHARS[match[1]], text)


def _read_token(text: str, start: int) -> tuple[Token, int]:
    key_match = _KEY.match(text, start)
    key = key_match[1].lower() if key_match else None
    index = key_match.end() if key_match else start
    parts: list[str] = []
    # A quote opens a quoted value only where a value starts, so "it's" needs no quoting.
    quoted = index < len(text) and text[index] in _QUOTES
    if quoted:
        piece, index = _read_quoted(text, index)
        parts.append(piece)
    while index < len(text) and not text[index].isspace():
        if plain := _PLAIN.match(text, index):
            parts.append(plain[0])
            index = plain.end()
            continue
        piece, index = _read_piece(text, index)
        parts.append(piece)
    typed = key_match[1] if key_match else None
    token = Token("".join(parts), key, start + 1, text[start:index], quoted, typed)
    return token, index


def _read_quoted(text: str, opening: int) -> tuple[str, int]:
    """Read a quoted value whose opening quote is at `opening`; return it and the next index."""
    closers = _CLOSERS[text[opening]]
    parts: list[str] = []
    index = opening + 1
    while index < len(text):
        char = text[index]
        following = text[index + 1] if index + 1 < len(text) else ""
        if char == "\\" and following and (following in _QUOTES or following == "\\"):
            parts.append(following)
            index += 2
        elif char in closers:
            return "".join(parts), index + 1
        else:
            piece, index = _read_piece(text, index)
            parts.append(piece)
    raise _unterminated(text, opening)


def _read_piece(text: str, index: int) -> tuple[str, int]:
    """Read one character, Slack entity (&amp;) or Slack markup (<...>) at `index`."""
    char = text[index]
    if char == "<":
        markup = _slack_markup(text, index)
        if markup is not None:
            return markup
    if char == "&":
        match = _ENTITY.match(text, index)
        if match:
            return _ENTITY_CHARS[match[1]], match.end()
    return char, index + 1


def _slack_markup(text: str, index: int) -> tuple[str, int] | None:
    """Unwrap <...> markup at `index` into what the person typed, or None if it is not markup."""
    edge = _MARKUP_EDGE.search(text, index + 1)
    if edge is None or edge[0] == "<":
        return None
    end = edge.start()
    inner = text[index + 1 : end]
    after = end + 1
    if _USER.fullmatch(inner):
        return text[index:after], after  # the user kind reads the id out of the mention
    if _CHANNEL.fullmatch(inner):
        # Kept whole, like a user: the channel kind keeps its id (a rename changes the name).
        return text[index:after], after
    if match := _SPECIAL.fullmatch(inner):
        return (decode_entities(match[2]) if match[2] else "@" + match[1]), after
    if match := _LINK.fullmatch(inner):
        # The label is what was typed: Slack links "train.py" as <http://train.py|train.py>.
        return decode_entities(match[2] or match[1]), after
    return None


def _unterminated(text: str, opening: int) -> ParseError:
    quote = text[opening]
    near = text[opening : opening + _SNIPPET]
    if len(text) - opening > _SNIPPET:
        near += "…"
    return ParseError(
        Mistake.UNTERMINATED_QUOTE,
        example='cmd="python train.py --lr 3e-4"',
        quote=quote,
        at=opening + 1,
        near=near,
        closer=_CLOSERS[quote][0],
    )
