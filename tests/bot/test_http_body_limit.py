"""Bodies larger than Slack ever sends are refused (413) before they are read, over real HTTP."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
from conftest import MEMBER, Bot, text_of
from fake_slack import SIGNING_SECRET, signing

from bot.http import MAX_BODY_BYTES

CHUNK = 64 * 1024


def _exchange(url: str, head: str, parts: Iterator[bytes]) -> bytes:
    """Send a raw request (headers, then body parts as given) and read the response's head.

    The socket's timeout stands for "the server is still waiting for the rest of the body".
    """
    where = urlsplit(url)
    with socket.create_connection((where.hostname, where.port), timeout=10) as sock:
        sock.sendall(head.encode())
        for part in parts:
            sock.sendall(part)
        answer = b""
        while b"\r\n\r\n" not in answer:
            got = sock.recv(4096)
            if not got:
                break
            answer += got
    return answer


def _head(url: str, framing: str) -> str:
    where = urlsplit(url)
    return (
        f"POST {where.path} HTTP/1.1\r\nHost: {where.netloc}\r\n"
        f"Content-Type: application/x-www-form-urlencoded\r\n{framing}\r\n\r\n"
    )


def _chunked(total: int) -> Iterator[bytes]:
    """`total` bytes in HTTP chunks, without the final empty chunk: the body never ends."""
    while total > 0:
        size = min(CHUNK, total)
        yield f"{size:x}\r\n".encode() + b"a" * size + b"\r\n"
        total -= size


def test_a_body_declared_too_large_is_refused_before_a_byte_of_it_is_sent(bot: Bot) -> None:
    head = _head(bot.url, f"Content-Length: {10 * MAX_BODY_BYTES}")
    answer = _exchange(bot.url, head, iter(()))
    assert answer.startswith(b"HTTP/1.1 413"), answer


def test_a_chunked_body_is_cut_off_as_soon_as_it_crosses_the_limit(bot: Bot) -> None:
    head = _head(bot.url, "Transfer-Encoding: chunked")
    # Exactly one byte over the limit, and no end: only a server that stops reading answers.
    answer = _exchange(bot.url, head, _chunked(MAX_BODY_BYTES + 1))
    assert answer.startswith(b"HTTP/1.1 413"), answer


def test_chunked_bodies_within_the_limit_are_still_checked_by_signature(bot: Bot) -> None:
    body, headers = signing.slash_command(
        SIGNING_SECRET, "queue", user_id=MEMBER, response_url=bot.slack.response_url("r")
    )
    with httpx.Client(trust_env=False, timeout=20) as client:
        # A generator makes httpx send the body chunked, with no Content-Length.
        signed = client.post(bot.url, content=iter([body.encode()]), headers=headers)
        forged = client.post(
            bot.url, content=iter([body.encode()]), headers=signing.without_signature(headers)
        )
    assert signed.request.headers.get("transfer-encoding") == "chunked"
    assert (signed.status_code, signed.text) == (200, "")
    assert forged.status_code == 401
    assert "Nothing is waiting" in text_of(bot.slack.wait_for_response("r")[0])
