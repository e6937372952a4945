"""The production packages import what pyproject.toml declares, and use all of it (deptry).

bot/, scheduler/ and storage/ are what an install of paika runs. A package they import that
is installed only because another one requires it (DEP003, transitive) breaks the day that
one drops it; one that is not declared at all (DEP001, missing) breaks a clean install; one
declared that nothing imports (DEP002, unused) is weight on every install. tests/ and bench/
are development code and are not scanned. The exceptions, each with its reason, are under
[tool.deptry] in pyproject.toml. deptry reads the metadata of the installed packages: it
needs no network and takes well under a second.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PRODUCTION = ("bot", "scheduler", "storage")


def deptry(project: Path, *packages: str, report: Path) -> tuple[list[dict[str, Any]], int]:
    """deptry's findings on `packages` of `project` (configured by its pyproject.toml), and
    how many files it read."""
    done = subprocess.run(
        [sys.executable, "-m", "deptry", *packages, "--config", "pyproject.toml", "--no-ansi"]
        + ["--json-output", str(report)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    scanned = re.search(r"Scanning (\d+) files?", done.stderr)
    assert scanned and report.exists(), f"deptry did not run: {done.stderr}"
    return json.loads(report.read_text()), int(scanned.group(1))


def _line(finding: dict[str, Any]) -> str:
    where = finding["location"]
    line = f":{where['line']}" if where["line"] else ""
    return f"{where['file']}{line}: {finding['error']['code']} {finding['error']['message']}"


def test_the_production_packages_declare_what_they_import_and_import_what_they_declare(
    tmp_path: Path,
) -> None:
    findings, scanned = deptry(ROOT, *PRODUCTION, report=tmp_path / "deptry.json")
    assert not findings, "dependency problems (fix pyproject.toml or the import):\n" + "\n".join(
        _line(f) for f in findings
    )
    modules = sum(1 for package in PRODUCTION for _ in (ROOT / package).rglob("*.py"))
    assert scanned == modules, f"deptry read {scanned} files of the packages' {modules}"


def test_the_check_catches_each_kind_of_problem(tmp_path: Path) -> None:
    """The same run on a project with one of each problem reports all three."""
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "canary"\nversion = "0"\ndependencies = ["httpx"]\n'
    )
    (tmp_path / "canary").mkdir()
    (tmp_path / "canary" / "__init__.py").write_text(
        "import yaml  # installed, not declared\nimport no_such_module_anywhere\n"
    )
    findings, scanned = deptry(tmp_path, "canary", report=tmp_path / "deptry.json")
    assert scanned == 1
    assert sorted((f["error"]["code"], f["module"]) for f in findings) == [
        ("DEP001", "no_such_module_anywhere"),
        ("DEP002", "httpx"),
        ("DEP003", "yaml"),
    ]
