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

PAIKA = Path(sys.executable).with_name("paika")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_paika_up_logs_the_doctors_warnings_and_starts(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAIKA_", "SLACK_"))}
    env |= {
        "PAIKA_DATA_DIR": str(tmp_path / "data"),
        "PAIKA_AGENT_TOKEN": "agent-token-0123456789",
        "PAIKA_HTTP_PORT": str(_free_port()),
    }
    process = subprocess.Popen(
        [str(PAIKA), "up"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    out_stream = process.stdout
    reader = threading.Thread(target=lambda: [lines.put(x) for x in out_stream], daemon=True)
    reader.start()
    seen: list[str] = []
    wanted = {"up": "paika is up", "doctor": "paika doctor: ! PAIKA_CONFIG is not set"}
    try:
        deadline = time.monotonic() + 60
        while not all(any(w in line for line in seen) for w in wanted.values()):
            assert time.monotonic() < deadline, "".join(seen)
            assert process.poll() is None or not lines.empty(), "".join(seen)
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                continue
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    reader.join(timeout=10)
    out_stream.close()
    while not lines.empty():
        seen.append(lines.get())
    out = "".join(seen)
    assert process.returncode == 0, out
    doctor = next(line for line in seen if wanted["doctor"] in line)
    assert "WARNING" in doctor and "set PAIKA_CONFIG" in doctor, doctor
    assert "No admins" in out  # another of the doctor's findings
