"""`paika up` with Slack settings: a real process serving Slack in HTTP mode."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from conftest import text_of
from fake_slack import BOT_TOKEN, SIGNING_SECRET, signing
from fake_slack.slack_server import FakeSlack

PAIKA = Path(sys.executable).with_name("paika")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(tmp_path: Path, slack: FakeSlack, port: int) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PAIKA_", "SLACK_"))}
    return {
        **clean,
        "PAIKA_DATA_DIR": str(tmp_path / "data"),
        "PAIKA_AGENT_TOKEN": "agent-token-0123456789",
        "PAIKA_HTTP_PORT": str(port),
        "PAIKA_SLACK_API_URL": slack.api_url,
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
    }


def test_paika_up_serves_slack_over_http(tmp_path: Path, slack: FakeSlack) -> None:
    port = _free_port()
    process = subprocess.Popen(
        [str(PAIKA), "up"],
        env=_env(tmp_path, slack, port),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).json() == {"ok": True}:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None, process.communicate()[0]
            assert time.monotonic() < deadline, "paika up did not start serving"
            time.sleep(0.1)
        body, headers = signing.slash_command(
            SIGNING_SECRET, "help", response_url=slack.response_url("up")
        )
        assert signing.post(f"{base}/slack/events", body, headers).status_code == 200
        assert "/gpu submit" in text_of(slack.wait_for_response("up", timeout=10)[0])
        forged = signing.slash_command("wrong-secret", "help")
        assert signing.post(f"{base}/slack/events", *forged).status_code == 401
    finally:
        process.send_signal(signal.SIGINT)
        output = process.communicate(timeout=30)[0]
    assert process.returncode == 0, output
    assert f"Slack on http://127.0.0.1:{port}/slack/events" in output
    # A new database: each migration applied is in the log, which is set up before them.
    assert "Running upgrade" in output


def test_paika_up_without_a_signing_secret_says_what_to_set(
    tmp_path: Path, slack: FakeSlack
) -> None:
    env = _env(tmp_path, slack, _free_port())
    del env["SLACK_SIGNING_SECRET"]
    done = subprocess.run(
        [str(PAIKA), "up"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert "SLACK_SIGNING_SECRET" in done.stderr
