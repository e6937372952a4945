"""`paika doctor` on an install as a new team has it: a real database, simulated agents over
real HTTP (and TLS) on loopback, the fake Slack; each finding says what to do, and doing
what it says makes it go away."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_slack import BOT_TOKEN, SIGNING_SECRET
from fake_slack.slack_server import FakeSlack
from paika_test_cli import run_paika

from bot.doctor_words import KEYS
from bot.i18n import catalogue
from scheduler.agent.app import build_app
from scheduler.agent.jobs import JobStore
from scheduler.agent.simulated import SimulatedReader
from scheduler.agent.tls import make_host, make_or_load_ca
from scheduler.config import policy_from_text
from scheduler.doctor import Severity, examine, suggested_type_name
from scheduler.serving import serve_in_thread, stop_server
from scheduler.settings import Settings

TOKEN = "doctor-test-token"
ADMIN = "U0ADMIN01"
ALICE = "U0ALICE01"

POLICY = """
gpu_types:
  A100-80GB: {memory_gib: 80, price_per_gpu_hour: 2.2}
teams:
  vision: {channel: "#gpu-queue"}
"""


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[dict[str, str]]:
    """Two agents: gpu-a (plain HTTP, one known and two unknown cards) and gpu-b (TLS, a
    certificate for 127.0.0.1 from paika agent init's CA)."""
    ca = make_or_load_ca(tmp_path / "tls")
    files = make_host(ca, tmp_path / "tls", "127.0.0.1")
    running = []
    urls = {}
    for name, spec, tls in (
        ("gpu-a", "1xA100-80GB,2xH800-80GB", False),
        ("gpu-b", "1xA100-80GB", True),
    ):
        store = JobStore(tmp_path / f"state-{name}")
        app = build_app(SimulatedReader(spec, host=name), store, TOKEN, host=name, tls=tls)
        pair = (str(files.cert_path), str(files.key_path)) if tls else None
        server, thread, port = serve_in_thread(app, tls=pair)
        running.append((store, server, thread))
        urls[name] = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    urls["ca"] = str(ca.cert_path)
    try:
        yield urls
    finally:
        for store, server, thread in running:
            stop_server(server, thread)
            store.close()


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    yield from FakeSlack.serve()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PAIKA_", "SLACK_"))}
    return base | {
        "PAIKA_DATA_DIR": str(tmp_path / "data"),
        "PAIKA_CONFIG": str(policy),
        "PAIKA_ADMINS": ADMIN,
        "PAIKA_AGENT_TOKEN": TOKEN,
    }


def closed_port() -> int:
    """A loopback port nothing listens on (bound once, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def doctor(env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    ran = run_paika(["doctor", "--json", "--timeout", "5"], env)
    assert ran.exit_code in (0, 1), ran.stdout + ran.stderr
    return ran.exit_code, json.loads(ran.stdout)


def codes(found: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    by: dict[str, list[dict[str, Any]]] = {}
    for finding in found["findings"]:
        by.setdefault(finding["code"], []).append(finding)
    return by


def admin(env: dict[str, str], text: str) -> str:
    ran = run_paika(["cmd", text, "--user", ADMIN], env)
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    return ran.stdout


def test_a_fresh_install_is_told_what_blocks_and_what_to_do(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAIKA_", "SLACK_"))}
    env["PAIKA_DATA_DIR"] = str(tmp_path / "data")
    ran = run_paika(["doctor"], env)
    assert ran.exit_code == 1, ran.stdout
    out = ran.stdout
    # The bundled example, named with its teams and channels; no admins; no agent token.
    assert "PAIKA_CONFIG is not set" in out and "#vision-gpu" in out and "vision" in out
    assert "Copy member ID" in out and "PAIKA_ADMINS" in out
    assert "✗ No agent token" in out and "paika agent-secret" in out
    assert "Slack is off" in out
    zh = run_paika(["doctor", "--lang", "zh"], env)
    assert zh.exit_code == 1 and "示例策略" in zh.stdout and "nlp、vision" in zh.stdout


def test_cards_accounts_certificates_and_slack(
    env: dict[str, str], agents: dict[str, str], slack: FakeSlack, tmp_path: Path
) -> None:
    admin(env, f"admin host add gpu-a url={agents['gpu-a']}")
    admin(env, f"admin host add gpu-b url={agents['gpu-b']}")
    admin(env, f"admin host add gpu-c url=http://127.0.0.1:{closed_port()}")
    admin(env, f"admin member add <@{ALICE}> team=vision")
    env |= {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "PAIKA_SLACK_API_URL": slack.api_url,
    }
    slack.set_channel("C0GPUQUEUE", "gpu-queue", member=False)
    status, found = doctor(env)
    by = codes(found)
    # gpu-b's certificate does not verify against the system's CAs: that blocks.
    assert status == 1 and not found["ok"]
    assert [f["values"]["host"] for f in by["agent.untrusted"]] == ["gpu-b"]
    assert "PAIKA_AGENT_CA_FILE" in by["agent.untrusted"][0]["text"]
    # Nothing listens for gpu-c: it is named, with what to look at, and the others go on.
    (silent,) = by["agent.unreachable"]
    assert silent["values"]["host"] == "gpu-c" and silent["severity"] == "warn"
    assert "systemctl status paika-agent" in silent["text"]
    # gpu-a answers, its clock close to ours; its two H800s are in no GPU type.
    (ok,) = by["agent.ok"]
    # Its clock is ours: only the request's own time on a busy machine and the Date header's
    # whole seconds part them.
    assert ok["values"]["host"] == "gpu-a" and abs(ok["values"]["skew_s"]) <= 10
    (card,) = by["card.unknown"]
    assert card["values"]["name"] == "NVIDIA H800-80GB" and card["values"]["memory_gib"] == 80
    assert card["values"]["hosts"] == ["gpu-a", "gpu-a"]
    assert card["values"]["yaml"] in card["text"]
    # Slack: the bot works, but no digest channel is set and it is not in #gpu-queue.
    assert "slack.ok" in by and "slack.no_channel" in by
    assert by["slack.not_member"][0]["values"] == {"channel": "#gpu-queue", "id": "C0GPUQUEUE"}
    assert "/invite @paika" in by["slack.not_member"][0]["text"]
    if os.geteuid() == 0:  # the agents here run as this process's user
        (unmapped,) = by["accounts.unmapped"]
        assert unmapped["values"]["users"] == sorted([ADMIN, ALICE])
        assert f"/gpu admin account set <@{ADMIN}> account=" in unmapped["text"]

    # Do what each says: trust the CA, add the line for the cards, set the digest channel,
    # invite the bot, map the accounts.
    env["PAIKA_AGENT_CA_FILE"] = agents["ca"]
    admin(env, "admin host remove gpu-c")
    policy = Path(env["PAIKA_CONFIG"])
    # The suggested line, with the price the finding says to set (paika doctor warns while 0).
    line = card["values"]["yaml"].replace("price_per_gpu_hour: 0", "price_per_gpu_hour: 3.1")
    text = policy.read_text().replace("gpu_types:\n", f"gpu_types:\n  {line}\n")
    text += 'slack: {channel: "#gpu-queue"}\n'
    policy.write_text(text)
    slack.set_channel("C0GPUQUEUE", "gpu-queue", member=True)
    for user in (ADMIN, ALICE):
        admin(env, f"admin account set <@{user}> account=nobody force=yes")
    status, found = doctor(env)
    by = codes(found)
    assert status == 0 and found["ok"], found
    assert sorted(f["values"]["host"] for f in by["agent.ok"]) == ["gpu-a", "gpu-b"]
    assert "card.unknown" not in by and "agent.untrusted" not in by
    assert "slack.no_channel" not in by and "slack.not_member" not in by
    assert by["slack.channel_ok"][0]["values"]["id"] == "C0GPUQUEUE"
    assert "accounts.unmapped" not in by
    assert not [f for f in found["findings"] if f["severity"] != "ok"], found


def test_the_suggested_line_makes_the_card_a_type_of_the_catalogue() -> None:
    for nvml, gib in (("NVIDIA H800", 80), ("NVIDIA GeForce RTX 4090", 24), ("NVIDIA L40S", 46)):
        name = suggested_type_name(nvml, gib)
        line = f'{name}: {{memory_gib: {gib}, nvml_names: ["{nvml}"], price_per_gpu_hour: 0}}'
        policy = policy_from_text(f"gpu_types:\n  {line}\n", "test")
        assert policy.type_for_card(nvml, gib - 0.4) == name
    assert suggested_type_name("NVIDIA A800-SXM4-80GB", 80) == "A800-SXM4-80GB"
    assert suggested_type_name("NVIDIA GeForce RTX 4090", 24) == "RTX-4090-24GB"


def test_every_finding_has_words_in_both_languages() -> None:
    for key in KEYS.values():
        assert set(catalogue()[key]) == {"en", "zh"}, key


def test_the_first_commands_work_as_printed(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAIKA_", "SLACK_"))}
    env["PAIKA_DATA_DIR"] = str(tmp_path / "data")
    top = run_paika(["--help"], env | {"COLUMNS": "200"})
    assert "paika cmd help" in top.stdout
    helped = run_paika(["cmd", "help"], env)
    assert helped.exit_code == 0, helped.stderr
    assert "/gpu submit" in helped.stdout
    refused = run_paika(["cmd", "queue mine"], env)
    assert refused.exit_code == 2 and "Copy member ID" in refused.stderr
    up = run_paika(["up", "--help"], env | {"COLUMNS": "200"})
    for name in ("PAIKA_DATABASE_URL", "PAIKA_CONFIG", "PAIKA_ADMINS", "SLACK_BOT_TOKEN"):
        assert name in up.stdout, name


def test_a_clock_off_and_a_wrong_slack_token_are_said(
    env: dict[str, str], agents: dict[str, str], slack: FakeSlack
) -> None:
    admin(env, f"admin host add gpu-a url={agents['gpu-a']}")
    settings = Settings(
        data_dir=Path(env["PAIKA_DATA_DIR"]),
        config=Path(env["PAIKA_CONFIG"]),
        agent_token=TOKEN,
        admins=(ADMIN,),
    )
    # This side's clock a minute ahead: the agent's is a minute behind it.
    ahead = examine(settings, clock=lambda: datetime.now(UTC) + timedelta(minutes=1))
    (skew,) = [f for f in ahead if f.code == "agent.clock_skew"]
    assert skew.severity is Severity.WARN and -70 <= skew.values["skew_s"] <= -50
    assert not [f for f in examine(settings) if f.code == "agent.clock_skew"]
    env |= {
        "SLACK_BOT_TOKEN": "xoxb-not-the-bots",
        "SLACK_APP_TOKEN": "xapp-1-whatever",
        "PAIKA_SLACK_API_URL": slack.api_url,
    }
    status, found = doctor(env)
    (refused,) = codes(found)["slack.auth_failed"]
    assert status == 1 and refused["values"] == {"error": "invalid_auth"}
    assert "Bot User OAuth Token" in refused["text"]


def test_a_ca_file_that_cannot_be_read_blocks(env: dict[str, str], tmp_path: Path) -> None:
    env["PAIKA_AGENT_CA_FILE"] = str(tmp_path / "no-such-ca.pem")
    status, found = doctor(env)
    (unusable,) = codes(found)["agents.ca_unusable"]
    assert status == 1 and unusable["severity"] == "block"
    assert "paika agent init" in unusable["text"]
