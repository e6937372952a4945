"""The agent stands alone: it imports nothing of paika outside its package, and `paika agent`
starts without the scheduler's database, Slack, periodic or plotting stacks."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from agent_harness import run_paika_counting_modules

import scheduler.agent

AGENT_DIR = Path(scheduler.agent.__file__).parent
PAIKA_PACKAGES = {"bot", "scheduler", "storage"}
NOT_FOR_THE_AGENT = {
    "sqlalchemy",
    "sqlmodel",
    "alembic",
    "apscheduler",
    "slack_sdk",
    "slack_bolt",
    "matplotlib",
    "boto3",
}


def _check_lean(modules: list[str]) -> None:
    """Nothing of the scheduler's stacks, and of paika only the command line and the agent."""
    loaded = {name.split(".")[0] for name in modules}
    assert sorted(loaded & NOT_FOR_THE_AGENT) == []
    paika = [name for name in modules if name.split(".")[0] in PAIKA_PACKAGES]
    outside = [n for n in paika if n not in ("scheduler", "bot") and _outside_the_agent(n)]
    assert outside == ["bot.cli"]


def test_the_agent_starts_serving_without_the_schedulers_stacks(tmp_path: Path) -> None:
    # (here every extra is installed; test_agent_install.py starts it from the agent's own
    # install and counts its modules there)
    args = ("agent", "--simulate", "2xT4", "--state-dir", str(tmp_path / "agent"))
    started = run_paika_counting_modules(sys.executable, *args)
    assert started["app"] == "Starlette"  # the app was built, as the command serves it
    modules = started["modules"]
    assert isinstance(modules, list)
    _check_lean(modules)


def test_the_agents_help_loads_none_of_the_scheduler() -> None:
    # (typer draws help with rich where it is installed: no module count here)
    modules = run_paika_counting_modules(sys.executable, "agent", "--help")["modules"]
    assert isinstance(modules, list)
    _check_lean(modules)


# ---------------------------------------------------------------- imports, read from the source


def _package_of(path: Path) -> str:
    return ".".join(["scheduler", "agent", *path.relative_to(AGENT_DIR).parent.parts])


def _imported_names(path: Path, package: str) -> list[tuple[int, str]]:
    """Every module a file of `package` imports, at its top or inside functions, absolute or
    relative, and by importlib.import_module / __import__ with a literal name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names += [(node.lineno, base)]
            names += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if called in ("import_module", "__import__") and isinstance(first, ast.Constant):
                names.append((node.lineno, str(first.value)))
    return names


def _outside_the_agent(name: str) -> bool:
    return name.split(".")[0] in PAIKA_PACKAGES and not (
        name == "scheduler.agent" or name.startswith("scheduler.agent.")
    )


def test_the_agent_package_imports_nothing_else_of_paika() -> None:
    files = sorted(AGENT_DIR.rglob("*.py"))
    assert len(files) > 10
    found = [
        f"{path.relative_to(AGENT_DIR)}:{line}: {name}"
        for path in files
        for line, name in _imported_names(path, _package_of(path))
        if _outside_the_agent(name)
    ]
    assert found == []


@pytest.mark.parametrize(
    ("source", "outside"),
    [
        ("from scheduler.errors import PaikaError", True),
        ("def f():\n    import storage.db", True),
        ("from .. import serving", True),
        ("import importlib\nimportlib.import_module('bot.runtime')", True),
        ("from scheduler.agent.errors import AgentError", False),
        ("from . import protocol", False),
        ("import httpx", False),
    ],
)
def test_the_import_reader_sees_every_form(tmp_path: Path, source: str, outside: bool) -> None:
    module = tmp_path / "example.py"
    module.write_text(source + "\n")
    names = [name for _, name in _imported_names(module, "scheduler.agent")]
    assert any(_outside_the_agent(name) for name in names) is outside
