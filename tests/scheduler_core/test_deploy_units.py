"""The shipped systemd units pass `systemd-analyze verify` without a word of warning, as
`paika deploy units` writes them; and the check itself catches a unit with a mistake."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paika_test_cli import run_paika

from scheduler.deploy import UNIT_NAMES, units

PAIKA = Path(sys.executable).with_name("paika")
ANALYZE = shutil.which("systemd-analyze")
needs_systemd = pytest.mark.skipif(
    ANALYZE is None, reason="systemd-analyze is not installed here: the units are not verified"
)


def _verify(*paths: Path) -> str:
    """What `systemd-analyze verify` says of the units (empty when it has no complaint)."""
    assert ANALYZE is not None
    done = subprocess.run(
        [ANALYZE, "verify", "--man=no", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    said = (done.stdout + done.stderr).strip()
    return said or ("" if done.returncode == 0 else f"exit status {done.returncode}")


@needs_systemd
def test_the_units_paika_writes_verify_cleanly(tmp_path: Path) -> None:
    done = run_paika(["deploy", "units", "--exec", str(PAIKA), "--write", str(tmp_path)])
    assert done.exit_code == 0, done.stderr
    written = [tmp_path / name for name in UNIT_NAMES]
    assert all(path.read_text().count(str(PAIKA)) >= 1 for path in written)
    assert _verify(*written) == ""


@needs_systemd
def test_the_check_catches_a_unit_with_a_mistake(tmp_path: Path) -> None:
    text = units(str(PAIKA))["paika.service"].replace("NoNewPrivileges=", "NoNewPrivilege=")
    broken = tmp_path / "paika.service"
    broken.write_text(text)
    assert "NoNewPrivilege" in _verify(broken)


def test_the_scheduler_unit_is_hardened_and_the_agent_keeps_what_jobs_need() -> None:
    scheduler, agent = (units()[name].splitlines() for name in UNIT_NAMES)
    for line in (
        "User=paika",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ReadWritePaths=/var/lib/paika",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "EnvironmentFile=/etc/paika/paika.env",
        "Restart=on-failure",
        "ExecStart=/opt/paika/bin/paika up",
    ):
        assert line in scheduler, line
    # The agent starts jobs as their owners, on the GPUs, in their homes: none of these.
    assert not any(
        line.startswith(("User=", "NoNewPrivileges=", "PrivateDevices=", "ProtectHome="))
        for line in agent
    )
    assert "KillMode=process" in agent  # a restarted agent re-attaches to its running jobs
    assert "Restart=on-failure" in agent and "EnvironmentFile=/etc/paika/agent.env" in agent


def test_a_relative_exec_path_is_refused_with_what_systemd_needs() -> None:
    done = run_paika(["deploy", "units", "--exec", "bin/paika"])
    assert done.exit_code == 2
    assert "absolute path" in done.stderr
