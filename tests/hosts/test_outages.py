"""Host outages and lost answers, against real agents over HTTP: no job is failed for an
outage, none is killed as an orphan while paika holds it, none runs twice."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from agent_world import Agent, job, make_cycle, ok, submit, until
from sqlmodel import Session, col, select

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.cycle import Cycle
from scheduler.dispatch import AgentDispatcher, DispatchError, StartOrder
from scheduler.notices.events import EventKind, LostWhy, RecordingObserver
from storage.models import Allocation, JobState, LedgerEntry

TOKEN = "test-token-0123456789"
A100 = "type=A100-80GB"  # gpu-a's cards: the job's host is the one the test takes down


def runs_on(agent: Agent) -> dict[str, str]:
    """Every run the agent knows (even while it is not serving) → its state."""
    if agent.store is not None:
        return {r.job_id: str(r.state) for r in agent.store.all_jobs()}
    from scheduler.agent.jobs import JobStore

    store = JobStore(agent.state_dir)
    try:
        return {r.job_id: str(r.state) for r in store.all_jobs()}
    finally:
        store.close()


def open_allocations(paika: Paika) -> list[Allocation]:
    with Session(paika.engine) as session:
        return list(session.exec(select(Allocation).where(col(Allocation.ended_at).is_(None))))


def silent_cycles(cycle: Cycle, clock: ManualClock, seconds: float, step: float = 60) -> None:
    """Run cycles while `seconds` of manual time pass."""
    passed = 0.0
    while passed < seconds:
        clock.advance(timedelta(seconds=step))
        passed += step
        cycle.run_once()


def test_a_job_that_outlives_its_hosts_outage_is_unknown_then_running_again(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    notifier = RecordingObserver()
    cycle = make_cycle(world, notifier)
    submit(world, "long", "sleep 60", gpus=2, extra=A100)
    cycle.run_once()
    first = job(world, "long")
    assert first.state == JobState.RUNNING and first.confirmed_at is not None
    agents["gpu-a"].stop()  # the agent dies; its job goes on running on the host
    silent_cycles(cycle, clock, 60)
    assert job(world, "long").state == JobState.RUNNING  # a short silence changes nothing
    silent_cycles(cycle, clock, 120)
    unknown = job(world, "long")
    assert unknown.state == JobState.UNKNOWN and "not answered" in (unknown.state_reason or "")
    assert notifier.kinds().count(EventKind.JOB_UNKNOWN) == 1
    told = [e for e in notifier.events if e.kind is EventKind.JOB_UNKNOWN]
    assert told[0].owner == "UALICE"
    # Its GPUs stay held: another A100 job waits, however long the silence lasts.
    submit(world, "next", "sleep 5", gpus=2, extra=A100)
    silent_cycles(cycle, clock, 3 * 3600, step=600)
    assert job(world, "long").state == JobState.UNKNOWN
    assert job(world, "next").state == JobState.QUEUED
    assert len(open_allocations(world)) == 2

    agents["gpu-a"].start()  # same state dir, same port: the agent comes back
    clock.advance(timedelta(seconds=10))
    cycle.run_once()
    back = job(world, "long")
    assert back.state == JobState.RUNNING and back.attempts == 1
    assert back.started_at == first.started_at  # the same run, not a new one
    assert EventKind.JOB_RESUMED in notifier.kinds()
    assert runs_on(agents["gpu-a"]) == {f"{back.id}.1": "running"}  # not killed as an orphan
    assert EventKind.JOB_LOST not in notifier.kinds()


def test_a_job_that_finishes_during_the_outage_succeeds_and_is_charged_for_its_run(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    notifier = RecordingObserver()
    cycle = make_cycle(world, notifier)
    submit(world, "short", "sleep 0.5", gpus=2, extra=A100)
    cycle.run_once()
    agents["gpu-a"].stop()
    silent_cycles(cycle, clock, 600)
    assert job(world, "short").state == JobState.UNKNOWN
    agents["gpu-a"].start()
    done = until(cycle, clock, lambda: job(world, "short").state == JobState.SUCCEEDED)
    assert done is not None
    assert job(world, "short").state_reason == "exited with 0"
    with Session(world.engine) as session:
        entries = session.exec(select(LedgerEntry)).all()
    # Charged for the half second it ran by the host's own clock, not the ten-minute outage.
    assert len(entries) == 2 and all(e.gpu_hours < 0.01 for e in entries)
    assert open_allocations(world) == []
    assert EventKind.JOB_FAILED not in notifier.kinds()


def test_a_job_given_up_on_is_requeued_and_its_old_run_stopped_when_the_host_returns(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    notifier = RecordingObserver()
    cycle = make_cycle(world, notifier)
    submit(world, "stuck", "sleep 60", gpus=2, extra=A100)
    cycle.run_once()
    stuck_id = job(world, "stuck").id
    agents["gpu-a"].stop()
    silent_cycles(cycle, clock, 120)
    silent_cycles(cycle, clock, 25 * 3600, step=3600)  # past give_up_after_hours (24)
    given_up = job(world, "stuck")
    assert given_up.state == JobState.QUEUED and given_up.attempts == 1
    assert "did not answer for 24 h" in (given_up.state_reason or "")
    assert (
        EventKind.JOB_REQUEUED in notifier.kinds() and EventKind.JOB_FAILED not in notifier.kinds()
    )
    assert open_allocations(world) == []
    with Session(world.engine) as session:
        charged = session.exec(select(LedgerEntry)).all()
    # Charged until the host went silent, not for the day paika waited.
    assert charged and all(e.gpu_hours < 0.1 for e in charged)

    agents["gpu-a"].start()
    until(cycle, clock, lambda: job(world, "stuck").state == JobState.RUNNING)
    again = job(world, "stuck")
    assert again.attempts == 2
    # The run paika gave up on is stopped; the new attempt is the only one running.
    until(
        cycle,
        clock,
        lambda: runs_on(agents["gpu-a"]).get(f"{stuck_id}.1") != "running",
    )
    running = [r for r, state in runs_on(agents["gpu-a"]).items() if state == "running"]
    assert running == [f"{stuck_id}.2"]


def test_a_job_out_of_attempts_fails_when_given_up_on(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    knobs = world.policy.scheduler.hosts.model_copy(update={"max_attempts": 1})
    world.policy = world.policy.model_copy(
        update={"scheduler": world.policy.scheduler.model_copy(update={"hosts": knobs})}
    )
    notifier = RecordingObserver()
    cycle = make_cycle(world, notifier)
    submit(world, "once", "sleep 60", gpus=2, extra=A100)
    cycle.run_once()
    agents["gpu-a"].stop()
    silent_cycles(cycle, clock, 25 * 3600, step=3600)
    failed = job(world, "once")
    assert failed.state == JobState.FAILED and "after 1 attempts" in (failed.state_reason or "")
    assert EventKind.JOB_LOST in notifier.kinds()


def test_an_agent_that_lost_its_state_gets_the_job_requeued_not_failed(
    world: Paika, clock: ManualClock, agents: dict[str, Agent], tmp_path: Path
) -> None:
    notifier = RecordingObserver()
    cycle = make_cycle(world, notifier)
    submit(world, "wiped", "sleep 60", gpus=2, extra=A100)
    cycle.run_once()
    wiped_id = job(world, "wiped").id
    old = agents["gpu-a"]
    old.stop_all_jobs()
    old.stop()
    old.state_dir = tmp_path / "fresh-disk"  # the host came back with an empty disk
    old.start()
    until(cycle, clock, lambda: job(world, "wiped").attempts == 2)
    again = job(world, "wiped")
    assert again.state == JobState.RUNNING
    assert runs_on(old) == {f"{wiped_id}.2": "running"}
    assert (
        EventKind.JOB_REQUEUED in notifier.kinds() and EventKind.JOB_FAILED not in notifier.kinds()
    )


class LostAnswers(AgentDispatcher):
    """Starts whose answer never comes back: `deliver` says whether the agent got them;
    `times` how many starts are lost so."""

    def __init__(self, *, deliver: bool, times: int = 1) -> None:
        super().__init__(TOKEN, timeout=2.0)
        self.deliver = deliver
        self.times = times
        self.lost = 0

    def start(self, order: StartOrder) -> None:
        if self.lost < self.times:
            self.lost += 1
            if self.deliver:
                super().start(order)
            raise DispatchError(order.host, order.job_id, "ReadTimeout", known=False)
        super().start(order)


def _cycle_with(paika: Paika, dispatcher: AgentDispatcher, notifier: RecordingObserver) -> Cycle:
    cycle = make_cycle(paika, notifier)
    cycle.dispatcher = dispatcher
    return cycle


def test_a_start_whose_answer_was_lost_is_confirmed_by_the_host_not_started_elsewhere(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    notifier = RecordingObserver()
    cycle = _cycle_with(world, LostAnswers(deliver=True), notifier)
    submit(world, "slow-start", "sleep 30", gpus=2, extra=A100)
    first = cycle.run_once()
    pending = job(world, "slow-start")
    assert first.unconfirmed == [pending.id] and first.requeued == []
    assert pending.state == JobState.RUNNING and pending.confirmed_at is None
    clock.advance(timedelta(seconds=10))
    cycle.run_once()
    confirmed = job(world, "slow-start")
    assert confirmed.confirmed_at is not None and confirmed.attempts == 1
    assert EventKind.JOB_STARTED in notifier.kinds()
    everywhere = {**runs_on(agents["gpu-a"]), **runs_on(agents["gpu-b"])}
    assert everywhere == {f"{confirmed.id}.1": "running"}


def test_a_start_that_never_arrived_is_sent_again_under_the_same_run_id(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    notifier = RecordingObserver()
    cycle = _cycle_with(world, LostAnswers(deliver=False), notifier)
    submit(world, "dropped", "sleep 30", gpus=2, extra=A100)
    cycle.run_once()
    assert runs_on(agents["gpu-a"]) == {}
    clock.advance(timedelta(seconds=10))
    cycle.run_once()  # the agent answers without it: the same start goes out again
    dropped = job(world, "dropped")
    assert dropped.state == JobState.RUNNING and dropped.attempts == 1
    assert dropped.confirmed_at is not None
    assert runs_on(agents["gpu-a"]) == {f"{dropped.id}.1": "running"}


def test_a_cancel_while_a_start_is_in_flight_wins_and_the_late_start_is_refused(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    notifier = RecordingObserver()
    cycle = _cycle_with(world, LostAnswers(deliver=False), notifier)
    submit(world, "regret", "sleep 30", gpus=2, extra=A100)
    cycle.run_once()
    regret = job(world, "regret")
    ok(world, "UALICE", "cancel regret")
    until(cycle, clock, lambda: job(world, "regret").state == JobState.CANCELLED)
    assert open_allocations(world) == []
    # The start that was still on its way arrives now: the agent refuses it.
    order = StartOrder(regret.id or 0, 1, "gpu-a", agents["gpu-a"].url, (0, 1), "sleep 30")
    try:
        AgentDispatcher(TOKEN).start(order)
        raise AssertionError("a start after its stop must be refused")
    except DispatchError as exc:
        assert exc.known and "409" in str(exc)
    assert "running" not in runs_on(agents["gpu-a"]).values()
    with Session(world.engine) as session:
        assert all(e.gpu_hours == 0 for e in session.exec(select(LedgerEntry)))


def test_a_start_the_host_never_takes_is_given_up_after_a_while_and_charged_nothing(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    notifier = RecordingObserver()
    cycle = _cycle_with(world, LostAnswers(deliver=False, times=1000), notifier)
    submit(world, "never", "sleep 30", gpus=2, extra=A100)
    cycle.run_once()
    silent_cycles(cycle, clock, 60, step=30)
    assert job(world, "never").state == JobState.RUNNING  # still asking the host
    silent_cycles(cycle, clock, 90, step=30)
    never = job(world, "never")
    assert never.state in (JobState.QUEUED, JobState.RUNNING) and never.attempts >= 1
    assert LostWhy.NEVER_TOOK_START in [
        e.detail.get("why") for e in notifier.events if e.kind is EventKind.JOB_REQUEUED
    ]
    with Session(world.engine) as session:
        assert all(e.gpu_hours == 0 for e in session.exec(select(LedgerEntry)))
    assert runs_on(agents["gpu-a"]) == {}


def test_a_job_marked_done_whose_start_never_arrived_ends_cancelled_as_never_run(
    world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    cycle = _cycle_with(world, LostAnswers(deliver=False), RecordingObserver())
    submit(world, "phantom", "sleep 30", gpus=2, extra=A100)
    cycle.run_once()
    ok(world, "UALICE", "done phantom output=s3://nowhere")
    until(cycle, clock, lambda: job(world, "phantom").state == JobState.CANCELLED)
    phantom = job(world, "phantom")
    assert "never ran" in (phantom.state_reason or "")
    assert open_allocations(world) == [] and "running" not in runs_on(agents["gpu-a"]).values()
