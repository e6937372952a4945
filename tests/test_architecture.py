"""The house plan, checked from the imports (the contracts are in pyproject.toml):
bot → scheduler → storage and never upward; the faces reach storage only through the
scheduler; only the `paika` command wires the faces to the cycle; the policy is pure; the GPU
host agent stands alone; scheduler/'s floors import only the floors below them; the faces
take the core through one door (scheduler.door, with results, grammar and errors); no package or
module of bot/, scheduler/ or storage/ is in an import cycle with its siblings. And each contract really breaks when someone adds the import it forbids."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

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
        # A face reading the board's module, or the core's runner of commands, beside the door.
        ("bot/blocks/board.py", "import scheduler.service.board", "through one door"),
        ("bot/console.py", "from scheduler.app import Paika", "through one door"),
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


# What a face may import of scheduler/ besides the door's "faces-door" contract's forbidden list.
FACES_MAY_IMPORT = frozenset({"door", "results", "grammar", "errors"})


def test_the_faces_door_leaves_no_module_of_the_scheduler_open() -> None:
    """The contract lists what the faces may not import; a new module of scheduler/ missing
    from that list would be open to them. Each top-level module is one of the four a face
    may import or forbidden, and the list names no module that is gone."""
    (contract,) = [c for c in _contracts() if c["id"] == "faces-door"]
    forbidden = {name.removeprefix("scheduler.") for name in contract["forbidden_modules"]}
    assert not forbidden & FACES_MAY_IMPORT
    assert forbidden | FACES_MAY_IMPORT == _modules_of(ROOT / "scheduler")


def test_the_agent_may_import_no_other_module_of_the_scheduler() -> None:
    """The agent stands alone: every other top-level module of scheduler/ is forbidden to
    it, so a new one cannot slip through, and the list names no module that is gone."""
    (contract,) = [c for c in _contracts() if c["id"] == "agent-alone"]
    forbidden = {
        name.removeprefix("scheduler.")
        for name in contract["forbidden_modules"]
        if name.startswith("scheduler.")
    }
    assert forbidden == _modules_of(ROOT / "scheduler") - {"agent"}


def test_the_scheduler_s_modules_are_its_files_and_packages(tmp_path: Path) -> None:
    (tmp_path / "door.py").write_text("")
    (tmp_path / "service").mkdir()
    (tmp_path / "service" / "__init__.py").write_text("")
    (tmp_path / "examples").mkdir()  # files, no package
    (tmp_path / "__init__.py").write_text("")
    assert _modules_of(tmp_path) == {"door", "service"}


def test_the_door_offers_what_it_types_from_where_it_types_it() -> None:
    """scheduler.door loads each name when a face first takes it (`_WHERE`); the type checker
    and the contracts read its imports under TYPE_CHECKING. The two, and `__all__`, name the
    same things from the same places, and each loads."""
    import scheduler.door as door

    typed = {}
    for node in ast.parse((ROOT / "scheduler" / "door.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for found in node.body:
                assert isinstance(found, ast.ImportFrom), ast.unparse(found)
                for alias in found.names:
                    typed[alias.asname or alias.name] = f"{found.module}.{alias.name}"
    assert typed == door._WHERE
    assert sorted(door.__all__) == sorted(door._WHERE)
    assert all(getattr(door, name) is not None for name in door.__all__)


def test_the_policy_s_words_from_the_door_load_no_database() -> None:
    """bot.i18n takes a wait's codes from the door on paths that never open the database
    (`paika cmd` through the running service's socket): the door loads only what is taken."""
    taken = (
        "import sys; from scheduler.door import Wait, WaitCode; "
        "print(sorted({'sqlalchemy', 'sqlmodel', 'scheduler.app'} & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", taken],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "[]"


def _contracts() -> list[dict[str, Any]]:
    with (ROOT / "pyproject.toml").open("rb") as config:
        contracts: list[dict[str, Any]] = tomllib.load(config)["tool"]["importlinter"]["contracts"]
    return contracts


def _modules_of(package: Path) -> set[str]:
    """The top-level modules of `package`: its .py files and its subpackages."""
    files = {path.stem for path in package.glob("*.py") if path.name != "__init__.py"}
    packages = {path.parent.name for path in package.glob("*/__init__.py")}
    return files | packages


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
