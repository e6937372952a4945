"""Fixtures for the agent tests (helpers live in agent_harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_harness import Agent, shutdown_agent, start_agent


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    running = start_agent(tmp_path / "state")
    yield running
    shutdown_agent(running)
