"""One value for each quantity: the priority classes are named by one type,
scheduler.policy.priority_classes.PriorityClass. A tuple, list or set of the class names, a dict
keyed by them, a `Literal` of them or an enum of them written anywhere else in bot/, scheduler/
or storage/ is a second definition that can drift from the first (a fourth class added to one
and not the other), so this test reads every module and fails on one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scheduler.policy.priority_classes import CLASS_NAMES, CLASS_RANK, PriorityClass
from storage.models import Job

ROOT = Path(__file__).resolve().parents[1]
HOME = ROOT / "scheduler" / "policy" / "priority_classes.py"
NAMES = frozenset(CLASS_NAMES)


def _names_in(nodes: list[ast.expr | None]) -> set[str]:
    return {
        node.value
        for node in nodes
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES
    }


def _spelled_out(tree: ast.AST) -> list[int]:
    """The lines where two or more class names are written together as one value."""
    lines = []
    for node in ast.walk(tree):
        together: set[str] = set()
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            together = _names_in(list(node.elts))
        elif isinstance(node, ast.Dict):
            together = _names_in(node.keys)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple):
            # Literal["core", "normal", ...]; the tuple inside is seen on its own as well.
            together = _names_in(list(node.slice.elts))
        elif isinstance(node, ast.ClassDef):
            # An enum of the names: CORE = "core", NORMAL = "normal", ...
            together = _names_in(
                [s.value for s in node.body if isinstance(s, ast.Assign | ast.AnnAssign)]
            )
        if len(together) >= 2:
            lines.append(node.lineno)
    return sorted(set(lines))


def _modules() -> list[Path]:
    return [
        path
        for package in ("bot", "scheduler", "storage")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != HOME
    ]


def test_the_priority_classes_are_spelled_out_in_one_place_only() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in _modules()
        for line in _spelled_out(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert found == [], "name them by scheduler.policy.priority_classes.PriorityClass instead"


@pytest.mark.parametrize(
    "written",
    [
        'PRIORITIES = ("core", "normal", "idle")',
        'RANK = {"core": 0, "normal": 1, "idle": 2}',
        'PriorityName = Literal["core", "normal", "idle"]',
        'pick = rng.choices(["core", "normal"], (1, 2))',
        'SHOWN = frozenset({"idle", "core"})',
        'class Priority(StrEnum):\n    CORE = "core"\n    NORMAL = "normal"\n    IDLE = "idle"',
    ],
)
def test_the_scan_sees_a_second_spelling(written: str) -> None:
    assert _spelled_out(ast.parse(written)) == [1]


def test_the_scan_lets_one_name_alone() -> None:
    assert _spelled_out(ast.parse('IDLE = "idle"\nWORDS = ("free", "busy", "idle")')) == []


def test_the_home_holds_every_name_in_rank_order() -> None:
    assert CLASS_NAMES == ("core", "normal", "idle")
    assert [CLASS_RANK[name] for name in CLASS_NAMES] == [0, 1, 2]
    assert _spelled_out(ast.parse(HOME.read_text(encoding="utf-8")))


def test_a_stored_job_made_without_a_class_is_normal() -> None:
    # storage holds the class by name and imports nothing of the scheduler; the one name it
    # writes itself, the column's default, must be the scheduler's.
    assert Job.model_fields["priority"].default == PriorityClass.NORMAL
