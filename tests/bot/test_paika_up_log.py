"""What `paika up` logs at its default level: what changed (a job's start and end), and
nothing for every cycle, poll or HTTP request (issue 29: at 8 hosts the scheduler's and
httpx's lines were 86,000 a day). A real `paika up` and a real simulated agent, as processes;
the chatter is still there at PAIKA_LOG_LEVEL=DEBUG."""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from paika_test_cli import run_paika
from prometheus_client.parser import text_string_to_metric_families

from bot.up import PARTS
from scheduler.agent.observe import configure_logging
from scheduler.observe.logs import CHATTER, quiet_chatter
from scheduler.settings import BUNDLED_POLICY

PAIKA = Path(sys.executable).with_name("paika")
TOKEN = "agent-token-0123456789"
CYCLES_AFTER_THE_END = 8
# A TERM (systemd's stop) ends paika up within this: every part stops at once when idle.
STOPS_WITHIN_S = 10.0
# The threads of paika up's parts, by the start of their names (scheduler/running.py's table).
PART_THREADS = (
    "MainThread",
    "paika-doctor",  # and its round's paika-doctor-hosts
    "paika-poller",
    "paika-node-agents",
    "paika-http:",
    "AnyIO worker thread",  # the HTTP server's, for /metrics and reports
    "paika-object-shipper",
    "paika-courier",
    "APScheduler",
    "paika-scheduling",
    "paika-console-socket",
    "paika-console-command",
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _cycles(base: str) -> float:
    """How many cycles `paika up` has run (its poll phases, counted by /metrics)."""
    for family in text_string_to_metric_families(httpx.get(f"{base}/metrics", timeout=5).text):
        for sample in family.samples:
            if (
                sample.name == "paika_cycle_phase_seconds_count"
                and sample.labels["phase"] == "poll"
            ):
                return sample.value
    return 0.0


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """paika's settings, with one simulated GPU host running and registered."""
    policy = yaml.safe_load(BUNDLED_POLICY.read_text(encoding="utf-8"))
    policy["scheduler"]["cycle_seconds"] = 0.5
    (tmp_path / "policy.yml").write_text(yaml.safe_dump(policy), encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PAIKA_", "SLACK_"))}
    settings = {
        **clean,
        "PAIKA_DATA_DIR": str(tmp_path / "data"),
        "PAIKA_CONFIG": str(tmp_path / "policy.yml"),
        "PAIKA_ADMINS": "UADMIN",
        "PAIKA_AGENT_TOKEN": TOKEN,
        "PAIKA_HTTP_PORT": str(_free_port()),
    }
    port = _free_port()
    agent = subprocess.Popen(
        [str(PAIKA), "agent", "--simulate", "2xA100-80GB", "--host", "127.0.0.1"]
        + ["--port", str(port), "--state-dir", str(tmp_path / "agent"), "--name", "gpu-1"]
        + ["--allow-root-jobs", "--grace-s", "1"],
        env=settings,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait(lambda: httpx.get(f"{url}/v1/health", timeout=1).status_code == 200, "the agent")
        for text in ("admin member add <@UALICE> team=vision", f"admin host add gpu-1 url={url}"):
            added = run_paika(["cmd", "--user", "UADMIN", text], settings)
            assert added.exit_code == 0, added.stdout + added.stderr
        yield settings
    finally:
        agent.terminate()
        agent.wait(timeout=30)


def _up_logs(env: dict[str, str], log_file: Path) -> list[str]:
    """Run `paika up` while a job starts and ends, then CYCLES_AFTER_THE_END more cycles, and
    stop it with a TERM, which it obeys within STOPS_WITHIN_S; its output's lines."""
    with log_file.open("w") as sink:
        up = subprocess.Popen([str(PAIKA), "up"], env=env, stdout=sink, stderr=sink)
    base = f"http://127.0.0.1:{env['PAIKA_HTTP_PORT']}"
    try:
        _wait(lambda: _cycles(base) >= 1, "paika up's first cycle")
        submit = "submit name=bert gpus=1 hours=1 priority=normal data=ready cmd='sleep 1'"
        submitted = run_paika(["cmd", "--user", "UALICE", submit], env)
        assert submitted.exit_code == 0, submitted.stdout + submitted.stderr

        def ended() -> bool:
            status = run_paika(["cmd", "--user", "UALICE", "status 1"], env)
            return "succeeded" in status.stdout or "finished" in status.stdout

        _wait(ended, "the job to end")
        then = _cycles(base)
        _wait(lambda: _cycles(base) >= then + CYCLES_AFTER_THE_END, "more cycles")
    finally:
        up.send_signal(signal.SIGTERM)
        told = time.monotonic()
        up.wait(timeout=60)
        took = time.monotonic() - told
    assert up.returncode == 0, log_file.read_text()
    assert took < STOPS_WITHIN_S, (took, log_file.read_text())
    return log_file.read_text().splitlines()


def _shape(line: str) -> str:
    """A line without its time and numbers: the same message each cycle has one shape."""
    return re.sub(r"\d+", "N", line)


def test_the_default_log_says_what_changed_and_nothing_per_cycle(
    env: dict[str, str], tmp_path: Path
) -> None:
    lines = _up_logs(env, tmp_path / "up.log")
    text = "\n".join(lines)
    assert "job_started" in text and "job #1 bert started on gpu-1" in text
    assert "host None" not in text and "job None" not in text
    assert "job_finished" in text and "job #1 bert finished" in text
    assert "paika is up" in text and "paika stopped." in text
    # Each part of the running service (no Slack here) said it stopped, in reverse order.
    stopped = [line for line in lines if re.search(r"\b\w+ stopped \(\d+\.\d+ s\)", line)]
    said = [re.findall(r"(\w+) stopped \(", line)[0] for line in stopped]
    assert said == [part for part in reversed(PARTS) if part != "slack"], stopped
    shapes = Counter(_shape(line) for line in lines)
    # At least CYCLES_AFTER_THE_END cycles ran (and as many polls of the host): a line that
    # comes with each would be there as often.
    assert max(shapes.values()) < CYCLES_AFTER_THE_END // 2, shapes.most_common(3)
    assert "HTTP Request" not in text and "Running job" not in text, text


def test_the_chatter_is_there_at_debug(env: dict[str, str], tmp_path: Path) -> None:
    lines = _up_logs({**env, "PAIKA_LOG_LEVEL": "DEBUG"}, tmp_path / "up.log")
    text = "\n".join(lines)
    assert "HTTP Request: GET" in text and "/v1/status" in text
    assert 'Running job "Periodic.tick' in text
    # Once started, every thread of paika up is one of its parts'.
    threads = next(line for line in lines if " paika: threads: " in line)
    names = threads.split(" paika: threads: ", 1)[1].split(", ")
    assert [name for name in names if not name.startswith(PART_THREADS)] == [], threads


@pytest.mark.parametrize(
    ("level", "chatty"), [("INFO", False), ("WARNING", False), ("DEBUG", True)]
)
def test_the_chatter_loggers_follow_the_level(level: str, chatty: bool) -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level, {name: logging.getLogger(name).level for name in CHATTER}
    try:
        configure_logging("text", level)
        quiet_chatter()
        for name in CHATTER:
            assert logging.getLogger(name).isEnabledFor(logging.INFO) is chatty, name
            assert logging.getLogger(name).isEnabledFor(logging.WARNING), name
    finally:
        root.handlers[:], root.level = saved[0], saved[1]
        for name, was in saved[2].items():
            logging.getLogger(name).setLevel(was)
