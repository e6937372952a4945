"""The executors' contract (tests/paika_test_executors.py) against the real one-node Slurm:
the same scenarios the agents and a toy executor pass in tests/hosts."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
import test_slurm_cycle
from conftest import LiveSlurm
from paika_test_executors import SCENARIOS, Site
from test_slurm_cycle import NODE, SQLITE, SlurmSite, open_site, slurm_policy, submit

from bot.console import render
from scheduler.app import Paika
from scheduler.config import PolicyConfig
from scheduler.errors import Problem
from scheduler.service.logs import LogsResult
from storage.models import JobState

# The Slurm cycle tests' own `site` fixture (paika whose only host is the Slurm node).
site = test_slurm_cycle.site


def _until(site: SlurmSite) -> Callable[[Callable[[], bool]], None]:
    def until(done: Callable[[], bool]) -> None:
        def step() -> bool:
            site.ticks.now += 5  # a stop's grace passes as paika's clock does
            return done()

        site.until(step, step=timedelta(seconds=5), timeout=90, what="the scenario's end")

    return until


@SQLITE
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_slurm_keeps_the_contract(site: SlurmSite, scenario: Callable[[Site], None]) -> None:
    contract = Site(
        site.paika,
        site.cycle,
        NODE,
        _until(site),
        lambda code: f"exit {code}",
        "sleep 300",
    )
    scenario(contract)


@SQLITE
def test_logs_of_a_slurm_run_are_read_from_its_log_path(site: SlurmSite) -> None:
    # Before: /gpu logs asked the node's URL for an agent's copy, which a Slurm run never
    # has; now the Slurm executor reads the file its pool's log_path names (shared here).
    submit(site, "talks", "seq -f line-%g 1 50")
    site.until(lambda: site.job("talks").state == JobState.SUCCEEDED, what="its end")
    reply = site.paika.run("logs talks lines=3", "UALICE")
    assert reply.ok, reply.text
    assert isinstance(reply.result, LogsResult)
    assert reply.result.lines == ("line-48", "line-49", "line-50")


@SQLITE
def test_logs_a_slurm_path_names_with_its_own_fields_say_where_to_read_them(
    paika: Paika, live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path
) -> None:
    gres = {"T4-16GB": "t4", "A100-80GB": "a100"}
    policy = slurm_policy(paika, live_slurm, slurm_prefix, shared_dir, gres)
    raw = policy.model_dump(mode="json", exclude_unset=True)
    raw["pools"]["cluster"]["slurm"]["log_path"] = str(shared_dir / "%j.out")
    site = open_site(paika, PolicyConfig.model_validate(raw))
    try:
        submit(site, "hidden", "echo hi")
        site.until(lambda: site.job("hidden").state == JobState.SUCCEEDED, what="its end")
        reply = site.paika.run("logs hidden", "UALICE")
    finally:
        site.cycle.close()
    assert not reply.ok and reply.error is not None
    assert reply.error.problem is Problem.LOGS_ON_CLUSTER
    said = render(reply.error, site.policy.zone, "en")
    assert "%j.out" in said and "tail -n 50" in said and "Slurm fills in" in said
