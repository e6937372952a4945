"""The house plan, checked from the imports (the contracts are in pyproject.toml):
bot → scheduler → storage and never upward; the faces reach storage only through the
scheduler; only the `paika` command wires the faces to the cycle; the policy is pure; the GPU
host agent stands alone; scheduler/'s floors import only the floors below them; no package or
module of bot/, scheduler/ or storage/ is in an import cycle with its siblings. And each contract really breaks when someone adds the import it forbids."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bot", "scheduler", "storage")
LINT = (
    "import sys; from importlinter.cli import lint_imports; "
    "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True))"
)


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports on the packages under `root`, with `root`'s pyproject.toml, no cache."""
    return subprocess.run(
        [sys.executable, "-c", LINT],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def copy_of_the_tree(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_house_plan_holds() -> None:
    from importlinter.cli import lint_imports

    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True) == 0


@pytest.mark.parametrize(
    ("where", "line", "broken"),
    [
        ("scheduler/service/board.py", "import bot.app", "arrows run downward only"),
        ("bot/listeners/commands.py", "import scheduler.cycle", "wires the faces to the cycle"),
        ("bot/blocks/job.py", "import storage.models", "the faces never touch storage"),
        ("scheduler/policy/plan.py", "import storage.db", "the policy is pure"),
        ("scheduler/agent/jobs.py", "import scheduler.errors", "the GPU host agent stands alone"),
        # The policy's config importing an executor that is built on it: a cycle.
        ("scheduler/config.py", "import scheduler.slurm.batch", "no import cycles"),
        ("scheduler/grammar/errors.py", "import scheduler.grammar.values", "no import cycles"),
        # Slack's replies drawing with the console's words while the console uses theirs.
        ("bot/blocks/replies.py", "import bot.console", "no import cycles"),
        # The core reaching up to the running service, and an executor to the door.
        ("scheduler/ledger.py", "import scheduler.cycle", "the floors of scheduler/"),
        ("scheduler/hosts/poll.py", "import scheduler.app", "the floors of scheduler/"),
    ],
)
def test_a_forbidden_import_breaks_the_plan(
    copy_of_the_tree: Path, where: str, line: str, broken: str
) -> None:
    module = copy_of_the_tree / where
    module.write_text(module.read_text() + f"\n{line}  # added by the test\n")
    result = _lint(copy_of_the_tree)
    assert result.returncode != 0, result.stdout + result.stderr
    report = " ".join((result.stdout + result.stderr).split())
    assert "Broken contracts" in report, report
    assert broken in report.split("Broken contracts", 1)[1], report


# Libraries only the faces use: the bot draws the pictures and speaks to Slack.
FACES_ONLY = ("matplotlib", "PIL", "slack_sdk", "slack_bolt")


def test_the_scheduler_and_storage_draw_nothing_and_never_speak_to_slack() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for package in ("scheduler", "storage")
        for path in sorted((ROOT / package).rglob("*.py"))
        for name in _imported(path)
        if name.split(".")[0] in FACES_ONLY
    ]
    assert found == []


def test_the_check_for_face_libraries_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "drawn.py"
    module.write_text("def draw() -> None:\n    from matplotlib.figure import Figure\n")
    assert _imported(module) == ["matplotlib.figure"]


def _imported(path: Path) -> list[str]:
    """Every module `path` imports, at any depth (a deferred import counts too)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def _executor_by_name(tree: ast.AST) -> list[int]:
    """Lines comparing something's `executor` with a name written out (`pool.executor ==
    "slurm"`): what the registry is for."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any(isinstance(s, ast.Attribute) and s.attr == "executor" for s in sides)
            written = any(isinstance(s, ast.Constant) and isinstance(s.value, str) for s in sides)
            if named and written:
                found.append(node.lineno)
    return found


def test_no_code_asks_which_executor_a_pool_has_by_its_name() -> None:
    # Each executor is reached through scheduler/executors.py's registry (its kind says what
    # it needs): an `if pool.executor == "slurm"` elsewhere is a third executor's trap.
    root = Path(__file__).resolve().parent.parent
    found = {
        str(path.relative_to(root)): lines
        for package in ("bot", "scheduler", "storage")
        for path in sorted((root / package).rglob("*.py"))
        if (lines := _executor_by_name(ast.parse(path.read_text(), str(path))))
    }
    assert found == {}
    assert _executor_by_name(ast.parse('if pool.executor == "slurm": pass'))  # it would see one
