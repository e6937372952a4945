"""`paika init` as a new team runs it: register the hosts, start their agents with the tokens
it printed, run it again, and get a policy file that names the cards the agents really have
(models the bundled catalogue lacks, such as H800 and H20), loads, and is never replaced
behind the team's back."""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from paika_test_cli import run_paika

from scheduler.agent.app import build_app
from scheduler.agent.jobs import JobStore
from scheduler.agent.simulated import SimulatedReader
from scheduler.config import load_policy, policy_from_text
from scheduler.credentials import create_secret
from scheduler.serving import serve_in_thread, stop_server
from scheduler.starting_policy import (
    CardKind,
    HostLook,
    card_kinds,
    guessed_speed,
    starting_policy,
)

ADMIN = "U0ADMIN01"
TOKEN_PATTERN = re.compile(r"pk1_[A-Za-z0-9_-]+")


def free_port() -> int:
    """A loopback port nothing listens on now (an agent is started there later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def doctor_codes(env: dict[str, str]) -> dict[str, dict[str, object]]:
    ran = run_paika(["doctor", "--json", "--timeout", "3"], env)
    assert ran.exit_code in (0, 1), ran.stdout + ran.stderr
    return {f["code"]: f["values"] for f in json.loads(ran.stdout)["findings"]}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    secret = tmp_path / "agent-secret"
    assert create_secret(secret)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PAIKA_", "SLACK_"))}
    return base | {
        "PAIKA_DATA_DIR": str(tmp_path / "data"),
        "PAIKA_CONFIG": str(tmp_path / "etc" / "policy.yml"),  # not written yet
        "PAIKA_ADMINS": ADMIN,
        "PAIKA_AGENT_SECRET_FILE": str(secret),
    }


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[dict[str, object]]:
    """Start simulated agents on demand: start(name, spec, port, token)."""
    running: list[tuple[JobStore, object, object]] = []

    def start(name: str, spec: str, port: int, token: str) -> None:
        store = JobStore(tmp_path / f"state-{name}")
        app = build_app(SimulatedReader(spec, host=name), store, token, host=name)
        server, thread, _ = serve_in_thread(app, port=port)
        running.append((store, server, thread))

    yield {"start": start}
    for store, server, thread in running:
        stop_server(server, thread)  # type: ignore[arg-type]
        store.close()


def test_init_registers_hosts_then_writes_the_policy_from_their_cards(
    env: dict[str, str], agents: dict[str, object], tmp_path: Path
) -> None:
    ports = {"gpu-01": free_port(), "gpu-02": free_port()}
    hosts = [f"--host={name}=http://127.0.0.1:{port}" for name, port in ports.items()]
    policy = Path(env["PAIKA_CONFIG"])

    # Before: paika doctor says the policy file PAIKA_CONFIG names is not there, and how.
    assert "policy.missing" in doctor_codes(env)

    # First run: the hosts are registered, each with its token and how to install it; their
    # agents are not running yet, so no policy is written, and it says what to do.
    first = run_paika(
        ["init", *hosts, "--team", "语音组=#语音-gpu", "--channel", "#gpu-board"], env
    )
    assert first.exit_code == 1, first.stdout + first.stderr
    tokens = dict(zip(ports, dict.fromkeys(TOKEN_PATTERN.findall(first.stdout)), strict=True))
    assert "Added host gpu-01" in first.stdout and "Install it on gpu-02" in first.stdout
    assert "does not answer yet" in first.stdout
    assert "No agent has answered with its cards yet" in first.stderr
    assert not policy.exists()

    start = agents["start"]
    assert callable(start)
    start("gpu-01", "4xH800-80GB", ports["gpu-01"], tokens["gpu-01"])
    start("gpu-02", "2xH20-96GB,1xA100-80GB", ports["gpu-02"], tokens["gpu-02"])

    # Without PAIKA_CONFIG or --write it asks where the policy should go.
    no_path = run_paika(["init"], {k: v for k, v in env.items() if k != "PAIKA_CONFIG"})
    assert no_path.exit_code == 2 and "--write" in no_path.stderr and not policy.exists()

    second = run_paika(
        ["init", *hosts, "--team", "语音组=#语音-gpu", "--channel", "#gpu-board"], env
    )
    assert second.exit_code == 0, second.stdout + second.stderr
    # Registered hosts are kept as they are, their tokens not shown again.
    assert "gpu-01 is registered already" in second.stdout
    assert not TOKEN_PATTERN.search(second.stdout)
    assert "gpu-01: 4 × NVIDIA H800-80GB (80 GiB)" in second.stdout
    assert f"Wrote {policy} with 3 GPU types" in second.stdout
    assert "fill in price_per_gpu_hour" in second.stdout
    written = load_policy(policy)
    assert set(written.gpu_types) == {"H800-80GB", "H20-96GB", "A100-80GB"}
    assert written.gpu_types["H800-80GB"].speed == 2.2
    assert written.gpu_types["H20-96GB"].speed == 0.6
    assert all(t.price_per_gpu_hour == 0 for t in written.gpu_types.values())
    assert written.type_for_card("NVIDIA H800-80GB", 80) == "H800-80GB"
    assert written.teams["语音组"].channel == "#语音-gpu"
    assert written.slack.channel == "#gpu-board"
    assert written.admins == (ADMIN,) or list(written.admins) == [ADMIN]

    # Its prices are the team's to fill in: paika doctor says so until they are.
    assert doctor_codes(env)["policy.unpriced"]["gpu_types"] == list(written.gpu_types)

    # A value the policy refuses is said, and the file is left as it was.
    refused = run_paika(["init", "--force", "--team", 'bad"name'], env)
    assert refused.exit_code == 2 and "would not load" in refused.stderr
    assert "U+0022" in refused.stderr and load_policy(policy).teams["语音组"]

    # Again: the team's file is never replaced on its own; --force keeps the old one.
    policy.write_text(policy.read_text() + "# the team's own edit\n")
    again = run_paika(["init"], env)
    assert again.exit_code == 1 and "never replaces a policy file" in again.stderr
    assert policy.read_text().endswith("# the team's own edit\n")
    forced = run_paika(["init", "--force", "--lang", "zh"], env)
    assert forced.exit_code == 0, forced.stdout + forced.stderr
    assert "已写入" in forced.stdout and "下一步" in forced.stdout
    assert Path(str(policy) + ".bak").read_text().endswith("# the team's own edit\n")
    assert load_policy(policy).slack.default_language == "zh"

    # What it wrote is what paika starts with: the cards are known, no job asks in vain.
    ran = run_paika(["cmd", "admin host list", "--user", ADMIN], env)
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    assert "gpu-01" in ran.stdout and "gpu-02" in ran.stdout


def test_init_without_hosts_or_a_path_says_what_to_give(env: dict[str, str]) -> None:
    nothing = run_paika(["init"], env)
    assert nothing.exit_code == 1
    assert "No GPU host is registered yet" in nothing.stderr and "--host" in nothing.stderr
    away = env | {"PAIKA_DATABASE_URL": "postgresql://paika:x@127.0.0.1:1/paika"}
    unreachable = run_paika(["init", "--host", "gpu-01=https://gpu-01:8470"], away)
    assert unreachable.exit_code == 2 and "cannot reach the database" in unreachable.stderr
    assert "x@" not in unreachable.stderr  # the password is not shown
    bad = run_paika(["init", "--host", "gpu-01"], env)
    assert bad.exit_code == 2 and "is not NAME=URL" in bad.stderr
    no_such_team = run_paika(["init", "--team", 'bad"name'], env)
    assert no_such_team.exit_code == 1  # no hosts yet: said before any file is made
    link_local = run_paika(["init", "--host", "gpu-01=http://169.254.169.254:8470"], env)
    assert link_local.exit_code == 1 and "169.254.169.254" in link_local.stderr


def test_speeds_are_matched_on_whole_words() -> None:
    assert guessed_speed("NVIDIA H20") == 0.6
    assert guessed_speed("NVIDIA H200") == 2.4
    assert guessed_speed("NVIDIA A100-SXM4-80GB") == 1.0
    assert guessed_speed("NVIDIA GeForce RTX 4090") == 0.8
    assert guessed_speed("NVIDIA GeForce RTX 4090 D") == 0.75
    assert guessed_speed("NVIDIA L40S") == 0.9 and guessed_speed("NVIDIA L40") == 0.7
    assert guessed_speed("Some Future Card") is None


def test_the_starting_policy_loads_with_any_cards_and_names() -> None:
    looks = [
        HostLook("节点-01", "u", (("NVIDIA H800", 79.6),) * 8, live=True),
        HostLook("节点-02", "u", (("Mystery Accelerator X", 31.7), ("NVIDIA H800", 79.6)), True),
        HostLook("节点-03", "u", (), live=False),
    ]
    kinds = card_kinds(looks)
    assert kinds[0] == CardKind("NVIDIA H800", 80, 9, ("节点-01", "节点-02"))
    text = starting_policy(
        kinds, teams={"医疗": None, "team.a-1": "#q"}, timezone="Asia/Shanghai", language="zh"
    )
    policy = policy_from_text(text, "the starting policy")
    assert policy.type_for_card("Mystery Accelerator X", 32) is not None
    assert policy.gpu_types[policy.type_for_card("NVIDIA H800", 80) or ""].speed == 2.2
    assert "a model paika has no speed for: set it" in text
    assert policy.scheduler.headroom == {}
    assert set(policy.teams) == {"医疗", "team.a-1"}
