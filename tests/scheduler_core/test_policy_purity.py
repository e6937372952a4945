"""scheduler/policy is pure: it imports no I/O library and never reads the clock."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

POLICY = Path(__file__).resolve().parents[2] / "scheduler" / "policy"
ALLOWED_ROOTS = {
    "__future__",
    "collections",
    "dataclasses",
    "datetime",
    "enum",
    "functools",
    "heapq",
    "itertools",
    "math",
    "operator",
    "bisect",
    "typing",
    "types",
    "scheduler",
}
CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter"}


def _modules() -> list[Path]:
    return sorted(POLICY.rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_imports_only_pure_modules(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            assert name.split(".")[0] in ALLOWED_ROOTS, f"{path.name} imports {name}"
            if name.startswith("scheduler"):
                assert name.startswith("scheduler.policy"), f"{path.name} imports {name}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_never_reads_the_clock(path: Path) -> None:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            assert node.func.attr not in CLOCK_CALLS, (
                f"{path.name}:{node.lineno} calls .{node.func.attr}()"
            )
