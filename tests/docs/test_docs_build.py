"""The documentation site builds with `mkdocs build --strict`: every page in the nav, no
broken link or anchor (mkdocs.yml turns those checks into warnings, and strict fails on
any)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
    reason="mkdocs and mkdocs-material are not installed: the docs site is not built here",
)
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(site),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    for page in (
        "index.html",
        "user-guide/index.html",
        "zh/user-guide/index.html",
        "reference/config/index.html",
        "operate/deploy/index.html",
    ):
        assert (site / page).is_file(), f"{page} was not built"
    assert not list(site.rglob("*.py")), "the generator script was published as a page asset"
