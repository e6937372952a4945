"""The cycle against real simulated agents over HTTP on loopback: start, finish, fail,
lose, recover, requeue, preempt, cancel, restart. Database times follow a manual clock;
the jobs are real processes on the agents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

from agent_world import TOKEN, Agent, job, make_cycle, ok, submit, until
from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.hosts.poll import Target, poll_all_sync
from scheduler.hosts.report import HostReport
from scheduler.notices.events import EventKind, RecordingObserver
from storage.models import Allocation, Decision, Host, JobEvent, JobState, LedgerEntry, Match


def test_a_job_starts_on_its_cheapest_card_runs_and_is_charged(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    notifier = RecordingObserver()
    cycle = make_cycle(world, notifier)
    submit(world, "quick", "sleep 0.3; echo done", gpus=2)
    result = cycle.run_once()
    assert result.started == [job(world, "quick").id]
    running = job(world, "quick")
    assert running.state == JobState.RUNNING and running.attempts == 1
    assert [j.job_id for j in agents["gpu-b"].store.all_jobs()] == [f"{running.id}.1"]  # type: ignore[union-attr]
    with Session(world.engine) as session:
        match = session.exec(select(Match)).one()
    assert match.chosen_type == "T4-16GB"
    until(cycle, clock, lambda: job(world, "quick").state == JobState.SUCCEEDED)
    with Session(world.engine) as session:
        entries = session.exec(select(LedgerEntry)).all()
        assert session.exec(select(Allocation).where(Allocation.ended_at.is_(None))).all() == []  # type: ignore[union-attr]
    assert len(entries) == 2 and all(e.gpu_type == "T4-16GB" and e.gpu_hours > 0 for e in entries)
    assert EventKind.JOB_STARTED in notifier.kinds() and EventKind.JOB_FINISHED in notifier.kinds()


def test_a_failing_job_is_recorded_with_its_exit_code(world: Paika, clock: ManualClock) -> None:
    notifier = RecordingObserver()
    cycle = make_cycle(world, notifier)
    submit(world, "broken", "exit 3")
    cycle.run_once()
    until(cycle, clock, lambda: job(world, "broken").state == JobState.FAILED)
    failed = job(world, "broken")
    assert failed.exit_code == 3 and "exited with 3" in (failed.state_reason or "")
    assert EventKind.JOB_FAILED in notifier.kinds()


def test_a_dead_agent_takes_its_host_down_and_its_job_keeps_its_gpus(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    notifier = RecordingObserver()
    cycle = make_cycle(world, notifier)
    submit(world, "long", "sleep 8", gpus=2, extra="type=A100-80GB")
    cycle.run_once()
    assert job(world, "long").state == JobState.RUNNING
    agents["gpu-a"].stop()
    submit(world, "next", "sleep 30", gpus=2, extra="type=A100-80GB")
    for _ in range(3):
        clock.advance(timedelta(seconds=10))
        cycle.run_once()
        assert job(world, "next").state == JobState.QUEUED  # never on the down host's GPUs
    with Session(world.engine) as session:
        assert session.exec(select(Host).where(Host.name == "gpu-a")).one().state == "down"
    assert EventKind.HOST_DOWN in notifier.kinds()
    assert job(world, "long").state == JobState.RUNNING  # not unknown before the grace period
    clock.advance(timedelta(seconds=121))
    cycle.run_once()
    assert job(world, "long").state == JobState.UNKNOWN  # not failed: the host may come back
    assert EventKind.JOB_UNKNOWN in notifier.kinds()
    assert job(world, "next").state == JobState.QUEUED
    agents["gpu-a"].start()  # same state dir, same port
    clock.advance(timedelta(seconds=10))
    result = cycle.run_once()
    assert EventKind.HOST_UP in [e.kind for e in result.events]
    assert job(world, "long").state == JobState.RUNNING  # the host's word: still running
    # "next" gets the host once "long" has finished there.
    until(cycle, clock, lambda: job(world, "next").state == JobState.RUNNING)
    assert job(world, "long").state == JobState.SUCCEEDED


def test_a_start_the_host_cannot_take_is_undone_and_requeued(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    notifier = RecordingObserver()

    def poll_then_die(targets: Sequence[Target]) -> Mapping[str, HostReport]:
        reports = poll_all_sync(targets, TOKEN, timeout=2.0)
        agents["gpu-b"].stop()  # the host dies between the poll and the start
        return reports

    submit(world, "unlucky", "sleep 5")
    result = make_cycle(world, notifier, poll_then_die).run_once()
    assert result.requeued == [job(world, "unlucky").id] and result.started == []
    requeued = job(world, "unlucky")
    assert requeued.state == JobState.QUEUED and "start failed on gpu-b" in (
        requeued.state_reason or ""
    )
    assert requeued.attempts == 0  # the host never saw it: no attempt is used up
    with Session(world.engine) as session:
        assert session.exec(select(Allocation)).all() == []  # no GPU left allocated to it
    assert EventKind.JOB_REQUEUED in notifier.kinds()


def test_restarting_the_scheduler_starts_nothing_twice(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    submit(world, "steady", "sleep 20", gpus=2, extra="type=A100-80GB")
    make_cycle(world, RecordingObserver()).run_once()
    for _ in range(3):  # a new scheduler process each time: fresh objects, same database
        clock.advance(timedelta(seconds=10))
        make_cycle(world, RecordingObserver()).run_once()
    assert len(agents["gpu-a"].store.all_jobs()) == 1  # type: ignore[union-attr]
    steady = job(world, "steady")
    assert steady.state == JobState.RUNNING and steady.attempts == 1


def test_an_idle_job_is_preempted_for_core_work_and_requeued(
    world: Paika, clock: ManualClock
) -> None:
    notifier = RecordingObserver()
    cycle = make_cycle(world, notifier)
    submit(world, "sweep", "sleep 60", gpus=2, priority="idle", extra="type=A100-80GB")
    cycle.run_once()
    submit(
        world, "paper", "sleep 60", gpus=2, priority="core", user="UVERA", extra="type=A100-80GB"
    )
    clock.advance(timedelta(seconds=10))
    result = cycle.run_once()
    assert result.plan is not None
    assert result.preempted == [job(world, "sweep").id], (
        result.plan,
        job(world, "sweep").state,
        job(world, "paper").priority,
    )
    assert job(world, "sweep").stop_reason == "preempt"
    until(cycle, clock, lambda: job(world, "paper").state == JobState.RUNNING)
    sweep = job(world, "sweep")
    assert sweep.state == JobState.QUEUED and sweep.stop_reason is None
    assert EventKind.JOB_PREEMPTED in notifier.kinds()


def test_cancelling_a_running_job_stops_it_on_its_host(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "oops", "sleep 60")
    cycle.run_once()
    ok(world, "UALICE", "cancel oops")
    until(cycle, clock, lambda: job(world, "oops").state == JobState.CANCELLED)
    [agent_job] = agents["gpu-b"].store.all_jobs()  # type: ignore[union-attr]
    assert agent_job.state != "running"


def test_a_job_submitted_while_a_cycle_runs_never_reads_started_before_it_was_submitted(
    world: Paika, clock: ManualClock
) -> None:
    # The cycle's clock reading is taken when it begins; the job is submitted a few
    # seconds later, while the agents are being polled, and the same cycle starts it.
    notifier = RecordingObserver()

    def poll_while_someone_submits(targets: Sequence[Target]) -> Mapping[str, HostReport]:
        reports = poll_all_sync(targets, TOKEN, timeout=2.0)
        clock.advance(timedelta(seconds=3))
        submit(world, "eager", "sleep 30")
        return reports

    cycle = make_cycle(world, notifier, poll_while_someone_submits)
    began = clock.now()
    result = cycle.run_once()
    eager = job(world, "eager")
    assert result.at == began and result.started == [eager.id]
    assert eager.submitted_at > began
    assert eager.started_at is not None and eager.started_at >= eager.submitted_at
    assert eager.confirmed_at is not None and eager.confirmed_at >= eager.submitted_at
    with Session(world.engine) as session:
        allocations = session.exec(select(Allocation).where(Allocation.job_id == eager.id)).all()
        history = session.exec(select(JobEvent).where(JobEvent.job_id == eager.id)).all()
        starts = session.exec(
            select(Decision).where(Decision.job_id == eager.id, Decision.kind == "start")
        ).all()
        match = session.exec(select(Match).where(Match.job_id == eager.id)).one()
    # What the ledger charges from, the job's history, its match and the decision log all
    # say the same moment, and none of them before the submission.
    assert allocations and {a.started_at for a in allocations} == {eager.started_at}
    assert [e.at for e in history if e.to_state == JobState.RUNNING] == [eager.started_at]
    assert [line.at for line in starts] == [eager.started_at]
    assert match.at == eager.started_at
    told = [e for e in notifier.events if e.kind is EventKind.JOB_STARTED]
    assert [e.at for e in told] == [eager.started_at]
