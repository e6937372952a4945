"""Each host's own agent token and TLS between the scheduler and its agents, end to end:
real agents over real HTTP and HTTPS on loopback, the real cycle, the real database."""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from agent_world import job, ok, submit, until
from sqlalchemy import text
from sqlmodel import Session, select

from scheduler.agent.app import TokenFile, build_app
from scheduler.agent.client import AgentClient
from scheduler.agent.errors import AgentAuthError
from scheduler.agent.jobs import JobStore
from scheduler.agent.simulated import SimulatedReader
from scheduler.agent.tls import make_host, make_or_load_ca
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.credentials import AgentKeys, create_secret, read_secret, token_sha256
from scheduler.cycle import Cycle
from scheduler.dispatch import AgentDispatcher
from scheduler.hosts.poll import Poller, Target
from scheduler.hosts.report import HostReport
from scheduler.notices.events import RecordingObserver
from scheduler.serving import serve_in_thread, stop_server
from storage.models import AuditEvent, Host, HostState, JobState

TOKEN_SHOWN = re.compile(r"shown only now, to you: (pk1_[A-Za-z0-9_-]+)")


class HostAgent:
    """A simulated agent that reads its token from a file, over HTTP or HTTPS."""

    def __init__(self, name: str, spec: str, root: Path, tls: tuple[str, str] | None = None):
        self.name, self.token_file = name, root / f"{name}.token"
        self.store = JobStore(root / name, allow_root_jobs=True)  # a test rig
        reader = SimulatedReader(spec, host=name, loads=self.store)
        app = build_app(reader, self.store, TokenFile(self.token_file), host=name, tls=bool(tls))
        self.server, self.thread, port = serve_in_thread(app, tls=tls)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"

    def install(self, token: str) -> None:
        """What the install command shown to the admin does."""
        new = self.token_file.with_suffix(".new")
        new.write_text(token + "\n")
        new.chmod(0o600)
        os.replace(new, self.token_file)

    def close(self) -> None:
        for run in self.store.all_jobs():
            if run.state == "running":
                self.store.stop(run.job_id, 0.1)
        stop_server(self.server, self.thread)
        self.store.close()


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "agent-secret"
    assert create_secret(path)
    return path


@pytest.fixture
def site(tmp_path: Path) -> Path:
    directory = tmp_path / "tls"
    ca = make_or_load_ca(directory)
    for name in ("127.0.0.1", "localhost"):
        make_host(ca, directory, name)
    return directory


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[dict[str, HostAgent]]:
    made: dict[str, HostAgent] = {}
    yield made
    for agent in made.values():
        agent.close()


def _tls(site: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(site / "ca.pem"))


def _paika_with_secret(paika: Paika, secret_file: Path) -> Paika:
    paika.settings.agent_secret_file = secret_file
    paika.policy = paika.policy.model_copy(
        update={"scheduler": paika.policy.scheduler.model_copy(update={"headroom": {}})}
    )
    ok(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    return paika


def _add(paika: Paika, agent: HostAgent) -> str:
    """Register the host, install the token shown once on it; returns the token."""
    said = ok(paika, "UADMIN", f"admin host add {agent.name} url={agent.url}")
    found = TOKEN_SHOWN.search(said)
    assert found, said
    agent.install(found.group(1))
    return found.group(1)


def _cycle(paika: Paika, secret_file: Path, tls: ssl.SSLContext | None = None) -> Cycle:
    keys = AgentKeys(None, read_secret(secret_file))
    poller = Poller("", timeout=2.0, tls=tls)

    def poll(targets: Sequence[Target]) -> Mapping[str, HostReport]:
        return poller(targets)

    cycle = Cycle(
        paika.engine,
        paika.policy,
        paika.clock,
        AgentDispatcher(None, timeout=2.0, keys=keys, tls=tls),
        RecordingObserver(),
        poll,
        keys,
    )
    cycle.close = poller.close  # type: ignore[method-assign]
    return cycle


def _host(paika: Paika, name: str) -> Host:
    with Session(paika.engine) as session:
        return session.exec(select(Host).where(Host.name == name)).one()


def _accepts(agent: HostAgent, token: str) -> bool:
    with AgentClient(agent.url, token) as client:
        try:
            client.gpus()
        except AgentAuthError:
            return False
        return True


def test_each_host_gets_a_token_of_its_own_kept_only_as_a_hash(
    paika: Paika, secret_file: Path, tmp_path: Path, hosts: dict[str, HostAgent]
) -> None:
    _paika_with_secret(paika, secret_file)
    hosts["gpu-a"] = HostAgent("gpu-a", "1xA100-80GB", tmp_path)
    hosts["gpu-b"] = HostAgent("gpu-b", "1xT4-16GB", tmp_path)
    token_a, token_b = _add(paika, hosts["gpu-a"]), _add(paika, hosts["gpu-b"])
    assert token_a != token_b
    # An agent takes its own token and refuses another host's.
    assert _accepts(hosts["gpu-a"], token_a) and not _accepts(hosts["gpu-a"], token_b)
    row = _host(paika, "gpu-a")
    assert (row.token_generation, row.token_sha256) == (1, token_sha256(token_a))
    assert row.token_issued_at is not None and row.token_changed_by == "UADMIN"
    # Nowhere in the database, in clear: not in the hosts table, not in the audit trail.
    with paika.engine.connect() as connection:
        for table in ("hosts", "audit_events"):
            rows = connection.execute(text(f"SELECT * FROM {table}")).all()  # noqa: S608
            assert rows and not any(token_a in repr(r) or token_b in repr(r) for r in rows)


def test_the_cycle_polls_and_starts_jobs_with_each_hosts_token(
    paika: Paika, clock: ManualClock, secret_file: Path, tmp_path: Path, hosts: dict[str, HostAgent]
) -> None:
    _paika_with_secret(paika, secret_file)
    hosts["gpu-a"] = HostAgent("gpu-a", "1xA100-80GB", tmp_path)
    _add(paika, hosts["gpu-a"])
    cycle = _cycle(paika, secret_file)
    try:
        submit(paika, "train", "sleep 30", extra="type=A100-80GB")
        until(cycle, clock, lambda: job(paika, "train").state == JobState.RUNNING)
        assert _host(paika, "gpu-a").state == HostState.UP
        assert [run.job_id for run in hosts["gpu-a"].store.all_jobs()] == [
            f"{job(paika, 'train').id}.1"
        ]
    finally:
        cycle.close()


def test_a_rotation_stops_the_old_token_and_the_host_is_back_once_installed(
    paika: Paika, clock: ManualClock, secret_file: Path, tmp_path: Path, hosts: dict[str, HostAgent]
) -> None:
    _paika_with_secret(paika, secret_file)
    agent = hosts["gpu-a"] = HostAgent("gpu-a", "1xA100-80GB", tmp_path)
    old = _add(paika, agent)
    cycle = _cycle(paika, secret_file)
    try:
        cycle.run_once()
        assert _host(paika, "gpu-a").state == HostState.UP
        said = ok(paika, "UADMIN", "admin host rotate gpu-a")
        found = TOKEN_SHOWN.search(said)
        assert found and "generation 2" in said, said
        new = found.group(1)
        # Not installed yet: the scheduler presents the new token, the agent refuses it.
        cycle.run_once()
        row = _host(paika, "gpu-a")
        assert row.state == HostState.DEGRADED and row.untrusted
        assert "not this host's current token" in (row.last_error or "")
        submit(paika, "waits", "sleep 30", extra="type=A100-80GB")
        clock.advance(timedelta(seconds=5))
        assert cycle.run_once().started == []  # no job goes to a host that refused us
        agent.install(new)
        until(cycle, clock, lambda: job(paika, "waits").state == JobState.RUNNING)
        row = _host(paika, "gpu-a")
        assert (row.state, row.untrusted, row.last_error) == (HostState.UP, False, None)
        assert not _accepts(agent, old) and _accepts(agent, new)  # the rotated-away token
    finally:
        cycle.close()


def test_a_revoked_host_is_not_used_until_a_new_token_is_issued(
    paika: Paika, clock: ManualClock, secret_file: Path, tmp_path: Path, hosts: dict[str, HostAgent]
) -> None:
    _paika_with_secret(paika, secret_file)
    agent = hosts["gpu-a"] = HostAgent("gpu-a", "1xA100-80GB", tmp_path)
    revoked = _add(paika, agent)
    cycle = _cycle(paika, secret_file)
    try:
        cycle.run_once()
        said = ok(paika, "UADMIN", "admin host revoke gpu-a")
        assert "Revoked the agent token of gpu-a" in said
        assert not paika.run("admin host revoke gpu-a", "UADMIN").ok  # already revoked
        submit(paika, "waits", "sleep 30", extra="type=A100-80GB")
        for _ in range(3):
            clock.advance(timedelta(seconds=5))
            assert cycle.run_once().started == []
        row = _host(paika, "gpu-a")
        assert row.untrusted and "revoked" in (row.last_error or "")
        assert agent.store.all_jobs() == []
        # The agent was told: its file still holds the revoked token, and it refuses it.
        assert row.token_revocation_sent_at is not None
        assert not _accepts(agent, revoked)
        listing = ok(paika, "UADMIN", "admin host list")
        assert "revoked" in listing and "/gpu admin host rotate gpu-a" in listing
        found = TOKEN_SHOWN.search(ok(paika, "UADMIN", "admin host rotate gpu-a"))
        assert found
        agent.install(found.group(1))
        assert not _accepts(agent, revoked)  # the revoked token is gone from the host too
        until(cycle, clock, lambda: job(paika, "waits").state == JobState.RUNNING)
    finally:
        cycle.close()


def test_token_commands_are_for_admins_and_audited(
    paika: Paika, secret_file: Path, tmp_path: Path, hosts: dict[str, HostAgent]
) -> None:
    _paika_with_secret(paika, secret_file)
    agent = hosts["gpu-a"] = HostAgent("gpu-a", "1xT4-16GB", tmp_path)
    for text_ in (
        f"admin host add gpu-x url={agent.url}",
        "admin host rotate gpu-a",
        "admin host revoke gpu-a",
    ):
        reply = paika.run(text_, "UALICE")
        assert not reply.ok and "Only admins can" in reply.text, reply.text
    _add(paika, agent)
    ok(paika, "UADMIN", "admin host rotate gpu-a")
    ok(paika, "UADMIN", "admin host revoke gpu-a")
    with Session(paika.engine) as session:
        actions = [
            (e.action, e.actor)
            for e in session.exec(select(AuditEvent).order_by(AuditEvent.id)).all()  # type: ignore[arg-type]
            if "host" in e.action
        ]
    assert ("host.token_issue", "UADMIN") in actions
    assert ("host.token_rotate", "UADMIN") in actions
    assert ("host.token_revoke", "UADMIN") in actions
    assert sum(action.startswith("refused.") for action, _ in actions) == 3


def test_without_a_secret_rotate_says_how_to_make_one(paika: Paika) -> None:
    ok(paika, "UADMIN", "admin host add gpu-a url=http://127.0.0.1:9")
    reply = paika.run("admin host rotate gpu-a", "UADMIN")
    assert (
        not reply.ok
        and "paika agent-secret" in reply.text
        and "PAIKA_AGENT_SECRET_FILE" in reply.text
    )


# ---------------------------------------------------------------- TLS


def test_the_scheduler_polls_a_tls_agent_whose_certificate_verifies(
    paika: Paika,
    clock: ManualClock,
    secret_file: Path,
    site: Path,
    tmp_path: Path,
    hosts: dict[str, HostAgent],
) -> None:
    _paika_with_secret(paika, secret_file)
    cert = (str(site / "127.0.0.1.pem"), str(site / "127.0.0.1-key.pem"))
    hosts["gpu-a"] = HostAgent("gpu-a", "1xA100-80GB", tmp_path, tls=cert)
    _add(paika, hosts["gpu-a"])
    cycle = _cycle(paika, secret_file, _tls(site))
    try:
        submit(paika, "train", "sleep 30", extra="type=A100-80GB")
        until(cycle, clock, lambda: job(paika, "train").state == JobState.RUNNING)
        assert _host(paika, "gpu-a").state == HostState.UP
        board = ok(paika, "UADMIN", "board")
        assert "plain HTTP" not in board
    finally:
        cycle.close()


@pytest.mark.parametrize("trouble", ["another name", "another CA"])
def test_an_agent_whose_certificate_does_not_verify_gets_no_job(
    paika: Paika,
    clock: ManualClock,
    secret_file: Path,
    site: Path,
    tmp_path: Path,
    hosts: dict[str, HostAgent],
    trouble: str,
) -> None:
    _paika_with_secret(paika, secret_file)
    if trouble == "another name":  # a certificate for localhost, reached as 127.0.0.1
        cert = (str(site / "localhost.pem"), str(site / "localhost-key.pem"))
    else:
        other = tmp_path / "other"
        make_host(make_or_load_ca(other), other, "127.0.0.1")
        cert = (str(other / "127.0.0.1.pem"), str(other / "127.0.0.1-key.pem"))
    agent = hosts["gpu-a"] = HostAgent("gpu-a", "1xA100-80GB", tmp_path, tls=cert)
    _add(paika, agent)
    cycle = _cycle(paika, secret_file, _tls(site))
    try:
        submit(paika, "waits", "sleep 30", extra="type=A100-80GB")
        for _ in range(2):
            clock.advance(timedelta(seconds=5))
            result = cycle.run_once()
            assert result.started == []
        row = _host(paika, "gpu-a")
        assert row.state == HostState.DEGRADED and row.untrusted
        assert "TLS certificate does not verify" in (row.last_error or "")
        assert job(paika, "waits").state == JobState.QUEUED
        assert agent.store.all_jobs() == []
        assert "TLS certificate does not verify" in ok(paika, "UADMIN", "admin host list")
    finally:
        cycle.close()


def test_the_board_marks_a_host_reached_in_clear_over_a_network(paika: Paika) -> None:
    ok(paika, "UADMIN", "admin host add lan-01 url=http://10.1.2.3:8470")
    ok(paika, "UADMIN", "admin host add tls-01 url=https://10.1.2.4:8470")
    ok(paika, "UADMIN", "admin host add local url=http://127.0.0.1:8470")
    with paika.context("UADMIN") as ctx:
        from scheduler.service.board import board

        marked = {host.name: host.insecure for host in board(ctx).hosts}
    assert marked == {"lan-01": True, "tls-01": False, "local": False}


def test_a_revocation_reaches_an_agent_that_was_away_once_it_answers(
    paika: Paika, clock: ManualClock, secret_file: Path, tmp_path: Path, hosts: dict[str, HostAgent]
) -> None:
    _paika_with_secret(paika, secret_file)
    agent = hosts["gpu-a"] = HostAgent("gpu-a", "1xT4-16GB", tmp_path)
    revoked = _add(paika, agent)
    cycle = _cycle(paika, secret_file)
    try:
        cycle.run_once()
        port = int(agent.url.rsplit(":", 1)[1])
        stop_server(agent.server, agent.thread)  # the host is away when the admin revokes
        ok(paika, "UADMIN", "admin host revoke gpu-a")
        clock.advance(timedelta(seconds=5))
        cycle.run_once()
        assert _host(paika, "gpu-a").token_revocation_sent_at is None  # tried, not reached
        app = build_app(
            SimulatedReader("1xT4-16GB", host="gpu-a", loads=agent.store),
            agent.store,
            TokenFile(agent.token_file),
            host="gpu-a",
        )
        agent.server, agent.thread, _ = serve_in_thread(app, port=port)
        assert _accepts(agent, revoked)  # back, and its file still holds the revoked token
        until(cycle, clock, lambda: _host(paika, "gpu-a").token_revocation_sent_at is not None)
        assert not _accepts(agent, revoked)
    finally:
        cycle.close()
