"""A throw-away Unix account with a home of its own, for the tests that run jobs as their
owner's account on a root agent. Made and removed with useradd/userdel: the modules that use
it keep to one worker (pytest.mark.xdist_group("unix-accounts")), as /etc/passwd is one file."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def throwaway_account(prefix: str) -> Iterator[pwd.struct_passwd]:
    """A new account named `prefix` and 8 hex digits, gone again afterwards (the test is
    skipped where accounts cannot be made: not root, or no useradd)."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("creating Unix accounts needs root and useradd")
    base = Path(tempfile.mkdtemp(prefix="paika-accounts-"))
    base.chmod(0o755)
    name = f"{prefix}{secrets.token_hex(4)}"
    subprocess.run(
        ["useradd", "-m", "-d", str(base / name), "-s", "/bin/sh", "-U", name],
        check=True,
        capture_output=True,
    )
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", "-f", name], capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)
