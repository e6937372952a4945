"""Feedback on shared cards, over real HTTP with a simulated agent: a job on a shared card that
runs well below its pace alone, beside another, for `sharing.feedback_minutes`, has the
opportunistic job of the two stopped and queued again; the pair is recorded and the policy
never puts the two on one card again; both owners are told who slowed whom, by how much and
what paika did."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta

from agent_world import TOKEN, ok, submit, until
from sqlmodel import Session, col, select

from bot.notice_words import sentence
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.config import Sharing
from scheduler.cycle import Cycle
from scheduler.dispatch import AgentDispatcher, StartOrder, agent_job_id
from scheduler.hosts.poll import Target, poll_all_sync
from scheduler.hosts.report import CardSample, HostReport
from scheduler.notices.events import EventCode, EventKind, RecordingObserver
from scheduler.notices.outbox import from_row
from scheduler.policy.scheduler import schedule
from scheduler.policy.sharing import share_milli
from scheduler.share_watch import ShareWatch
from scheduler.snapshots import build_snapshot
from storage.models import Job, JobState, Notice
from storage.models.cluster import Gpu, ShareApart
from storage.queries import cluster as cluster_queries

TRAIN = "sleep 120"  # the job that is slowed: 80 % SM busy alone
PROBE = "sleep 121"  # its neighbour, an idle-class job: 20 % alone


class Loads(AgentDispatcher):
    """Starts each job with the SM busy % (and memory-controller busy %) a test chose for it,
    through the simulated agent's PAIKA_SIM_UTILIZATION."""

    def __init__(self) -> None:
        super().__init__(TOKEN, timeout=2.0)
        self.utilization: dict[int, int] = {}

    def env(self, job_id: int) -> dict[str, str]:
        busy = self.utilization.get(job_id, 1)
        return {"PAIKA_SIM_UTILIZATION": str(busy), "PAIKA_SIM_GMEM_UTIL": "5"}

    def start(self, order: StartOrder) -> None:
        super().start(replace(order, env={**order.env, **self.env(order.job_id)}))


def _job(paika: Paika, name: str) -> Job:
    with Session(paika.engine) as session:
        return session.exec(select(Job).where(Job.name == name)).one()


def _cycle(paika: Paika, loads: Loads, observer: RecordingObserver) -> Cycle:
    def poll(targets: Sequence[Target]) -> Mapping[str, HostReport]:
        return poll_all_sync(targets, TOKEN, timeout=2.0)

    return Cycle(paika.engine, paika.policy, paika.clock, loads, observer, poll)


def _earlier_run(
    paika: Paika, cycle: Cycle, clock: ManualClock, loads: Loads, name: str, user: str, cmd: str
) -> None:
    """A run of the same owner and command before, busy as `loads` says: its profile is the
    later job's fingerprint."""
    submit(paika, name, cmd, user=user, extra="type=A100-80GB")
    loads.utilization[_job(paika, name).id or 0] = 80 if cmd == TRAIN else 20
    until(cycle, clock, lambda: _job(paika, name).state == JobState.RUNNING)
    for _ in range(3):  # a few polls sample it
        clock.advance(timedelta(seconds=10))
        cycle.run_once()
    ok(paika, user, f"cancel {_job(paika, name).id}")
    until(cycle, clock, lambda: _job(paika, name).state == JobState.CANCELLED)


@dataclass
class Pair:
    """A training job and an idle-class probe on one shared card, both known from an earlier
    run; the cycle that placed them and what it told."""

    cycle: Cycle
    observer: RecordingObserver
    train: Job
    probe: Job
    gpu_id: int  # their card


def _pair(world: Paika, clock: ManualClock, *, train_busy: int) -> Pair:
    """The training job (80 % SM busy alone) running at `train_busy` %, the probe beside it
    at its pace, on gpu-a's one A100 left (the other is held whole)."""
    world.policy = world.policy.model_copy(
        update={"sharing": Sharing(hosts={"gpu-a": "advisory"}, feedback_minutes=5)}
    )
    ok(world, "UADMIN", "admin member add <@UBOB> team=vision")
    loads, observer = Loads(), RecordingObserver()
    cycle = _cycle(world, loads, observer)
    _earlier_run(world, cycle, clock, loads, "train-0", "UALICE", TRAIN)
    _earlier_run(world, cycle, clock, loads, "probe-0", "UBOB", PROBE)
    # The other A100 is held whole: a job stopped here has nowhere else to go.
    submit(world, "hold", "sleep 300", user="UALICE", extra="type=A100-80GB")
    until(cycle, clock, lambda: _job(world, "hold").state == JobState.RUNNING)

    submit(world, "train", TRAIN, user="UALICE", extra="type=A100-80GB share=yes mem=20")
    train = _job(world, "train")
    loads.utilization[train.id or 0] = train_busy
    until(cycle, clock, lambda: _job(world, "train").state == JobState.RUNNING)
    submit(
        world, "probe", PROBE, user="UBOB", priority="idle", extra="type=A100-80GB share=yes mem=20"
    )
    probe = _job(world, "probe")
    loads.utilization[probe.id or 0] = 20  # at its pace
    # Both known from their earlier runs, light enough together: the policy puts the probe
    # beside the training job, on its card.
    until(cycle, clock, lambda: _job(world, "probe").state == JobState.RUNNING)
    with Session(world.engine) as session:
        parts = cluster_queries.open_parts(session=session)
    (gpu_id,) = [g for g, j, _ in parts if j == train.id]
    assert (gpu_id, probe.id, share_milli(20, 80)) in parts
    return Pair(cycle, observer, _job(world, "train"), _job(world, "probe"), gpu_id)


def test_a_job_that_slows_its_neighbour_is_requeued_kept_apart_and_both_owners_told(
    world: Paika, clock: ManualClock
) -> None:
    placed = _pair(world, clock, train_busy=40)  # half its 80 % alone: slowed
    cycle, observer, train, probe = placed.cycle, placed.observer, placed.train, placed.probe
    train_gpu = placed.gpu_id

    # Slowed, but not yet for the whole window: nobody is stopped.
    began = clock.now()
    while clock.now() - began < timedelta(minutes=4):
        clock.advance(timedelta(seconds=30))
        cycle.run_once()
    for name in ("probe", "train"):
        assert _job(world, name).state == JobState.RUNNING
        assert _job(world, name).stop_requested_at is None
    assert EventKind.JOB_KEPT_APART not in observer.kinds()

    # The whole window: the idle-class neighbour is stopped and queued again.
    until(
        cycle,
        clock,
        lambda: _job(world, "probe").state == JobState.QUEUED,
        step=timedelta(seconds=30),
    )
    assert _job(world, "train").state == JobState.RUNNING
    assert _job(world, "train").stop_requested_at is None
    requeued = [e for e in observer.events if e.job_id == probe.id]
    assert any(
        e.code is EventCode.STOPPED_REQUEUED and e.detail.get("stop") == "slowed" for e in requeued
    )

    with Session(world.engine) as session:
        (pair,) = session.exec(select(ShareApart)).all()
        assert (pair.job_a, pair.job_b) == tuple(sorted((train.id or 0, probe.id or 0)))
        assert pair.reason_code == "share_slowed"
        values = pair.reason_values or {}
        assert (values["slowed"], values["by"], values["stopped"]) == (train.id, probe.id, probe.id)
        assert (values["sm_pct"], values["alone_pct"], values["lost_pct"]) == (40.0, 80.0, 50.0)
        card = session.get(Gpu, train_gpu)
        assert card is not None
        assert values["card"] == f"gpu-a/{card.index}"

        # Both owners are told, each about their own job, in their words.
        notices = [
            from_row(row)
            for row in session.exec(
                select(Notice).where(col(Notice.kind) == EventKind.JOB_KEPT_APART.value)
            ).all()
        ]
        assert sorted(n.to_users for n in notices) == [("UALICE",), ("UBOB",)]
        for notice in notices:
            english, chinese = sentence("en", notice), sentence("zh", notice)
            assert f"job #{train.id} train ran at 40% SM busy beside job #{probe.id} probe" in (
                english
            )
            assert "50% below the 80%" in english and f"stopped job #{probe.id}" in english
            assert f"#{probe.id}" in chinese and "50%" in chinese and "{" not in chinese

        # The policy never puts the two on one card again: the waiting job is kept apart from
        # the one running, and with fingerprints that would let them share, it is placed on a
        # card of its own, never beside it.
        snap = build_snapshot(session, world.policy, clock.now())
    (waiting,) = [p for p in snap.pending if p.id == probe.id]
    assert waiting.apart_from == frozenset({train.id})
    assert waiting.fingerprint is not None
    assert schedule(snap).starts == ()  # kept apart, and the other card is held whole
    together = replace(
        snap, pending=tuple(replace(p, apart_from=frozenset()) for p in snap.pending)
    )
    (beside,) = schedule(together).starts
    assert (beside.job_id, beside.gpu_ids) == (probe.id, (train_gpu,))  # without the record
    cycle.run_once()
    assert _job(world, "probe").state == JobState.QUEUED
    ok(world, "UALICE", f"cancel {train.id}")
    ok(world, "UALICE", f"cancel {_job(world, 'hold').id}")


def _samples(pair: Pair, card: int, train_pct: float) -> dict[str, HostReport]:
    """A poll of gpu-a saying the training job ran at `train_pct` % and the probe at its pace."""
    runs = ((pair.train, train_pct), (pair.probe, 20.0))
    said = tuple(
        CardSample(agent_job_id(job.id or 0, job.attempts), card, sm_pct=pct) for job, pct in runs
    )
    return {"gpu-a": HostReport("gpu-a", True, samples=said)}


def test_a_poll_at_its_pace_or_one_that_says_nothing_starts_the_window_again(
    world: Paika, clock: ManualClock
) -> None:
    pair = _pair(world, clock, train_busy=80)  # at its pace on the card: nobody is slowed
    with Session(world.engine) as session:
        gpu = session.get(Gpu, pair.gpu_id)
        assert gpu is not None
        card = gpu.index
    watch, began = ShareWatch(), clock.now()

    def poll(minute: float, pct: float | None) -> list[int]:
        now = began + timedelta(minutes=minute)
        reports = _samples(pair, card, pct) if pct is not None else {}
        return watch.watch(world.engine, world.policy, reports, now).stops

    assert poll(0, 80.0) == []
    for minute in (0.5, 1, 2, 3, 4):  # slowed
        assert poll(minute, 40.0) == []
    assert poll(4.5, 70.0) == []  # above 85 % of its 80 %: at its pace, the window starts again
    for minute in (5, 6, 7, 8, 9.5):
        assert poll(minute, 40.0) == []
    assert poll(9.75, None) == []  # its host said nothing: again
    for minute in (10, 12, 14):
        assert poll(minute, 40.0) == []
    assert poll(15, 40.0) == [pair.probe.id]  # slowed from 10 to 15: the probe is stopped
    assert _job(world, "probe").stop_reason == "slowed"
    assert _job(world, "train").stop_requested_at is None
    # On its way off the card, the probe slows nobody: no window, no second stop.
    assert poll(16, 40.0) == [] and watch.slowed_since == {}
