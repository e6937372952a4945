"""`paika up` runs paika doctor's checks as it starts and logs what is not fine as warnings,
without holding the start up: a real process, on the bundled example policy."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from fake_slack import BOT_TOKEN, SIGNING_SECRET
from fake_slack.slack_server import FakeSlack

from scheduler.running import ALL_STOPPED_WITHIN_S

PAIKA = Path(sys.executable).with_name("paika")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_up_until(env: dict[str, str], wanted: list[str]) -> list[str]:
    """Start paika up, read its lines until each of `wanted` is in one, stop it (SIGINT);
    its lines, after it exited 0."""
    process = subprocess.Popen(
        [str(PAIKA), "up"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    out_stream = process.stdout
    reader = threading.Thread(target=lambda: [lines.put(x) for x in out_stream], daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while not all(any(w in line for line in seen) for w in wanted):
            assert time.monotonic() < deadline, "".join(seen)
            assert process.poll() is None or not lines.empty(), "".join(seen)
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                continue
    finally:
        process.send_signal(signal.SIGINT)
        # paika up promises every part stopped within ALL_STOPPED_WITHIN_S (45 s): a busy
        # machine may take that long, and only longer is a fault.
        process.wait(timeout=ALL_STOPPED_WITHIN_S + 15)
    reader.join(timeout=10)
    out_stream.close()
    while not lines.empty():
        seen.append(lines.get())
    assert process.returncode == 0, "".join(seen)
    return seen


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAIKA_", "SLACK_"))}
    return env | {
        "PAIKA_DATA_DIR": str(tmp_path / "data"),
        "PAIKA_AGENT_TOKEN": "agent-token-0123456789",
        "PAIKA_HTTP_PORT": str(_free_port()),
    }


def test_paika_up_logs_the_doctors_warnings_and_starts(tmp_path: Path) -> None:
    wanted = "paika doctor: ! PAIKA_CONFIG is not set"
    seen = _run_up_until(_env(tmp_path), ["paika is up", wanted])
    doctor = next(line for line in seen if wanted in line)
    assert "WARNING" in doctor and "set PAIKA_CONFIG" in doctor, doctor
    assert "No admins" in "".join(seen)  # another of the doctor's findings


def test_paika_up_with_slack_logs_that_no_digest_channel_is_set(
    tmp_path: Path, slack: FakeSlack
) -> None:
    env = _env(tmp_path) | {
        "PAIKA_SLACK_API_URL": slack.api_url,
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
    }
    wanted = "paika doctor: ! slack.channel is not set"
    seen = _run_up_until(env, ["paika is up", wanted])
    assert "no daily digest" in next(line for line in seen if wanted in line)
