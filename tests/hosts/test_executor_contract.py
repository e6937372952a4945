"""The executors' contract (tests/paika_test_executors.py) against paika's own agents and a
toy executor registered for the test (tests/slurm runs the same scenarios against Slurm);
and what the registry says of a pool whose executor it does not know."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta

import pytest
from agent_world import TOKEN, Agent, ok
from paika_test_executors import SCENARIOS, Site, ToyKind, ToyOptions, job, submit

from bot.console import render
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.config import PolicyConfig, policy_from_text
from scheduler.cycle import Cycle
from scheduler.dispatch import AgentDispatcher
from scheduler.errors import ConfigError, Problem
from scheduler.executors import register, unregister
from scheduler.hosts.executor import AgentsExecutor
from scheduler.hosts.poll import Target, poll_all_sync
from scheduler.hosts.report import HostReport
from scheduler.notices.events import RecordingObserver
from scheduler.pools import Pools
from storage.models import JobState

# The contract is the executors'; the database backends have tests of their own.
SQLITE = pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)


@pytest.fixture
def toy() -> Iterator[ToyKind]:
    kind = ToyKind()
    register(kind.kind)
    yield kind
    unregister("toy")


def _until(cycle: Cycle, clock: ManualClock) -> Callable[[Callable[[], bool]], None]:
    def until(done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 60  # real processes run: bounded, and generous
        while time.monotonic() < deadline:
            clock.advance(timedelta(seconds=5))
            cycle.run_once()
            if done():
                return
            time.sleep(0.05)
        raise AssertionError("the condition was not reached within 60 s")

    return until


def _pools(paika: Paika) -> Pools:
    def poll(targets: Sequence[Target]) -> Mapping[str, HostReport]:
        return poll_all_sync(targets, TOKEN, timeout=2.0)

    return Pools(paika.policy, AgentsExecutor(poll, AgentDispatcher(TOKEN, timeout=2.0)))


def _site(paika: Paika, pools: Pools, host: str, exits: Callable[[int], str], runs: str) -> Site:
    cycle = Cycle(paika.engine, paika.policy, paika.clock, pools, RecordingObserver(), pools)
    assert isinstance(paika.clock, ManualClock)
    return Site(paika, cycle, host, _until(cycle, paika.clock), exits, runs)


def _with_pool(policy: PolicyConfig, pool: dict[str, object]) -> PolicyConfig:
    raw = policy.model_dump(mode="json", exclude_unset=True)
    raw["scheduler"] = {**raw.get("scheduler", {}), "headroom": {}}
    raw["pools"] = {"lab": pool}
    return PolicyConfig.model_validate(raw)


@SQLITE
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_the_agents_keep_the_contract(
    world: Paika, agents: dict[str, Agent], scenario: Callable[[Site], None]
) -> None:
    pools = _pools(world)
    try:
        scenario(_site(world, pools, "gpu-a", lambda code: f"exit {code}", "sleep 300"))
    finally:
        pools.close()


@SQLITE
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_a_toy_executor_keeps_the_contract(
    paika: Paika, toy: ToyKind, scenario: Callable[[Site], None]
) -> None:
    # Registered, it is an executor like the others: its pool's section read by its model.
    paika.policy = _with_pool(
        paika.policy, {"executor": "toy", "hosts": ["box-1"], "toy": {"cards": 4}}
    )
    ok(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    ok(paika, "UADMIN", "admin host add box-1 url=http://box-1:1")
    pools = _pools(paika)
    try:
        scenario(_site(paika, pools, "box-1", lambda code: f"exit {code}", "run until stopped"))
    finally:
        pools.close()
    built = toy.built["lab"]
    assert built.options == ToyOptions(cards=4) and built.closed
    if scenario.__name__ == "a_cancelled_run_is_stopped_on_its_host":
        assert built.stopped  # the stop went to the toy, not to an agent


def test_a_pool_of_an_executor_not_registered_names_the_known_ones(toy: ToyKind) -> None:
    catalog = "gpu_types:\n  A100-80GB: {memory_gib: 80, price_per_gpu_hour: 2.2}\n"
    pool = "pools:\n  lab:\n    executor: {name}\n    hosts: [box-1]\n    toy: {{cards: 0}}\n"
    with pytest.raises(ConfigError) as caught:
        policy_from_text(catalog + pool.format(name="toy"), "policy.yml")
    assert caught.value.key == "pools.lab.toy.cards"  # the toy's own model said so
    unregister("toy")
    with pytest.raises(ConfigError) as caught:
        policy_from_text(catalog + pool.format(name="toy"), "policy.yml")
    assert caught.value.key == "pools.lab.executor"
    assert "'agents' or 'slurm'" in caught.value.problem
    register(toy.kind)  # the fixture takes it out again


@SQLITE
def test_logs_of_a_run_on_an_executor_that_keeps_none_say_so(paika: Paika, toy: ToyKind) -> None:
    paika.policy = _with_pool(paika.policy, {"executor": "toy", "hosts": ["box-1"]})
    ok(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    ok(paika, "UADMIN", "admin host add box-1 url=http://box-1:1")
    pools = _pools(paika)
    try:
        site = _site(paika, pools, "box-1", lambda code: f"exit {code}", "run until stopped")
        submit(site, "quiet", "exit 0")
        site.until(lambda: job(paika, "quiet").state == JobState.SUCCEEDED)
    finally:
        pools.close()
    reply = paika.run("logs quiet", "UALICE")
    assert not reply.ok and reply.error is not None
    assert reply.error.problem is Problem.LOGS_NOT_READABLE
    assert "keeps no output" in render(reply.error, paika.policy.zone, "en")
