"""The snapshot corrects each owner's estimates by how their recent jobs really ran."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.snapshots import ESTIMATE_HISTORY, build_snapshot
from storage.models import Job, JobState, Team


def finished(now: datetime, team_id: int, owner: str, *, ratio: float, age_h: float) -> Job:
    """A succeeded 2-GPU job estimated at 4 GPU-hours (2 h) that ran `ratio` × that."""
    ended = now - timedelta(hours=age_h)
    return Job(
        name="done",
        owner=owner,
        team_id=team_id,
        gpus=2,
        est_gpu_hours=4.0,
        command="python train.py",
        state=JobState.SUCCEEDED,
        submitted_at=ended - timedelta(hours=2 * ratio + 1),
        started_at=ended - timedelta(hours=2 * ratio),
        ended_at=ended,
    )


def test_each_owners_estimates_are_corrected_by_their_recent_runs(paika: Paika) -> None:
    now = paika.clock.now()
    assert paika.run("admin member add <@UALICE> team=vision", "UADMIN").ok
    with Session(paika.engine) as session:
        team = session.exec(select(Team).where(Team.name == "vision")).one()
        assert team.id is not None
        # Alice's jobs ran twice as long as she said; Bob's recent ones half as long, and
        # his older history (beyond the last ESTIMATE_HISTORY jobs) does not count.
        for age in range(5):
            session.add(finished(now, team.id, "UALICE", ratio=2.0, age_h=age + 1))
        for age in range(ESTIMATE_HISTORY):
            session.add(finished(now, team.id, "UBOB", ratio=0.5, age_h=age + 1))
        for age in range(ESTIMATE_HISTORY + 5):
            session.add(finished(now, team.id, "UBOB", ratio=3.0, age_h=100 + age))
        for owner in ("UALICE", "UBOB", "UCAROL"):
            session.add(
                Job(
                    name=f"next-{owner}",
                    owner=owner,
                    team_id=team.id,
                    gpus=2,
                    est_gpu_hours=4.0,
                    command="python train.py",
                    state=JobState.QUEUED,
                    submitted_at=now,
                )
            )
        session.commit()
        snapshot = build_snapshot(session, paika.policy, now)
    hours = {job.owner: job.run_seconds / 3600 for job in snapshot.pending}
    assert hours == {"UALICE": 4.0, "UBOB": 1.0, "UCAROL": 2.0}
