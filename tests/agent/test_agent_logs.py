"""PAIKA_LOG_FORMAT=json: the agent writes one JSON object a line, with its host on every
line and the run id on the lines about a job; unknown settings are refused at start."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from agent_harness import TOKEN, wait_for
from paika_test_cli import run_paika

from scheduler.agent.observe import LogSettingError, checked, configure_logging

PAIKA = Path(sys.executable).with_name("paika")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _lines(path: Path) -> list[dict[str, object]]:
    text = path.read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_the_agent_process_logs_json_lines(tmp_path: Path) -> None:
    port, log_file = _free_port(), tmp_path / "agent.log"
    env = {
        **os.environ,
        "PAIKA_AGENT_TOKEN": TOKEN,
        "PAIKA_LOG_FORMAT": "json",
        "PAIKA_LOG_LEVEL": "info",
    }
    command = [
        str(PAIKA),
        "agent",
        "--simulate",
        "2xT4",
        "--host",
        "127.0.0.1",
        "--allow-root-jobs",
    ]
    command += ["--port", str(port), "--name", "gpu-7", "--state-dir", str(tmp_path / "state")]
    with log_file.open("w") as sink:
        process = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    url, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {TOKEN}"}
    try:
        # (its "listening on" line is written a moment before the socket is bound)
        wait_for(lambda: _answers(f"{url}/v1/health"), 30, "the agent to answer")
        start = {"job_id": "42.1", "gpus": [1], "argv": ["sleep", "30"]}
        assert httpx.post(f"{url}/v1/jobs", json=start, headers=auth).status_code == 201
        assert httpx.post(f"{url}/v1/jobs/42.1/stop", json={"grace_s": 0}, headers=auth)
        wait_for(lambda: "job 42.1 killed" in log_file.read_text(), 10, "the job's end")
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    lines = _lines(log_file)  # every line is JSON, the server's own included
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    assert all(line["host"] == "gpu-7" for line in lines)
    about_the_job = [
        line
        for line in lines
        if "42.1" in str(line["message"]) and str(line["logger"]).startswith("scheduler.agent")
    ]
    assert len(about_the_job) >= 3  # started, stopping, killed
    assert all(line["run_id"] == "42.1" for line in about_the_job)
    assert any(str(line["logger"]).startswith("uvicorn") for line in lines)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url).status_code == 200
    except httpx.TransportError:
        return False


def test_a_json_line_carries_extra_fields_and_the_traceback() -> None:
    stream = io.StringIO()
    configure_logging("json", "DEBUG", stream=stream)
    try:
        logging.getLogger("paika.test").info(
            "job #%s 多卡 started", 7, extra={"job_id": 7, "host": "gpu-1", "when": object()}
        )
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            logging.getLogger("paika.test").exception("it failed", extra={"job_id": 8})
    finally:
        configure_logging("text", "WARNING", stream=sys.stderr)
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == "job #7 多卡 started" and first["level"] == "INFO"
    assert first["job_id"] == 7 and first["host"] == "gpu-1"
    assert first["when"].startswith("<object")  # what JSON cannot hold is written as text
    assert first["time"].endswith("+00:00") and first["logger"] == "paika.test"
    assert second["job_id"] == 8 and "RuntimeError: boom" in second["exception"]


@pytest.mark.parametrize(
    ("fmt", "level", "named"),
    [("yaml", "INFO", "PAIKA_LOG_FORMAT"), ("json", "LOUD", "PAIKA_LOG_LEVEL")],
)
def test_unknown_settings_are_refused_with_the_choices(fmt: str, level: str, named: str) -> None:
    with pytest.raises(LogSettingError, match=named) as refused:
        checked(fmt, level)
    assert "use" in str(refused.value)


def test_the_agent_refuses_an_unknown_log_format_at_start(tmp_path: Path, keep_umask: None) -> None:
    env = {**os.environ, "PAIKA_AGENT_TOKEN": TOKEN, "PAIKA_LOG_FORMAT": "xml"}
    done = run_paika(["agent", "--simulate", "2xT4", "--state-dir", str(tmp_path / "s")], env)
    assert done.exit_code == 2
    assert "PAIKA_LOG_FORMAT='xml' is not known: use text or json" in done.stderr
