"""Fixtures for the agent tests (helpers live in agent_harness.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_harness import Agent, shutdown_agent, start_agent


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    running = start_agent(tmp_path / "state")
    yield running
    shutdown_agent(running)


@pytest.fixture
def keep_umask() -> Iterator[None]:
    """The process's umask as it was before the test (`paika agent` sets its own)."""
    old = os.umask(0o022)
    os.umask(old)
    yield
    os.umask(old)
