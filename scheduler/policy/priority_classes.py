"""The priority classes, core > normal > idle: the one type every part of paika names them by.

The policy ranks by them, the grammar offers them, the policy file keys its per-class
settings by them, the services and the faces compare against them. The ranking is the
policy's, so the type is too: the policy is the lowest floor of scheduler/ (scheduler/__init__.py)
and imports nothing else of paika, so every floor above, the grammar's included, may import
it from here, and the faces name it through the scheduler's records.

The database keeps a job's class by name, a plain string: storage/ imports nothing of the
scheduler, and a column needs no type of its own to hold one of three words. The one name
storage writes itself, the default of a row made without a class, is checked against
`PriorityClass.NORMAL` by tests/test_one_value.py, which also fails when a tuple, set, dict or
`Literal` of the class names is written again anywhere in bot/, scheduler/ or storage/ outside
this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


class PriorityClass(StrEnum):
    """core > normal > idle, in that order; idle only fills gaps."""

    CORE = "core"
    NORMAL = "normal"
    IDLE = "idle"


# Each class's rank, 0 the first served; a name that is no class ranks after them all
# (callers say so with `.get(name, len(CLASS_RANK))`).
CLASS_RANK: Mapping[str, int] = MappingProxyType(
    {priority.value: rank for rank, priority in enumerate(PriorityClass)}
)
# The names as plain strings, in rank order: what a user may type and a trace may carry.
CLASS_NAMES: tuple[str, ...] = tuple(priority.value for priority in PriorityClass)
