"""What the policy hands the decision log: whom a job waits behind, and its reservations."""

from __future__ import annotations

from dataclasses import replace

from builders import NOW, host, job, running, snapshot

from scheduler.policy.plan import Reserved, WaitCode
from scheduler.policy.scheduler import schedule
from scheduler.policy.snapshot import HOUR, Backfill, Knobs


def test_a_job_waits_behind_the_first_higher_class_job_that_could_take_its_cards() -> None:
    t4, a100 = host("t", "T4-16GB", 2), host("a", "A100-80GB", 2)
    busy = [running(90, t4, 2, ends_in_h=1), running(91, a100, 2, ends_in_h=5)]
    pending = [
        job(1, priority="core", types=("T4-16GB",)),
        job(2, priority="core", types=("T4-16GB",)),
        job(3),  # normal, fits either type
        job(4, ready=False),  # waiting for data: holds nobody up
        job(5, priority="idle"),
    ]
    plan = schedule(snapshot([t4, a100], pending, busy), explain=True)
    waits = plan.waits
    assert waits[3].code is WaitCode.BEHIND_HIGHER_PRIORITY and waits[3].behind == 1
    assert waits[5].code is WaitCode.BEHIND_HIGHER_PRIORITY and waits[5].behind == 1
    assert waits[2].code is WaitCode.BEHIND_EARLIER and waits[2].behind == 1
    assert waits[1].behind is None and waits[4].behind is None
    # whom it waits behind does not drift with the clock, as the ETA's type may
    moved = replace(snapshot([t4, a100], pending, busy), now=NOW + 600)
    later = schedule(moved, explain=True)
    assert {i: w.behind for i, w in later.waits.items()} == {i: w.behind for i, w in waits.items()}


def test_without_classes_a_job_waits_behind_the_first_job_of_any_class() -> None:
    t4 = host("t", "T4-16GB", 1)
    busy = [running(90, t4, 1, ends_in_h=1)]
    pending = [job(1, priority="idle"), job(2, priority="core")]
    plan = schedule(snapshot([t4], pending, busy, knobs=Knobs(respect_classes=False)), explain=True)
    first, second = sorted(plan.waits.values(), key=lambda w: w.position)
    assert second.code is WaitCode.BEHIND_EARLIER and second.behind == first.job_id


def test_the_plan_names_the_reservation_easy_backfill_makes() -> None:
    h = host("h1", "A100-80GB", 4)
    busy = running(9, h, 2, ends_in_h=2)
    pending = [job(1, gpus=4, hours=8, priority="core"), job(2, gpus=1, hours=1)]
    plan = schedule(snapshot([h], pending, [busy]))
    assert plan.reservations == (Reserved(1, "A100-80GB", NOW + 2 * HOUR, 4),)
    strict = schedule(
        snapshot([h], pending, [busy], knobs=replace(Knobs(), backfill=Backfill.NONE))
    )
    assert strict.reservations == ()


def test_each_waiting_core_job_keeps_its_place_on_the_next_host_to_free() -> None:
    """Three hosts free up an hour apart and one lone card is free: each core job keeps a
    place where the jobs before it left none, the first on the first host to free, the next
    on the next (a place kept changes when that host is free for the jobs after it)."""
    hosts = [host(name, "A100-80GB", 2) for name in ("a", "b", "c")]
    lone = host("d", "A100-80GB", 1)
    busy = [running(90 + i, h, 2, ends_in_h=i + 1) for i, h in enumerate(hosts)]
    pending = [job(i, gpus=2, hours=16, priority="core") for i in (1, 2, 3)]
    for reservations in (True, False):
        plan = schedule(snapshot([*hosts, lone], pending, busy), reservations=reservations)
        assert plan.starts == ()
    plan = schedule(snapshot([*hosts, lone], pending, busy))
    assert plan.reservations == tuple(
        Reserved(i, "A100-80GB", NOW + i * HOUR, 2) for i in (1, 2, 3)
    )
