"""Block Kit pieces every builder shares, and the limits Slack enforces on them.

Builders return plain dicts in the shapes Slack documents. Whatever does not fit a limit
is summarised in words by the builder that knows what it left out; `fit` is the last
guard for one oversized value, and it too marks the cut.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# Limits from Slack's Block Kit reference.
MESSAGE_BLOCKS = 50
VIEW_BLOCKS = 100
SECTION_TEXT = 3000
FIELD_TEXT = 2000
SECTION_FIELDS = 10
HEADER_TEXT = 150
CONTEXT_ELEMENTS = 10
BUTTON_TEXT = 75
MODAL_TITLE = 24
MODAL_BUTTON = 24
ID_LENGTH = 255
VALUE_LENGTH = 2000
OPTION_TEXT = 75
OPTION_VALUE = 150
SELECT_OPTIONS = 100
PLACEHOLDER_TEXT = 150
LABEL_TEXT = 2000
HINT_TEXT = 2000
INPUT_ERROR_TEXT = 150
# Our own bound on a message's total text: Slack refuses very long messages (msg_too_long)
# long before 50 full sections, and nobody reads a reply many screens long.
MESSAGE_CHARS = 12_000
# Room kept for the line that summarises what a listing left out.
SUMMARY_ROOM = 500

Block = dict[str, Any]

ELLIPSIS = "…"

_USER_MENTION = re.compile(r"<@[UW][A-Z0-9]{2,}>")


@dataclass(frozen=True)
class Message:
    """A Slack message: the notification text and the blocks shown."""

    text: str
    blocks: list[Block] = field(default_factory=list)


def mrkdwn_escape(text: str) -> str:
    """Escape &, < and > so user text cannot become a mention, a channel ping or a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_keeping_mentions(text: str) -> str:
    """Escape text paika wrote itself, keeping its user mentions (<@U…>) clickable.

    The service's English replies name people as <@U…>; everything else in them, such as
    a quoted value the user typed, is escaped like any user text.
    """
    parts: list[str] = []
    end = 0
    for match in _USER_MENTION.finditer(text):
        parts.append(mrkdwn_escape(text[end : match.start()]))
        parts.append(match.group())
        end = match.end()
    parts.append(mrkdwn_escape(text[end:]))
    return "".join(parts)


def code(text: str) -> str:
    """User text as an inline code span, escaped."""
    # A backtick would close the span early; the look-alike keeps the text readable.
    return "`" + mrkdwn_escape(text.replace("`", "ˋ")) + "`"


def code_block(text: str, limit: int = SECTION_TEXT - 400) -> str:
    """User text as a preformatted block, escaped, within `limit` once escaped."""
    raw = text.replace("```", "ˋˋˋ")
    escaped = mrkdwn_escape(raw)
    while slack_len(escaped) > limit - 6:
        # Escaping can grow a character fivefold (& → &amp;), so shorten the raw text
        # and escape again rather than cut an entity in half.
        raw = fit(raw, max(1, len(raw) - (slack_len(escaped) - (limit - 6))))
        escaped = mrkdwn_escape(raw)
    return "```" + escaped + "```"


def mention(user_id: str | None) -> str:
    """A user mention; only a well-formed Slack user id becomes one."""
    if user_id and re.fullmatch(r"[UW][A-Z0-9]{2,}", user_id):
        return f"<@{user_id}>"
    return mrkdwn_escape(user_id or "-")


def slack_len(text: str) -> int:
    """Length as Slack may count it: characters beyond the BMP (most emoji) count twice."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def fit(text: str, limit: int) -> str:
    """`text` if it fits `limit`, else its start with a visible mark of the cut."""
    if slack_len(text) <= limit:
        return text
    kept: list[str] = []
    size = 0
    for char in text:
        size += 2 if ord(char) > 0xFFFF else 1
        if size > limit - len(ELLIPSIS):
            break
        kept.append(char)
    return "".join(kept) + ELLIPSIS


def plain(text: str, limit: int = SECTION_TEXT) -> dict[str, Any]:
    """A plain_text object (Slack does not parse mentions or links in it)."""
    return {"type": "plain_text", "text": fit(text, limit) or " ", "emoji": True}


def mrkdwn(text: str, limit: int = SECTION_TEXT) -> dict[str, Any]:
    """A mrkdwn text object; callers escape user text in it."""
    return {"type": "mrkdwn", "text": fit(text, limit) or " "}


def header(text: str) -> Block:
    """A header block (plain text, so job names need no escaping)."""
    return {"type": "header", "text": plain(text, HEADER_TEXT)}


def section(text: str, *, accessory: dict[str, Any] | None = None) -> Block:
    """A section of mrkdwn text."""
    block: Block = {"type": "section", "text": mrkdwn(text)}
    if accessory is not None:
        block["accessory"] = accessory
    return block


def fields(items: Sequence[str]) -> Block:
    """A section of up to ten short mrkdwn fields, shown in two columns."""
    shown = list(items[:SECTION_FIELDS])
    if len(items) > SECTION_FIELDS:  # callers pass few; never drop one without a trace
        shown[-1] = "\n".join(items[SECTION_FIELDS - 1 :])
    return {"type": "section", "fields": [mrkdwn(item, FIELD_TEXT) for item in shown]}


def labelled(label: str, value: str) -> str:
    """One field: a bold label over its value."""
    return f"*{label}*\n{value}"


def context(*texts: str) -> Block:
    """A context block (small grey text); more than ten pieces share the last element."""
    pieces = [text for text in texts if text]
    if len(pieces) > CONTEXT_ELEMENTS:
        pieces[CONTEXT_ELEMENTS - 1 :] = [" · ".join(pieces[CONTEXT_ELEMENTS - 1 :])]
    return {"type": "context", "elements": [mrkdwn(text) for text in pieces or [" "]]}


def divider() -> Block:
    """A thin rule between parts of a message."""
    return {"type": "divider"}


def button(
    text: str,
    action_id: str,
    value: str | None = None,
    *,
    style: str | None = None,
    confirm: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A button; `value` comes back to the listener with the click."""
    element: dict[str, Any] = {
        "type": "button",
        "text": plain(text, BUTTON_TEXT),
        "action_id": action_id,
    }
    if value is not None:
        if len(value) > VALUE_LENGTH:
            raise ValueError(f"button value of {len(value)} characters")
        element["value"] = value
    if style is not None:
        element["style"] = style
    if confirm is not None:
        element["confirm"] = confirm
    return element


def confirm_dialog(
    title: str, text: str, yes: str, no: str, *, style: str = "danger"
) -> dict[str, Any]:
    """The "are you sure?" dialog a button can ask before it acts."""
    return {
        "title": plain(title, 100),
        "text": mrkdwn(text, 300),
        "confirm": plain(yes, 30),
        "deny": plain(no, 30),
        "style": style,
    }


def actions(block_id: str, *elements: dict[str, Any]) -> Block:
    """A row of buttons; listeners match clicks by their action ids."""
    return {"type": "actions", "block_id": block_id, "elements": list(elements)}


def option(text: str, value: str) -> dict[str, Any]:
    """One choice of a select menu or radio group."""
    if len(value) > OPTION_VALUE:
        raise ValueError(f"option value of {len(value)} characters")
    return {"text": plain(text, OPTION_TEXT), "value": value}


def pack(lines: Sequence[str], limit: int = SECTION_TEXT) -> list[list[str]]:
    """Lines grouped, in order, into runs whose joined text fits `limit`.

    A line longer than `limit` on its own is shortened with a visible mark.
    """
    runs: list[list[str]] = []
    size = 0
    for line in lines:
        line = fit(line, limit)
        length = slack_len(line)
        if runs and size + 1 + length <= limit:
            runs[-1].append(line)
            size += 1 + length
        else:
            runs.append([line])
            size = length
    return runs


def listing(
    lines: Sequence[str],
    budget: int,
    summary: Callable[[int], str],
    *,
    total: int | None = None,
    chars: int = MESSAGE_CHARS,
    heading: str = "",
) -> list[Block]:
    """Lines packed into sections: at most `budget` blocks and about `chars` characters.

    `total` is how many items there are when `lines` already holds only the first few.
    When not every item is shown, the last block says what was left out:
    `summary(shown)` gets how many lines were shown and returns the words for the rest.
    """
    if budget < 1:
        return []
    total = len(lines) if total is None else total
    texts = [heading, *lines] if heading else list(lines)
    runs = pack(texts)
    size = sum(slack_len(text) + 1 for text in texts)
    if len(lines) >= total and len(runs) <= budget and size <= chars:
        return [section("\n".join(run)) for run in runs]
    room = chars - SUMMARY_ROOM
    kept: list[list[str]] = []
    used = 0
    for run in runs[: budget - 1]:
        take: list[str] = []
        for text in run:
            if used + slack_len(text) + 1 > room:
                break
            take.append(text)
            used += slack_len(text) + 1
        if take:
            kept.append(take)
        if len(take) < len(run):
            break
    shown = sum(len(run) for run in kept) - (1 if heading and kept else 0)
    if heading and not kept:
        kept = [[heading]] if budget > 1 else []
    rest = section(fit(summary(shown), SUMMARY_ROOM))
    return [section("\n".join(run)) for run in kept] + [rest]


def text_size(blocks: Sequence[Block]) -> int:
    """Characters of text in `blocks` (for the message-size bound)."""
    size = 0
    for block in blocks:
        parts = [block.get("text"), *block.get("fields", []), *block.get("elements", [])]
        size += sum(
            len(part["text"]) for part in parts if part and isinstance(part.get("text"), str)
        )
    return size
