"""A sweep against real simulated agents over HTTP: one submit, twelve jobs, never more than
max_running of them at once though cards are free, each run told its place and values in its
environment, and one notice when the whole array has ended instead of one per job (issue 32)."""

from __future__ import annotations

import time
from pathlib import Path

from agent_world import make_cycle, ok
from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.notices.events import RecordingObserver
from scheduler.notices.kinds import NoticeKind
from storage.models import Job, JobState, Notice


def _jobs(paika: Paika) -> list[Job]:
    with Session(paika.engine) as session:
        query = select(Job).where(Job.array_id.is_not(None)).order_by(Job.id)  # type: ignore[union-attr]
        return list(session.exec(query).all())


def test_a_sweep_runs_at_most_max_running_and_tells_once(
    world: Paika, clock: ManualClock, tmp_path: Path
) -> None:
    cycle = make_cycle(world, RecordingObserver())
    out = tmp_path / "seen"
    out.mkdir()
    out.chmod(0o777)
    cmd = (
        "sleep 0.3; echo $PAIKA_ARRAY_INDEX $PAIKA_SWEEP_LR {bs} {seed} "
        f"> {out}/$PAIKA_ARRAY_INDEX"
    )
    ok(
        world,
        "UALICE",
        f"submit name=sw gpus=1 hours=0.1 priority=normal data=ready cmd='{cmd}' "
        'sweep="lr=1,2,3 bs=a,b seed=1,2" max_running=3',
    )
    most = 0
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        cycle.run_once()
        states = [j.state for j in _jobs(world)]
        most = max(most, states.count(JobState.RUNNING))
        if all(s == JobState.SUCCEEDED for s in states):
            break
        time.sleep(0.1)
    assert [j.state for j in _jobs(world)] == [JobState.SUCCEEDED] * 12
    assert most == 3  # four cards, three at a time
    seen = sorted((p.read_text().split() for p in out.iterdir()), key=lambda w: int(w[0]))
    grid = [(lr, bs, seed) for lr in "123" for bs in "ab" for seed in "12"]
    assert seen == [[str(n), *values] for n, values in enumerate(grid, start=1)]
    cycle.run_once()  # the cycle after the last end tells the owner
    with Session(world.engine) as session:
        kinds = [n.kind for n in session.exec(select(Notice)).all()]
    assert kinds.count(NoticeKind.ARRAY_ENDED) == 1
    assert NoticeKind.JOB_FINISHED not in kinds and NoticeKind.JOB_STARTED not in kinds
    cycle.run_once()
    with Session(world.engine) as session:
        again = session.exec(select(Notice).where(Notice.kind == NoticeKind.ARRAY_ENDED)).all()
    assert len(again) == 1
