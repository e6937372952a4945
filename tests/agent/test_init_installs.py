"""`paika agent init` and the shipped agent unit agree on the certificate's file names: the
commands init prints put each host's certificate and key exactly where paika-agent.service
(`paika deploy units`) reads them, with no rename left to the reader."""

from __future__ import annotations

import shlex
import ssl
import subprocess
from pathlib import Path

from typer.testing import CliRunner

from bot.cli import app
from scheduler.deploy import units


def _exec_start_paths() -> dict[str, str]:
    unit = units("/opt/paika/bin/paika")["paika-agent.service"]
    line = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    words = shlex.split(line.removeprefix("ExecStart="))
    return {
        "cert": words[words.index("--tls-cert") + 1],
        "key": words[words.index("--tls-key") + 1],
    }


def test_the_install_commands_init_prints_put_the_files_where_the_unit_reads_them(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "tls"
    result = CliRunner().invoke(app, ["agent", "init", "--dir", str(directory), "--host", "gpu-01"])
    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.output.splitlines()]
    installs = [shlex.split(x) for x in lines if x.startswith("ssh ") and " install " in x]
    assert installs, result.output
    # Each install runs on the host (ssh gpu-01 sudo install ...) on the files scp copied there.
    copy = shlex.split(next(line for line in lines if line.startswith("scp ")))
    assert copy[-1] == "gpu-01:" and all(Path(f).exists() for f in copy[1:-1])
    wanted = _exec_start_paths()
    assert sorted(words[-1] for words in installs) == sorted(wanted.values())
    # Run the installs here, on a copy of the host's /etc under tmp_path: the unit's paths
    # then hold a certificate and key that load together, the key for its owner only.
    host = tmp_path / "host"
    for path in copy[1:-1]:
        (host / "home").mkdir(parents=True, exist_ok=True)
        (host / "home" / Path(path).name).write_bytes(Path(path).read_bytes())
    for words in installs:
        assert words[:4] == ["ssh", "gpu-01", "sudo", "install"], words
        command = words[3:-1] + [str(host) + words[-1]]
        subprocess.run(command, cwd=host / "home", check=True)
    cert, key = host / wanted["cert"].lstrip("/"), host / wanted["key"].lstrip("/")
    ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    assert key.stat().st_mode & 0o777 == 0o600
    assert "url=https://gpu-01:8470" in result.output
