"""The decision log keeps the hosts a job waits for (issue 29): a wait for hosts is written
with their names and why each takes no jobs, read back with them, and written again when
that list changes, but not every cycle while it stays the same (nor after a restart)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import Session, col, select

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.decision_log import DecisionLog, Outcome, wait_of
from scheduler.policy.matching import CardNeeds, CardType
from scheduler.policy.plan import HostOut, Plan, Wait, WaitCode
from scheduler.policy.snapshot import Gpu, Host, Pending, Snapshot
from storage.models import Decision

DOWN = (("gpu-a", HostOut.DOWN.value),)
DRAINING = (("gpu-a", HostOut.DRAINING.value),)
TWO = (("gpu-a", HostOut.DOWN.value), ("gpu-b", HostOut.UNSEEN.value))


@pytest.fixture
def job_id(paika: Paika) -> int:
    paika.run("admin member add <@UALICE> team=vision", "UADMIN")
    reply = paika.run(
        'submit name=big gpus=1 hours=1 priority=normal data=ready type=A100-80GB cmd="x"',
        "UALICE",
    )
    assert reply.ok, reply.text
    return reply.result.view.job.id  # type: ignore[attr-defined, no-any-return]


def _cycle(
    log: DecisionLog,
    paika: Paika,
    clock: ManualClock,
    job_id: int,
    hosts: tuple[tuple[str, str], ...],
    position: int = 1,
) -> int:
    """One cycle's log write where the job waits for `hosts`; how many lines it wrote."""
    clock.advance(timedelta(seconds=10))
    now = clock.now()
    t4 = Host("gpu-t", (Gpu(1, "gpu-t", "T4-16GB", 16),))
    pending = Pending(
        job_id, "normal", "vision", "UALICE", now.timestamp() - 60, True, 1,
        CardNeeds(("A100-80GB",), None), 1.0,
    )  # fmt: skip
    snapshot = Snapshot(
        now.timestamp(), (t4,), (), (pending,), (CardType("T4-16GB", 16, 0.25, 0.35),)
    )
    wait = Wait(job_id, WaitCode.WAITING_FOR_HOSTS, position, None, hosts=hosts)
    plan = Plan((), (), {job_id: wait})
    return log.write(paika.engine, snapshot, plan, Outcome(now, {}, (), ()))


def _details(paika: Paika, job_id: int) -> list[Decision]:
    with Session(paika.engine) as session:
        query = select(Decision).where(Decision.job_id == job_id, Decision.kind == "wait")
        return list(session.exec(query.order_by(col(Decision.id))).all())


def test_a_wait_for_hosts_keeps_their_names_and_why(
    paika: Paika, clock: ManualClock, job_id: int
) -> None:
    assert _cycle(DecisionLog(), paika, clock, job_id, TWO) == 1
    (row,) = _details(paika, job_id)
    assert (row.detail or {})["hosts"] == [["gpu-a", "down"], ["gpu-b", "unseen"]]
    # Read back (as /gpu why reads a past moment), the wait names the same hosts.
    assert wait_of(job_id, row.at, row.detail or {}).hosts == TWO


def test_a_change_of_hosts_is_a_new_reason_and_no_change_writes_nothing(
    paika: Paika, clock: ManualClock, job_id: int
) -> None:
    log = DecisionLog()
    assert _cycle(log, paika, clock, job_id, DOWN) == 1
    assert _cycle(log, paika, clock, job_id, DOWN, position=2) == 0  # its place drifts
    assert _cycle(log, paika, clock, job_id, DRAINING) == 1  # down → draining
    assert _cycle(log, paika, clock, job_id, TWO) == 1  # another host to wait for
    assert _cycle(log, paika, clock, job_id, TWO) == 0
    # A restarted cycle reads what it said last and does not say it again.
    assert _cycle(DecisionLog(), paika, clock, job_id, TWO) == 0
    said = [wait_of(job_id, row.at, row.detail or {}).hosts for row in _details(paika, job_id)]
    assert said == [DOWN, DRAINING, TWO]


def test_a_line_written_before_hosts_were_kept_reads_back_without_them(
    paika: Paika, clock: ManualClock, job_id: int
) -> None:
    wait = wait_of(job_id, clock.now(), {"code": "waiting_for_hosts", "position": 1})
    assert wait.code is WaitCode.WAITING_FOR_HOSTS and wait.hosts == ()
