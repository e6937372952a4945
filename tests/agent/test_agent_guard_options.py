"""`paika agent`'s options for what it lets jobs be: system accounts, privileged groups, the
capabilities a container keeps. A capability that is not one name stops the agent at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import uvicorn
from test_agent_command import _cli
from typer.testing import CliRunner

import scheduler.agent.command as command
from scheduler.agent.jobs import JobStore


@pytest.fixture(autouse=True)
def _keep_umask(keep_umask: None) -> None:
    """`paika agent` sets the process's umask; these tests run it in pytest's process."""


@pytest.fixture
def stores(monkeypatch: pytest.MonkeyPatch) -> list[JobStore]:
    """The job stores `paika agent` makes; uvicorn serves nothing."""
    made: list[JobStore] = []

    def keep(*args: Any, **kwargs: Any) -> JobStore:
        made.append(JobStore(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(command, "JobStore", keep)
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: None)
    monkeypatch.setenv("PAIKA_AGENT_TOKEN", "tok-0123456789")
    return made


def test_the_options_reach_the_rules_jobs_run_under(tmp_path: Path, stores: list[JobStore]) -> None:
    result = CliRunner().invoke(
        _cli(),
        ["agent", "--simulate", "1xT4", "--state-dir", str(tmp_path / "s")]
        + ["--allow-system-accounts", "--allow-group", "docker", "--allow-group", "adm"]
        + ["--container-cap-add", "ipc_lock", "--container-cap-add", "CAP_SYS_NICE"],
    )
    assert result.exit_code == 0, result.output
    [store] = stores
    rules = store.run_as
    assert rules.allow_system_accounts and rules.allowed_groups == {"docker", "adm"}
    assert rules.container_caps == ("IPC_LOCK", "CAP_SYS_NICE")


def test_by_default_nothing_is_allowed(tmp_path: Path, stores: list[JobStore]) -> None:
    result = CliRunner().invoke(
        _cli(), ["agent", "--simulate", "1xT4", "--state-dir", str(tmp_path / "s")]
    )
    assert result.exit_code == 0, result.output
    rules = stores[0].run_as
    assert (rules.allow_system_accounts, rules.allowed_groups, rules.container_caps) == (
        False,
        frozenset(),
        (),
    )


def test_a_capability_that_is_not_one_name_stops_the_agent(
    tmp_path: Path, stores: list[JobStore]
) -> None:
    result = CliRunner().invoke(
        _cli(),
        ["agent", "--simulate", "1xT4", "--state-dir", str(tmp_path / "s")]
        + ["--container-cap-add", "ALL"],
    )
    assert result.exit_code == 2
    assert "--container-cap-add: 'ALL' is not one Linux capability" in result.output
    assert stores == []
