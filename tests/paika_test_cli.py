"""`paika` run in this test process through typer's CliRunner, as a user would run it.

A command started as a process costs seconds of start-up each time; the tests that need a
real process (signals, start-up, servers, the console script itself) start one themselves.
Run here, a command sees the environment it is given and nothing else of this process's,
and the database engines it opens are closed when it ends, as its process's exit would.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import create_engine
from typer.testing import CliRunner

import storage.db
from bot.cli import app


@dataclass(frozen=True)
class Ran:
    """What a command did: its exit status and what it wrote to each stream."""

    exit_code: int
    stdout: str
    stderr: str


def run_paika(args: list[str], env: Mapping[str, str] | None = None) -> Ran:
    """Run `paika ARGS` with the environment `env` (the whole of it, as a process would get;
    by default this process's)."""
    env = os.environ if env is None else env
    changed: dict[str, str | None] = {name: None for name in os.environ if name not in env}
    changed |= {name: value for name, value in env.items() if os.environ.get(name) != value}
    with _engines_closed_after():
        # An exception no command turns into an exit status is a crash: the test sees it.
        result = CliRunner().invoke(app, args, env=changed, catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)


@contextmanager
def _engines_closed_after() -> Iterator[None]:
    """Close every engine made meanwhile (a command leaves its own to the process's exit)."""
    made: list[Engine] = []

    def recorded(*args: Any, **kwargs: Any) -> Engine:
        engine = create_engine(*args, **kwargs)
        made.append(engine)
        return engine

    with pytest.MonkeyPatch.context() as patch:
        # storage.db makes every engine paika opens (the patch fails if that ever changes).
        patch.setattr(storage.db, "create_engine", recorded)
        try:
            yield
        finally:
            for engine in made:
                engine.dispose()
