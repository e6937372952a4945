"""Request bodies are bounded: by size (413, before they are read) and by JSON nesting (400)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest
from agent_harness import TOKEN, Agent

from scheduler.agent.body import MAX_BODY_BYTES, MAX_JSON_DEPTH, json_depth
from scheduler.agent.client import AgentClient
from scheduler.agent.errors import BodyTooLarge
from scheduler.agent.protocol import JobState

AUTH = {"Authorization": f"Bearer {TOKEN}"}
CHUNK = 64 * 1024


# ---------------------------------------------------------------- depth


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("", 0),
        ("1", 0),
        ('"[[[["', 0),
        ("[]", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('["\\"[[[", ["\\\\"]]', 2),  # an escaped quote does not end the string
        ('["]]]]", [[]]]', 3),  # closing brackets inside a string do not count either
        ("[" * 5 + "]" * 5 + "[[]]", 5),
    ],
)
def test_json_depth_counts_brackets_outside_strings(text: str, depth: int) -> None:
    assert json_depth(text) == depth


def test_json_depth_does_not_recurse_on_a_million_brackets() -> None:
    assert json_depth("[" * 1_000_000) == 1_000_000


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/jobs/x/stop"])
@pytest.mark.parametrize("opener", [b"[", b'{"a":'])
def test_deeply_nested_bodies_are_400_not_500(agent: Agent, path: str, opener: bytes) -> None:
    closer = b"]" if opener == b"[" else b"}"
    body = opener * 100_000 + b"1" + closer * 100_000
    response = httpx.post(f"{agent.url}{path}", content=body, headers=AUTH)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error.startswith("body:") and "nested" in error and str(MAX_JSON_DEPTH) in error
    assert agent.store.all_jobs() == []


def test_nesting_up_to_the_bound_is_parsed_and_brackets_in_strings_do_not_count(
    agent: Agent,
) -> None:
    at_limit = {"grace_s": json.loads("[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1))}
    response = httpx.post(f"{agent.url}/v1/jobs/x/stop", json=at_limit, headers=AUTH)
    assert response.status_code == 400 and response.json()["error"].startswith("grace_s:")
    body = {"job_id": "brackets", "gpus": [0], "shell": 'true "\\"' + "[" * 1000 + '"'}
    response = httpx.post(f"{agent.url}/v1/jobs", json=body, headers=AUTH)
    assert response.status_code == 201, response.text


# ---------------------------------------------------------------- size


def _raw_exchange(url: str, head: bytes) -> bytes:
    """Send just a request head (no body) and read the answer until the agent closes."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_a_declared_length_over_the_limit_is_413_without_reading_the_body(agent: Agent) -> None:
    # The body is never sent: an agent that waited for it would time the test out.
    head = (
        "POST /v1/jobs HTTP/1.1\r\nHost: agent\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {MAX_BODY_BYTES + 1}\r\n\r\n"
    ).encode()
    answer = _raw_exchange(agent.url, head)
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 413"), answer[:200]
    error = json.loads(rest.partition(b"\r\n\r\n")[2])["error"]
    assert error.startswith("body:") and str(MAX_BODY_BYTES) in error


def test_a_body_over_the_limit_sent_with_its_length_is_413(agent: Agent) -> None:
    response = httpx.post(f"{agent.url}/v1/jobs", content=b" " * (MAX_BODY_BYTES + 1), headers=AUTH)
    assert response.status_code == 413
    assert str(MAX_BODY_BYTES) in response.json()["error"]
    # closed, so the server does not go on reading (and dropping) the rest of the body
    assert response.headers["connection"] == "close"


def test_a_chunked_body_is_cut_off_once_it_passes_the_limit(agent: Agent) -> None:
    sent = 0
    total = 4096  # 256 MiB: an agent that read it all would hold it all

    def endless() -> Iterator[bytes]:
        nonlocal sent
        for _ in range(total):
            sent += 1
            yield b" " * CHUNK

    response = httpx.post(f"{agent.url}/v1/jobs", content=endless(), headers=AUTH)
    assert response.status_code == 413, response.text
    assert str(MAX_BODY_BYTES) in response.json()["error"]
    # What is in flight fills the socket buffers at most; the rest was never taken.
    assert sent < total // 16


def test_bodies_up_to_the_limit_are_taken_chunked_or_not(agent: Agent) -> None:
    body = json.dumps({"job_id": "padded", "gpus": [0], "argv": ["true"]}).encode()
    padded = body + b" " * (MAX_BODY_BYTES - len(body))
    response = httpx.post(f"{agent.url}/v1/jobs", content=padded, headers=AUTH)
    assert response.status_code == 201, response.text

    def chunks() -> Iterator[bytes]:
        body = json.dumps({"job_id": "chunked", "gpus": [1], "argv": ["true"]}).encode()
        yield body
        for _ in range(4):
            yield b" " * CHUNK

    response = httpx.post(f"{agent.url}/v1/jobs", content=chunks(), headers=AUTH)
    assert response.status_code == 201, response.text
    assert agent.client.job("chunked").state in (JobState.RUNNING, JobState.EXITED)


def test_the_client_reports_413_as_body_too_large() -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(413, json={"error": "body: big"}))
    with AgentClient("http://a", "t", transport=transport) as client, pytest.raises(BodyTooLarge):
        client.jobs()
