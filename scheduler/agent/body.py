"""Reading a request's JSON body within bounds: its size and its nesting depth.

Size: a declared Content-Length over MAX_BODY_BYTES is refused before a byte of the body is
read; a body without one (chunked) is read as it streams in and refused as soon as it passes
the limit, so the agent never holds more than the limit. Both are BodyTooLarge (413).

Depth: a recursive JSON reader recurses once per nesting level (json.loads ends in
RecursionError, a 500, on a few hundred kilobytes of '['; pydantic's reader stops at its own
limit). The depth is measured first, by a linear scan of the brackets outside strings, and
anything deeper than MAX_JSON_DEPTH is BadRequest (400) before any reader sees it.
No request of the protocol nests deeper than 3.
"""

from __future__ import annotations

import re
from itertools import accumulate

from starlette.requests import Request

from scheduler.agent.errors import BadRequest, BodyTooLarge

MAX_BODY_BYTES = 1024 * 1024
MAX_JSON_DEPTH = 32

# A JSON string, escapes included. The closing quote is optional so that a string left open
# runs to the end of the text: a match attempt then never fails after a long scan, and the
# whole scan stays linear (with the quote required, '"\\"\\"\\"…' took quadratic time).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth(text: str) -> int:
    """How deep the brackets of a JSON text nest, not counting those inside strings.

    Linear, without recursion. It reads strings as json.loads does, up to the first point
    where json.loads gives up on invalid JSON (a string left open runs to the end of the
    text; json.loads never parses past it), so a text that passes the check cannot make
    json.loads recurse deeper."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request body, or BodyTooLarge as soon as it is known to be over `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"body: {declared} bytes is more than the agent takes ({limit} bytes)")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"body: more than the agent takes ({limit} bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


async def json_text(request: Request, *, empty_ok: bool) -> str:
    """The request body as JSON text for a model to read, its nesting checked; an empty body
    is "{}" with `empty_ok`, else BadRequest. (Whether it is valid JSON is for the reader.)"""
    body = await read_body(request)
    try:
        # RFC 8259: JSON between systems is UTF-8. Decoding first also means the depth scan
        # sees the same characters the JSON reader will.
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"body: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if not text.strip():
        if empty_ok:
            return "{}"
        raise BadRequest("body: expected a JSON object, got nothing")
    if json_depth(text) > MAX_JSON_DEPTH:
        raise BadRequest(f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return text
