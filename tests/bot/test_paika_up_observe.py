"""`paika up` as a real process, in HTTP mode and in Socket Mode: /metrics parses with
Prometheus' own parser and counts the acks, /healthz answers after a cycle, and with
PAIKA_LOG_FORMAT=json every line it writes is a JSON object."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import yaml
from fake_slack import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, signing
from fake_slack.slack_server import FakeSlack
from prometheus_client.parser import text_string_to_metric_families

from scheduler.running import ALL_STOPPED_WITHIN_S
from scheduler.settings import BUNDLED_POLICY

PAIKA = Path(sys.executable).with_name("paika")


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


def _policy(tmp_path: Path) -> Path:
    policy = yaml.safe_load(BUNDLED_POLICY.read_text())
    policy["scheduler"]["cycle_seconds"] = 0.5
    path = tmp_path / "policy.yml"
    path.write_text(yaml.safe_dump(policy))
    return path


def _samples(base: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = httpx.get(f"{base}/metrics", timeout=5).text
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def _acks(base: str) -> float:
    return sum(
        value
        for labels, value in _samples(base).get("paika_slack_ack_seconds_count", [])
        if labels["kind"] == "command"
    )


@pytest.mark.parametrize("mode", ["http", "socket"])
def test_paika_up_serves_metrics_and_health_and_logs_json(
    tmp_path: Path, slack: FakeSlack, mode: str
) -> None:
    port = _free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PAIKA_", "SLACK_"))}
    env = {
        **clean,
        "PAIKA_DATA_DIR": str(tmp_path / "data"),
        "PAIKA_CONFIG": str(_policy(tmp_path)),
        "PAIKA_AGENT_TOKEN": "agent-token-0123456789",
        "PAIKA_HTTP_PORT": str(port),
        "PAIKA_SLACK_API_URL": slack.api_url,
        "PAIKA_LOG_FORMAT": "json",
        "PAIKA_LOG_LEVEL": "DEBUG",
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        **(
            {"SLACK_APP_TOKEN": APP_TOKEN}
            if mode == "socket"
            else {"SLACK_SIGNING_SECRET": SIGNING_SECRET}
        ),
    }
    log_file = tmp_path / "up.log"
    with log_file.open("w") as sink:
        process = subprocess.Popen([str(PAIKA), "up"], env=env, stdout=sink, stderr=sink)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: httpx.get(f"{base}/healthz").status_code == 200, "paika up to serve")
        _wait(
            lambda: httpx.get(f"{base}/healthz").json()["last_cycle_at"] is not None,
            "a cycle to run",
        )
        health = httpx.get(f"{base}/healthz").json()
        assert health["leader"] is True and health["status"] == "ok"
        if mode == "http":
            body, headers = signing.slash_command(
                SIGNING_SECRET, "help", response_url=slack.response_url("up")
            )
            assert signing.post(f"{base}/slack/events", body, headers).status_code == 200
        else:
            server = slack.socket_mode
            assert server is not None
            server.wait_connected()
            fields = signing.slash_command_fields("help", response_url=slack.response_url("up"))
            server.wait_for_ack(server.push_slash_command(fields))
        slack.wait_for_response("up", timeout=10)
        _wait(lambda: _acks(base) >= 1, "the ack to be counted")
        samples = _samples(base)
        assert [v for _, v in samples["paika_leader"]] == [1.0]
        assert abs(samples["paika_last_cycle_timestamp_seconds"][0][1] - time.time()) < 60
        phases = {labels["phase"] for labels, _ in samples["paika_cycle_phase_seconds_count"]}
        assert {"poll", "policy", "admit"} <= phases
        assert "paika_outbox_backlog" in samples
        buckets = [
            v for labels, v in samples["paika_slack_ack_seconds_bucket"] if labels["le"] == "3.0"
        ]
        assert buckets == [1.0] or buckets[0] >= 1  # acked within Slack's 3 s
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=ALL_STOPPED_WITHIN_S + 15)  # its parts' bound, and a margin
    assert process.returncode == 0, log_file.read_text()
    lines = [json.loads(line) for line in log_file.read_text().splitlines() if line.strip()]
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    up = [line for line in lines if str(line["message"]).startswith("paika is up")]
    assert len(up) == 1 and f"{base}/metrics" in str(up[0]["message"])
    assert any(line["message"] == "paika stopped." for line in lines)
