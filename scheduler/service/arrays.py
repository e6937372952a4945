"""Arrays: one submit, many jobs (issue 32). `count=20` makes 20 copies, each told its place
by $PAIKA_ARRAY_INDEX; `sweep="lr=1e-4,3e-4 bs=32,64"` makes one job per point of the grid,
each value put into the command where it says {lr} and into $PAIKA_SWEEP_LR; `max_running=4`
lets at most four run at once (the policy holds the rest, scheduler/policy/scheduler.py).

The array has one number, its first job's id (#40); its jobs are #40.1, #40.2 … (and keep
their own ids too). `/gpu status 40` summarises it, `/gpu cancel 40` cancels every job of it
still to end, `#40.3` names one.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.errors import Problem, UserError
from scheduler.grammar.spec import MAX_ARRAY
from storage.limits import JOB_NAME

# A sweep's key: what {key} in the command and $PAIKA_SWEEP_<KEY> name.
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")
ENV_INDEX = "PAIKA_ARRAY_INDEX"
ENV_SIZE = "PAIKA_ARRAY_SIZE"
ENV_ID = "PAIKA_ARRAY_ID"


@dataclass(frozen=True)
class Member:
    """One job of an array: its place (1-based) and, in a sweep, its values."""

    index: int
    values: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ArrayPlan:
    """The jobs one submit makes, and how many of them may run at once (None: any)."""

    members: tuple[Member, ...]
    max_running: int | None

    @property
    def size(self) -> int:
        return len(self.members)


def plan(fields: Mapping[str, Any]) -> ArrayPlan | None:
    """The array a submit asks for (None: one job), or why it cannot be."""
    count, sweep, most = fields.get("count"), fields.get("sweep"), fields.get("max_running")
    if count is not None and sweep is not None:
        raise UserError(Problem.ARRAY_COUNT_AND_SWEEP, count=count, sweep=sweep)
    if count is None and sweep is None:
        if most is not None:
            raise UserError(Problem.ARRAY_MAX_RUNNING_ALONE, most=most)
        return None
    if sweep is not None:
        members = tuple(Member(i, point) for i, point in enumerate(grid(sweep), start=1))
    else:
        members = tuple(Member(i) for i in range(1, int(count or 0) + 1))
    longest = len(f"{fields['name']}.{len(members)}")
    if longest > JOB_NAME:
        raise UserError(
            Problem.ARRAY_NAME_TOO_LONG,
            name=fields["name"],
            most=JOB_NAME - longest + len(fields["name"]),
        )
    return ArrayPlan(members, most)


def grid(text: str) -> list[dict[str, str]]:
    """The points of a sweep, "lr=1e-4,3e-4 bs=32,64", in order (the last key varies
    fastest): each a mapping of key to value."""
    axes: dict[str, list[str]] = {}
    for part in text.split():
        key, sep, values = part.partition("=")
        items = values.split(",")
        if not sep or not _KEY.fullmatch(key) or not all(items) or len(set(items)) != len(items):
            raise UserError(Problem.SWEEP_MALFORMED, part=part)
        if key in axes:
            raise UserError(Problem.SWEEP_KEY_TWICE, name=key)
        axes[key] = items
    if not axes:
        raise UserError(Problem.SWEEP_MALFORMED, part=text)
    points = 1
    for items in axes.values():
        points *= len(items)
    if points > MAX_ARRAY:
        raise UserError(Problem.SWEEP_TOO_BIG, points=points, most=MAX_ARRAY)
    if points < 2:
        raise UserError(Problem.SWEEP_ONE_POINT, sweep=text)
    return [dict(zip(axes, point, strict=True)) for point in itertools.product(*axes.values())]


def command_for(command: str, values: Mapping[str, str]) -> str:
    """A member's command: each {key} of the sweep replaced by its value (any other brace is
    left as written: shells and Python use them too)."""
    for key, value in values.items():
        command = command.replace("{" + key + "}", value)
    return command


def environment(array_id: int, index: int, size: int, values: Mapping[str, Any]) -> dict[str, str]:
    """What a member's run is told of its place: PAIKA_ARRAY_ID, _INDEX (1-based), _SIZE and
    PAIKA_SWEEP_<KEY> for each value of its sweep."""
    env = {ENV_ID: str(array_id), ENV_INDEX: str(index), ENV_SIZE: str(size)}
    env.update({f"PAIKA_SWEEP_{key.upper()}": str(value) for key, value in values.items()})
    return env
