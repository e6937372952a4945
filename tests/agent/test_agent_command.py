"""`paika agent`: token rules, startup errors, and what it hands to uvicorn."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
import uvicorn
from typer.testing import CliRunner

from scheduler.agent.command import agent
from scheduler.agent.nvml import load_pynvml
from scheduler.serving import serve_in_thread, stop_server


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command("agent")(agent)

    @app.command("other")
    def other() -> None:  # a second command, so "agent" stays a subcommand as in paika
        pass

    return app


@pytest.fixture(autouse=True)
def _keep_umask(keep_umask: None) -> None:
    """`paika agent` sets the process's umask; these tests run it in pytest's process."""


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace uvicorn.run: record what the command would serve."""
    calls: list[dict[str, Any]] = []

    def fake_run(app: Any, **kwargs: Any) -> None:
        calls.append({"app": app, **kwargs})

    monkeypatch.setattr(uvicorn, "run", fake_run)
    return calls


def test_the_agent_refuses_to_start_without_a_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: list[dict[str, Any]]
) -> None:
    monkeypatch.delenv("PAIKA_AGENT_TOKEN", raising=False)
    result = CliRunner().invoke(
        _cli(), ["agent", "--simulate", "1xT4", "--state-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "PAIKA_AGENT_TOKEN" in result.output and "--insecure-no-token" in result.output
    assert served == []


def test_insecure_mode_listens_on_loopback_only_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: list[dict[str, Any]]
) -> None:
    monkeypatch.delenv("PAIKA_AGENT_TOKEN", raising=False)
    args = ["agent", "--simulate", "2xT4", "--insecure-no-token", "--host", "0.0.0.0"]
    result = CliRunner().invoke(_cli(), [*args, "--state-dir", str(tmp_path), "--port", "9999"])
    assert result.exit_code == 0, result.output
    assert "NO AUTHENTICATION" in result.output
    assert (served[0]["host"], served[0]["port"]) == ("127.0.0.1", 9999)


def test_the_served_app_uses_the_token_and_the_simulated_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: list[dict[str, Any]]
) -> None:
    monkeypatch.setenv("PAIKA_AGENT_TOKEN", "tok")
    args = ["agent", "--simulate", "4xA100-80GB", "--name", "node-7", "--port", "8471"]
    result = CliRunner().invoke(_cli(), [*args, "--state-dir", str(tmp_path / "st")])
    assert result.exit_code == 0, result.output
    assert "4 GPU(s)" in result.output and "[simulated]" in result.output
    # Without TLS the default address is loopback (plain HTTP stays on this machine).
    assert (served[0]["host"], served[0]["port"]) == ("127.0.0.1", 8471)
    assert (tmp_path / "st" / "jobs.json").exists()
    # The job store was closed when uvicorn returned; the app still answers reads.
    server, thread, port = serve_in_thread(served[0]["app"])
    try:
        health = httpx.get(f"http://127.0.0.1:{port}/v1/health").json()
        assert (health["host"], health["simulated"]) == ("node-7", True)
        assert httpx.get(f"http://127.0.0.1:{port}/v1/gpus").status_code == 401
        gpus = httpx.get(
            f"http://127.0.0.1:{port}/v1/gpus", headers={"Authorization": "Bearer tok"}
        ).json()["gpus"]
        assert [g["name"] for g in gpus] == ["NVIDIA A100-80GB"] * 4
    finally:
        stop_server(server, thread)


def test_a_bad_spec_stops_the_agent_with_the_parsers_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: list[dict[str, Any]]
) -> None:
    monkeypatch.setenv("PAIKA_AGENT_TOKEN", "tok")
    result = CliRunner().invoke(
        _cli(), ["agent", "--simulate", "4xA100,T4*2", "--state-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert 'bad GPU spec part "T4*2"' in result.output
    assert served == []


def test_without_a_driver_the_agent_suggests_simulate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: list[dict[str, Any]]
) -> None:
    nvml = load_pynvml()
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        pass
    else:
        nvml.nvmlShutdown()
        pytest.skip("this machine has a working NVIDIA driver")
    monkeypatch.setenv("PAIKA_AGENT_TOKEN", "tok")
    result = CliRunner().invoke(_cli(), ["agent", "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "NVIDIA driver" in result.output and "--simulate" in result.output


def test_serve_in_thread_picks_a_free_port_and_stops(tmp_path: Path) -> None:
    from scheduler.agent.app import build_app
    from scheduler.agent.jobs import JobStore
    from scheduler.agent.simulated import SimulatedReader

    with JobStore(tmp_path) as store:
        app = build_app(SimulatedReader("1xT4"), store, "tok")
        first = serve_in_thread(app)
        second = serve_in_thread(app)
        try:
            assert first[2] != second[2] and first[2] > 0
            for _, _, port in (first, second):
                assert httpx.get(f"http://127.0.0.1:{port}/v1/health").status_code == 200
        finally:
            stop_server(first[0], first[1])
            stop_server(second[0], second[1])
        assert not first[1].is_alive() and not second[1].is_alive()
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{first[2]}/v1/health")


def _token_file(tmp_path: Path, mode: int, text: str = "file-token\n") -> Path:
    path = tmp_path / "agent-token"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_the_token_comes_from_the_file_named_and_wins_over_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: list[dict[str, Any]]
) -> None:
    monkeypatch.setenv("PAIKA_AGENT_TOKEN", "variable-token")
    monkeypatch.setenv("PAIKA_AGENT_TOKEN_FILE", str(_token_file(tmp_path, 0o600)))
    args = ["agent", "--simulate", "1xT4", "--state-dir", str(tmp_path / "st")]
    result = CliRunner().invoke(_cli(), args)
    assert result.exit_code == 0, result.output
    assert os.umask(0o022) == 0o077  # the agent's files are its own
    server, thread, port = serve_in_thread(served[0]["app"])
    try:
        url = f"http://127.0.0.1:{port}/v1/gpus"
        assert httpx.get(url, headers={"Authorization": "Bearer file-token"}).status_code == 200
        assert httpx.get(url, headers={"Authorization": "Bearer variable-token"}).status_code == 401
    finally:
        stop_server(server, thread)


@pytest.mark.parametrize(
    ("mode", "text", "expected"),
    [
        (0o644, "t\n", "chmod 600"),
        (0o640, "t\n", "chmod 600"),
        (0o602, "t\n", "chmod 600"),
        (0o600, "  \n", "is empty"),
    ],
)
def test_a_token_file_others_could_read_or_an_empty_one_stops_the_agent(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    served: list[dict[str, Any]],
    mode: int,
    text: str,
    expected: str,
) -> None:
    path = _token_file(tmp_path, mode, text)
    monkeypatch.setenv("PAIKA_AGENT_TOKEN_FILE", str(path))
    args = ["agent", "--simulate", "1xT4", "--state-dir", str(tmp_path / "st")]
    result = CliRunner().invoke(_cli(), args)
    assert result.exit_code == 2
    assert "PAIKA_AGENT_TOKEN_FILE" in result.output and expected in result.output
    assert str(path) in result.output and served == []


def test_a_missing_token_file_stops_the_agent_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: list[dict[str, Any]]
) -> None:
    monkeypatch.setenv("PAIKA_AGENT_TOKEN_FILE", str(tmp_path / "nowhere"))
    result = CliRunner().invoke(_cli(), ["agent", "--simulate", "1xT4"])
    assert result.exit_code == 2
    assert f"{tmp_path / 'nowhere'} is missing" in result.output and served == []
    assert "PAIKA_AGENT_TOKEN_FILE" in result.output


def test_the_help_prefers_the_token_file_and_offers_the_root_flag() -> None:
    result = CliRunner().invoke(_cli(), ["agent", "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "PAIKA_AGENT_TOKEN_FILE" in text and "(preferred" in text
    assert "--allow-root-jobs" in text
