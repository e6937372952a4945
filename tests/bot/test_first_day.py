"""A new team's first day, as the README's steps go, on loopback: the agent secret and the
units, the agents' certificates from `paika agent init` installed by the commands it prints,
two root agents started by the unit's own command line (simulated cards, one an H800 that the
bundled catalogue lacks), the hosts registered and the policy written by `paika init`,
people mapped to a Unix account, `paika doctor`, `paika up` — and the first job runs on the
team's own cards. Before each fix `paika doctor` names the trap; after the last, nothing.

Every paika here is a real process or the real command in this process; the only liberties
are the ones loopback forces: each host's /etc is a folder of its own, and its agent is told
its name, its port and that its GPUs are simulated.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from paika_test_accounts import throwaway_account
from paika_test_cli import run_paika

from scheduler.config import load_policy

pytestmark = pytest.mark.xdist_group("unix-accounts")  # one worker at a time edits /etc/passwd

PAIKA = Path(sys.executable).with_name("paika")
ADMIN = "U0LEAD0001"
ALICE = "U0ALICE001"
HOSTS = {"gpu-01": ("localhost", "1xH800-80GB,1xA100-80GB"), "gpu-02": ("127.0.0.1", "2xA100-80GB")}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def account() -> Iterator[str]:
    """The Unix account the team's jobs run as on the hosts."""
    with throwaway_account("pkd") as made:
        yield made.pw_name


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in started:
        try:
            process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def doctor(env: dict[str, str]) -> tuple[int, dict[str, list[dict[str, object]]]]:
    ran = run_paika(["doctor", "--json", "--timeout", "5"], env)
    assert ran.exit_code in (0, 1), ran.stdout + ran.stderr
    found: dict[str, list[dict[str, object]]] = {}
    for finding in json.loads(ran.stdout)["findings"]:
        found.setdefault(finding["code"], []).append(finding)
    return ran.exit_code, found


def paika(env: dict[str, str], *args: str) -> str:
    ran = run_paika(list(args), env)
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    return ran.stdout


def on_host(root: Path, path: str) -> Path:
    """Where a path of a GPU host's file system lies in this test (its / is `root`)."""
    return root / path.lstrip("/")


def unit_exec(units: Path, name: str) -> list[str]:
    text = (units / name).read_text()
    line = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart="))


def install_certificates(printed: str, tls: Path, host: str, root: Path) -> None:
    """Run what `paika agent init` printed for `host`, on that host: its `ssh HOST sudo
    install …` lines (the files it copied there with scp are read from the CA's folder)."""
    prefix = f"ssh {host} sudo install "
    lines = [line.strip() for line in printed.splitlines() if line.strip().startswith(prefix)]
    assert len(lines) == 2, printed
    for line in lines:
        words = shlex.split(line.removeprefix(f"ssh {host} sudo "))
        source, target = words[-2], words[-1]
        subprocess.run([*words[:-2], str(tls / source), str(on_host(root, target))], check=True)


def wait_for(what: str, check: object, timeout: float = 60) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_team_goes_from_the_readme_to_a_first_job_on_its_own_cards(
    tmp_path: Path, account: str, processes: list[subprocess.Popen[str]]
) -> None:
    etc = tmp_path / "etc-paika"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PAIKA_", "SLACK_"))}
    env = base | {
        "PAIKA_DATA_DIR": str(tmp_path / "data"),
        "PAIKA_ADMINS": ADMIN,
        "PAIKA_AGENT_SECRET_FILE": str(etc / "agent-secret"),
        "PAIKA_AGENT_CA_FILE": str(tmp_path / "paika-tls" / "ca.pem"),
        "PAIKA_HTTP_PORT": str(free_port()),
    }

    # Before anything: the secret the settings name is not made yet, and no host is known.
    status, found = doctor(env)
    assert status == 1 and "agents.secret_unusable" in found

    # Step 1: the secret and the units.
    paika(env, "agent-secret", "--file", str(etc / "agent-secret"))
    units = tmp_path / "systemd-system"  # /etc/systemd/system, which a host always has
    units.mkdir()
    paika(env, "deploy", "units", "--exec", str(PAIKA), "--write", str(units))
    agent_command = unit_exec(units, "paika-agent.service")

    # Step 2: the agents' certificates, each installed by the commands printed for it.
    tls = tmp_path / "paika-tls"
    printed = paika(
        env, "agent", "init", "--dir", str(tls), *(f"--host={a}" for a, _ in HOSTS.values())
    )

    # Step 3: the hosts registered (their tokens printed once); no agent answers yet, so no
    # policy is written, and `paika init` says so.
    ports = {name: free_port() for name in HOSTS}
    urls = {name: f"https://{HOSTS[name][0]}:{ports[name]}" for name in HOSTS}
    first = run_paika(["init", *(f"--host={name}={url}" for name, url in urls.items())], env)
    assert first.exit_code == 1 and "No agent has answered" in first.stderr, first.stderr
    tokens = dict(zip(HOSTS, dict.fromkeys(re.findall(r"pk1_[\w-]+", first.stdout)), strict=True))

    # On each host: the token installed by the printed command, the certificate by agent
    # init's, agent.env as the deployment guide writes it, and the agent started by the
    # unit's ExecStart with its /etc and /var/lib under the host's folder.
    for name, (address, cards) in HOSTS.items():
        root = tmp_path / f"host-{name}"
        token_line = next(
            line.strip("`")
            for line in first.stdout.splitlines()
            if tokens[name] in line and "umask" in line
        )
        token_path = re.search(r"> (\S+)\.new", token_line)
        assert token_path, token_line
        on_host(root, token_path[1]).parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["sh", "-c", token_line.replace("/etc/", f"{root}/etc/")], check=True)
        install_certificates(printed, tls, address, root)
        command = [
            str(on_host(root, word)) if word.startswith(("/etc/", "/var/")) else word
            for word in agent_command
        ]
        agent_env = base | {"PAIKA_AGENT_TOKEN_FILE": str(on_host(root, token_path[1]))}
        processes.append(
            subprocess.Popen(
                [*command, "--name", name, "--port", str(ports[name]), "--simulate", cards],
                env=agent_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    ca = ssl.create_default_context(cafile=str(tls / "ca.pem"))

    def answers(url: str) -> bool:
        try:
            return httpx.get(f"{url}/v1/health", verify=ca, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    for name, url in urls.items():
        wait_for(f"{name}'s agent", lambda url=url: answers(url))

    # Someone who skipped PAIKA_CONFIG runs the bundled example: doctor names it, and the
    # H800 that no type of it matches, with the line to add.
    status, found = doctor(env)
    assert "policy.bundled" in found
    unknown = found["card.unknown"][0]["values"]
    assert isinstance(unknown, dict) and unknown["name"] == "NVIDIA H800-80GB"

    # Step 4: the policy written from the agents' real cards.
    env["PAIKA_CONFIG"] = str(etc / "policy.yml")
    status, found = doctor(env)
    assert status == 1 and "policy.missing" in found
    written = paika(env, "init", "--team", "vision", "--channel", "#gpu-queue")
    assert "gpu-01: 1 × NVIDIA A100-80GB (80 GiB), 1 × NVIDIA H800-80GB (80 GiB)" in written
    policy = load_policy(etc / "policy.yml")
    assert set(policy.gpu_types) == {"H800-80GB", "A100-80GB"}
    status, found = doctor(env)
    assert "card.unknown" not in found and "policy.unpriced" in found
    # Root agents run each job as its owner's account: the people none maps are named.
    unmapped = found["accounts.unmapped"][0]["values"]
    assert isinstance(unmapped, dict) and ADMIN in unmapped["users"]

    # The prices filled in (and, for the test, a quicker cycle); step 5: people mapped.
    text = (etc / "policy.yml").read_text()
    text = text.replace("price_per_gpu_hour: 0}", "price_per_gpu_hour: 2.5}")
    text = text.replace("cycle_seconds: 10 ", "cycle_seconds: 1  ")
    (etc / "policy.yml").write_text(text)
    for said in (
        f"admin member add <@{ALICE}> team=vision",
        f"admin account set team=vision account={account}",
        f"admin account set <@{ADMIN}> account={account}",
    ):
        paika(env, "cmd", said, "--user", ADMIN)

    # Step 6: nothing left but Slack, which this team runs without (the console).
    status, found = doctor(env)
    warnings = {code for code, fs in found.items() if any(f["severity"] != "ok" for f in fs)}
    assert status == 0 and warnings <= {"slack.off"}, found

    # Step 7: paika up, and the first job runs on the team's own cards, as its account.
    up = subprocess.Popen(
        [str(PAIKA), "up"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    processes.append(up)
    submitted = paika(
        env,
        "cmd",
        'submit name=first gpus=1 type=H800-80GB hours=0.1 priority=normal data=ready cmd="id -un"',
        "--user",
        ALICE,
    )
    job_id = re.search(r"#(\d+)", submitted)
    assert job_id, submitted

    def ended() -> bool:
        assert up.poll() is None, up.communicate()[0]
        said = paika(env, "cmd", f"status {job_id[1]}", "--user", ALICE)
        return "succeeded" in said

    wait_for("the first job to run and end", ended, timeout=120)
    said = paika(env, "cmd", f"status {job_id[1]}", "--user", ALICE)
    assert "gpu-01" in said, said
    log = paika(env, "cmd", f"logs {job_id[1]}", "--user", ALICE)
    assert account in log, log
