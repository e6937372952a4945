"""Fixtures of the host tests: simulated agents over real HTTP, registered with paika."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_world import Agent, ok

from scheduler.app import Paika


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[dict[str, Agent]]:
    started = {
        name: Agent(name, spec, tmp_path / name)
        for name, spec in [("gpu-a", "2xA100-80GB"), ("gpu-b", "2xT4-16GB")]
    }
    for agent in started.values():
        agent.start()
    yield started
    for agent in started.values():
        agent.stop_all_jobs()
        agent.stop()


@pytest.fixture
def world(paika: Paika, agents: dict[str, Agent]) -> Paika:
    """Two agents registered as hosts; no headroom, so two-GPU jobs may fill a host."""
    paika.policy = paika.policy.model_copy(
        update={"scheduler": paika.policy.scheduler.model_copy(update={"headroom": {}})}
    )
    ok(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    ok(paika, "UADMIN", "admin member add <@UVERA> team=vision role=approver")
    for agent in agents.values():
        ok(paika, "UADMIN", f"admin host add {agent.name} url={agent.url}")
    return paika
