"""The agent's own token and TLS: a token file read again when it changes, another host's
token refused, plain HTTP kept off the network, and certificates checked by the client."""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
import uvicorn
from agent_harness import wait_for
from typer.testing import CliRunner

from scheduler.agent.app import TokenFile, build_app
from scheduler.agent.client import AgentClient
from scheduler.agent.command import agent_app
from scheduler.agent.errors import AgentAuthError, AgentNotTrusted
from scheduler.agent.jobs import JobStore
from scheduler.agent.simulated import SimulatedReader
from scheduler.agent.tls import TlsSetupError, make_host, make_or_load_ca
from scheduler.serving import serve_in_thread, stop_server

OURS, THEIRS, NEXT = "pk1_host-a-generation-1", "pk1_host-b-generation-1", "pk1_host-a-gen-2"


def _write_token(path: Path, token: str) -> None:
    """As the install command does: a new file moved over the old one."""
    new = path.with_suffix(".new")
    new.write_text(token + "\n")
    new.chmod(0o600)
    os.replace(new, path)


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "agent.token"
    _write_token(path, OURS)
    return path


@pytest.fixture
def filed_agent(tmp_path: Path, token_file: Path) -> Iterator[str]:
    with JobStore(tmp_path / "state") as store:
        app = build_app(SimulatedReader("1xT4", host="host-a"), store, TokenFile(token_file))
        server, thread, port = serve_in_thread(app)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_server(server, thread)


def _accepts(url: str, token: str) -> bool:
    with AgentClient(url, token) as client:
        try:
            client.gpus()
        except AgentAuthError:
            return False
        return True


def test_the_agent_accepts_its_own_token_only(filed_agent: str) -> None:
    assert _accepts(filed_agent, OURS)
    with AgentClient(filed_agent, THEIRS) as client, pytest.raises(AgentAuthError) as refused:
        client.gpus()
    assert refused.value.status == 401 and "not this host's current token" in refused.value.message


def test_a_revoked_token_is_refused_though_the_file_still_holds_it_and_after_a_restart(
    tmp_path: Path, token_file: Path
) -> None:
    def serve() -> tuple[str, Any]:
        store = JobStore(tmp_path / "state")
        app = build_app(SimulatedReader("1xT4", host="host-a"), store, TokenFile(token_file))
        server, thread, port = serve_in_thread(app)
        return f"http://127.0.0.1:{port}", (server, thread, store)

    url, running = serve()
    with AgentClient(url, OURS) as client:
        assert client.revoke_token().revoked
    assert not _accepts(url, OURS)
    with AgentClient(url, OURS) as client, pytest.raises(AgentAuthError) as refused:
        client.gpus()
    assert "revoked" in refused.value.message
    stop_server(*running[:2])
    running[2].close()
    url, running = serve()  # a restarted agent still refuses it
    try:
        assert not _accepts(url, OURS)
        assert (tmp_path / "state" / "revoked-tokens.json").stat().st_mode & 0o077 == 0
        _write_token(token_file, THEIRS)  # the host's new token, installed
        wait_for(lambda: _accepts(url, THEIRS), 10, "the new token to be taken")
    finally:
        stop_server(*running[:2])
        running[2].close()


def test_a_rotation_in_the_token_file_is_taken_without_a_restart(
    filed_agent: str, token_file: Path
) -> None:
    _write_token(token_file, NEXT)
    wait_for(lambda: _accepts(filed_agent, NEXT), 5, "the agent to take the rotated token")
    assert not _accepts(filed_agent, OURS)  # the rotated-away token stops working


def test_a_rewrite_of_the_same_size_in_place_is_taken_too(
    filed_agent: str, token_file: Path
) -> None:
    assert _accepts(filed_agent, OURS)
    same_size = OURS[:-1] + "9"
    token_file.write_text(same_size + "\n")  # in place: same inode, maybe the same mtime tick
    wait_for(lambda: _accepts(filed_agent, same_size), 5, "the agent to read the file again")
    assert not _accepts(filed_agent, OURS)


def test_a_missing_token_file_locks_the_agent(filed_agent: str, token_file: Path) -> None:
    token_file.unlink()
    wait_for(lambda: not _accepts(filed_agent, OURS), 5, "the agent to refuse every token")
    response = httpx.get(f"{filed_agent}/v1/gpus", headers={"Authorization": f"Bearer {OURS}"})
    assert response.status_code == 401 and "no token installed" in response.json()["error"]
    assert httpx.get(f"{filed_agent}/v1/health").status_code == 200


# ---------------------------------------------------------------- the command


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append({"app": app, **kw}))
    monkeypatch.delenv("PAIKA_AGENT_TOKEN_FILE", raising=False)
    monkeypatch.setenv("PAIKA_AGENT_TOKEN", "tok")
    return calls


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.add_typer(agent_app, name="agent")

    @app.command("other")
    def other() -> None:
        pass

    return app


def _run(tmp_path: Path, *args: str) -> Any:
    simulated = ["agent", "--simulate", "1xT4", "--state-dir", str(tmp_path / "st")]
    return CliRunner().invoke(_cli(), [*simulated, *args])


@pytest.mark.parametrize("address", ["0.0.0.0", "::", "192.168.1.20", "gpu-01.lab"])
def test_plain_http_off_loopback_is_refused_without_insecure(
    tmp_path: Path, served: list[dict[str, Any]], address: str
) -> None:
    result = _run(tmp_path, "--host", address)
    assert result.exit_code == 2
    assert "without TLS" in result.output and "--insecure" in result.output
    assert "paika agent init" in result.output
    assert served == []


def test_insecure_allows_plain_http_on_the_network_and_says_so(
    tmp_path: Path, served: list[dict[str, Any]]
) -> None:
    result = _run(tmp_path, "--host", "0.0.0.0", "--insecure")
    assert result.exit_code == 0, result.output
    assert "WARNING" in result.output and "plain HTTP" in result.output
    assert served[0]["host"] == "0.0.0.0" and served[0]["http"].guard.tls is None


@pytest.fixture
def site(tmp_path: Path) -> Path:
    directory = tmp_path / "tls"
    ca = make_or_load_ca(directory)
    for name in ("127.0.0.1", "localhost"):
        make_host(ca, directory, name)
    return directory


def test_with_tls_the_agent_listens_on_every_interface_by_default(
    tmp_path: Path, served: list[dict[str, Any]], site: Path
) -> None:
    cert, key = site / "127.0.0.1.pem", site / "127.0.0.1-key.pem"
    result = _run(tmp_path, "--tls-cert", str(cert), "--tls-key", str(key))
    assert result.exit_code == 0, result.output
    assert "https://0.0.0.0:8470" in result.output
    call = served[0]
    # The agent's own protocol does the TLS (scheduler/agent/bounded.py), with this pair.
    assert call["host"] == "0.0.0.0" and call["http"].guard.tls is not None


@pytest.mark.parametrize(
    ("problem", "expected"),
    [("half", "both --tls-cert and --tls-key"), ("open key", "chmod 600"), ("bad", "cannot load")],
)
def test_tls_files_are_checked_at_start(
    tmp_path: Path, served: list[dict[str, Any]], site: Path, problem: str, expected: str
) -> None:
    cert, key = site / "127.0.0.1.pem", site / "127.0.0.1-key.pem"
    if problem == "half":
        args = ["--tls-cert", str(cert)]
    else:
        if problem == "open key":
            key.chmod(0o644)
        else:
            key = site / "localhost-key.pem"  # another certificate's key
        args = ["--tls-cert", str(cert), "--tls-key", str(key)]
    result = _run(tmp_path, *args)
    assert result.exit_code == 2 and expected in result.output, result.output
    assert served == []


def test_a_token_file_others_can_read_is_refused_at_start(
    tmp_path: Path, served: list[dict[str, Any]], token_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAIKA_AGENT_TOKEN_FILE", str(token_file))
    token_file.chmod(0o644)
    result = _run(tmp_path)
    assert result.exit_code == 2 and "chmod 600" in result.output
    token_file.chmod(0o600)
    result = _run(tmp_path)
    assert result.exit_code == 0, result.output


def test_init_makes_a_ca_once_and_keys_only_the_owner_reads(tmp_path: Path) -> None:
    directory = tmp_path / "tls"
    result = CliRunner().invoke(
        _cli(), ["agent", "init", "--dir", str(directory), "--host", "gpu-01"]
    )
    assert result.exit_code == 0, result.output
    assert "PAIKA_AGENT_CA_FILE" in result.output and "url=https://gpu-01:8470" in result.output
    ca_before = (directory / "ca.pem").read_bytes()
    result = CliRunner().invoke(
        _cli(), ["agent", "init", "--dir", str(directory), "--host", "gpu-02"]
    )
    assert result.exit_code == 0, result.output
    assert (directory / "ca.pem").read_bytes() == ca_before  # the same CA signs the new host
    for key in ("ca-key.pem", "gpu-01-key.pem", "gpu-02-key.pem"):
        assert (directory / key).stat().st_mode & 0o777 == 0o600, key
    again = CliRunner().invoke(
        _cli(), ["agent", "init", "--dir", str(directory), "--host", "gpu-01"]
    )
    assert again.exit_code == 2 and "exists already" in again.output
    with pytest.raises(TlsSetupError, match="not a host name"):
        make_host(make_or_load_ca(directory), directory, "bad name;rm")


# ---------------------------------------------------------------- TLS on the wire


@pytest.fixture
def tls_agent(tmp_path: Path, site: Path) -> Iterator[int]:
    with JobStore(tmp_path / "state") as store:
        app = build_app(SimulatedReader("1xT4"), store, OURS, tls=True)
        cert, key = str(site / "127.0.0.1.pem"), str(site / "127.0.0.1-key.pem")
        server, thread, port = serve_in_thread(app, tls=(cert, key))
        try:
            yield port
        finally:
            stop_server(server, thread)


def test_a_client_trusting_the_ca_talks_tls_to_the_agent(tls_agent: int, site: Path) -> None:
    tls = ssl.create_default_context(cafile=str(site / "ca.pem"))
    with AgentClient(f"https://127.0.0.1:{tls_agent}", OURS, tls=tls) as client:
        assert client.health().tls is True
        assert len(client.gpus()) == 1


def test_a_certificate_from_another_ca_is_not_trusted(tls_agent: int, tmp_path: Path) -> None:
    other = make_or_load_ca(tmp_path / "other")
    tls = ssl.create_default_context(cafile=str(other.cert_path))
    client = AgentClient(f"https://127.0.0.1:{tls_agent}", OURS, tls=tls)
    with client, pytest.raises(AgentNotTrusted) as refused:
        client.health()
    assert "certificate" in str(refused.value)


def test_a_certificate_for_another_name_is_not_trusted(tls_agent: int, site: Path) -> None:
    tls = ssl.create_default_context(cafile=str(site / "ca.pem"))
    # The agent's certificate names 127.0.0.1; reached as localhost, the names differ.
    client = AgentClient(f"https://localhost:{tls_agent}", OURS, tls=tls)
    with client, pytest.raises(AgentNotTrusted) as refused:
        client.health()
    assert "localhost" in str(refused.value) or "match" in str(refused.value)
