"""`could_act`: whether a pass could start or stop anything in a state, at any moment while
the state stays the same (the cycle reuses a pass that could not)."""

from __future__ import annotations

from dataclasses import replace

from scheduler.policy.scheduler import could_act, schedule
from scheduler.policy.snapshot import (
    CardNeeds,
    CardType,
    Gpu,
    Host,
    Knobs,
    Pending,
    Running,
    Snapshot,
)

CATALOG = (CardType("A100-80GB", 80, 1.0, 4.0),)
NOW = 1_000_000.0
KNOBS = Knobs()


def _snapshot(
    *,
    held: int = 2,
    running: tuple[Running, ...] | None = None,
    ready: bool = True,
    schedulable: bool = True,
    healthy: bool = True,
    foreign: float = 0.0,
    knobs: Knobs = KNOBS,
) -> Snapshot:
    """One host of two A100s, `held` of them by running job 1 (normal class), and one
    waiting job of one GPU."""
    gpus = tuple(
        Gpu(i + 1, "h", "A100-80GB", 80, healthy, foreign, 1 if i < held else None)
        for i in range(2)
    )
    if running is None:
        ids = tuple(g.id for g in gpus if g.job_id is not None)
        running = (
            (Running(1, "normal", "t", ids, "A100-80GB", NOW - 60, NOW + 3600),) if ids else ()
        )
    waiting = Pending(2, "normal", "t", "u", NOW - 10, ready, 1, CardNeeds(None), 1.0)
    return Snapshot(NOW, (Host("h", gpus, schedulable),), running, (waiting,), CATALOG, knobs=knobs)


def test_a_full_cluster_of_unstoppable_work_can_decide_nothing() -> None:
    snapshot = _snapshot()
    assert not could_act(snapshot)
    plan = schedule(snapshot, explain=True)
    assert not plan.starts and not plan.preemptions and 2 in plan.waits


def test_a_free_usable_gpu_can_start_a_ready_job() -> None:
    assert could_act(_snapshot(held=1))


def test_free_cards_the_ready_jobs_cannot_use_start_nothing() -> None:
    t4 = Host("t", (Gpu(9, "t", "T4-16GB", 16),))
    catalog = (*CATALOG, CardType("T4-16GB", 16, 0.3, 0.5))
    full = replace(_snapshot(), catalog=catalog)
    assert could_act(replace(full, hosts=(*full.hosts, t4)))  # any type will do
    picky = replace(full.pending[0], needs=CardNeeds(("A100-80GB",)))
    assert not could_act(replace(full, hosts=(*full.hosts, t4), pending=(picky,)))
    big = replace(full.pending[0], needs=CardNeeds(None, 40.0))  # 40 GiB per card
    assert not could_act(replace(full, hosts=(*full.hosts, t4), pending=(big,)))
    two = replace(_snapshot(held=1).pending[0], gpus=2)  # one free card, two needed
    assert not could_act(replace(_snapshot(held=1), pending=(two,)))
    unknown = Host("x", (Gpu(8, "x", "slurm:h100", 80),))  # no catalog type: never planned on
    assert not could_act(replace(_snapshot(), hosts=(*_snapshot().hosts, unknown)))


def test_a_free_gpu_nobody_may_use_is_not_free() -> None:
    assert not could_act(_snapshot(held=1, schedulable=False))
    assert not could_act(_snapshot(held=0, healthy=False, running=()))
    assert not could_act(_snapshot(held=1, foreign=30.0))  # another program's memory on it


def test_no_ready_job_means_nothing_to_start() -> None:
    assert not could_act(_snapshot(held=0, ready=False, running=()))


def test_a_running_job_the_policy_may_stop_keeps_every_pass() -> None:
    base = _snapshot()
    victim = base.running[0]
    idle = replace(base, running=(replace(victim, priority="idle"),))
    assert could_act(idle)
    assert not could_act(replace(idle, knobs=Knobs(idle_preemption=False)))
    # Preemptible, but within its minimum run: the clock alone makes it stoppable later.
    fresh = replace(victim, preemptible=True, started_at=NOW - 1)
    assert could_act(replace(base, running=(fresh,)))
    spent = replace(fresh, preemptions=Knobs().preempt_max_per_job)
    assert not could_act(replace(base, running=(spent,)))
    stopping = replace(victim, preempting=True)
    assert could_act(replace(base, running=(stopping,)))
    core = replace(victim, priority="core", preemptible=True)
    assert not could_act(replace(base, running=(core,)))
