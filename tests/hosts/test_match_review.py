"""Match review against real simulated agents: a job put on a costlier card because the
cheapest adequate ones were busy has the wait it was spared recorded in its match, and
`/gpu match` and `/gpu report matches` show what the choice cost."""

from __future__ import annotations

from datetime import timedelta

from agent_world import job, make_cycle, submit, until
from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.notices.events import RecordingObserver
from scheduler.service.matches import MatchesReport, MatchReview
from storage.models import JobState, Match


def test_a_costlier_choice_records_the_wait_it_saved_and_its_extra_cost(
    world: Paika, clock: ManualClock
) -> None:
    knobs = world.policy.scheduler
    world.policy = world.policy.model_copy(
        update={
            "scheduler": knobs.model_copy(
                update={"matching": knobs.matching.model_copy(update={"costlier_after_minutes": 0})}
            )
        }
    )
    cycle = make_cycle(world, RecordingObserver())
    # Both T4s for 2 GPU-hours (1 h of wall time); then a small job that may not wait.
    submit(world, "big", "sleep 60", gpus=2, hours=2)
    cycle.run_once()
    submit(world, "quick", "sleep 2", hours=1)
    cycle.run_once()
    quick = job(world, "quick")
    with Session(world.engine) as session:
        match = session.exec(select(Match).where(Match.job_id == quick.id)).one()
    assert match.chosen_type == "A100-80GB"
    [t4] = [a for a in match.alternatives or () if a["gpu_type"] == "T4-16GB"]
    assert t4["verdict"] == "not enough free now"
    assert t4["wait_s"] == 3600  # big's estimate: 2 GPU-hours on 2 GPUs

    # Ten minutes a cycle, so that the run is charged enough to compare.
    until(
        cycle,
        clock,
        lambda: job(world, "quick").state == JobState.SUCCEEDED,
        step=timedelta(minutes=10),
    )
    review = world.run(f"match {quick.id}", "UVERA")  # anyone may look
    assert review.ok, review.text
    found = review.result
    assert isinstance(found, MatchReview) and found.ran and found.cheapest is not None
    [ran] = found.ran
    # On A100-80GB (speed 1.1, 2.20 per GPU-hour) against T4-16GB (0.25, 0.35): the same work
    # takes 1.1 ÷ 0.25 = 4.4× the GPU-hours on a T4, at 0.35: 1.54 per A100 GPU-hour.
    assert found.cheapest.gpu_type == "T4-16GB"
    assert abs(found.cheapest.gpu_hours - ran.gpu_hours * 4.4) < 1e-9
    assert abs(found.extra_cost - ran.gpu_hours * (2.20 - 1.54)) < 1e-9
    assert ran.gpu_hours >= 1 / 6 and found.wait_saved_minutes == 60
    assert "saved about 60 min of waiting" in review.text
    listed = world.run("report matches", "UVERA").result
    assert isinstance(listed, MatchesReport)
    assert [run.job_id for run in listed.runs] == [quick.id]
