"""The systemd units shipped with paika: `paika.service` (the scheduler and Slack bot, as a
dedicated `paika` user, hardened) and `paika-agent.service` (the GPU host agent, as root,
with only the hardening its jobs allow). `paika deploy units` prints or writes them."""

from __future__ import annotations

from pathlib import Path

UNITS_DIR = Path(__file__).parent
UNIT_NAMES = ("paika.service", "paika-agent.service")
SHIPPED_EXEC = "/opt/paika/bin/paika"  # where the shipped units expect the paika command


def units(exec_path: str = SHIPPED_EXEC) -> dict[str, str]:
    """Each unit's name and text, with `exec_path` as the paika command it runs."""
    if not exec_path.startswith("/") or any(c.isspace() for c in exec_path):
        raise ValueError(
            f"{exec_path!r}: systemd needs the paika command as an absolute path without spaces"
        )
    return {
        name: (UNITS_DIR / name).read_text().replace(SHIPPED_EXEC, exec_path) for name in UNIT_NAMES
    }
