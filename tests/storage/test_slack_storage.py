"""What the Slack bot stores: each delivery taken on once, and where approval messages are."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from paika_test_time import T0
from sqlalchemy import Engine
from sqlmodel import Session, select

from storage.models import BumpRequest, Job, JobState, SlackDelivery, Team
from storage.queries.slack import claim_delivery, prune_deliveries, set_bump_message


def _claimed(engine: Engine) -> list[str]:
    with Session(engine) as session:
        return sorted(session.exec(select(SlackDelivery.event_id)).all())


def test_a_delivery_is_claimed_once_and_the_transaction_goes_on(engine: Engine) -> None:
    with Session(engine) as session:
        assert claim_delivery(session=session, event_id="Ev01", now=T0) is True
        assert claim_delivery(session=session, event_id="Ev01", now=T0) is False
        # The refused insert must not spoil the rest of the caller's work.
        session.add(Team(name="vision", created_at=T0))
        assert claim_delivery(session=session, event_id="Ev02", now=T0) is True
        session.commit()
    with Session(engine) as session:
        assert claim_delivery(session=session, event_id="Ev01", now=T0) is False
        assert claim_delivery(session=session, event_id="Ev03", now=T0) is True
        session.commit()
        assert session.exec(select(Team.name)).all() == ["vision"]
    assert _claimed(engine) == ["Ev01", "Ev02", "Ev03"]


def test_a_claim_rolled_back_with_its_work_can_be_claimed_again(engine: Engine) -> None:
    """Handling failed, so Slack's retry must be handled, not dropped as a duplicate."""
    with Session(engine) as session:
        assert claim_delivery(session=session, event_id="Ev01", now=T0) is True
        session.rollback()
    assert _claimed(engine) == []
    with Session(engine) as session:
        assert claim_delivery(session=session, event_id="Ev01", now=T0) is True
        session.commit()
    assert _claimed(engine) == ["Ev01"]


def test_two_instances_racing_on_one_delivery_claim_it_once(engine: Engine) -> None:
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite serialises writers; the race needs a server (PostgreSQL, MariaDB)")
    barrier = threading.Barrier(2)
    outcomes: list[bool] = []

    def claim() -> None:
        with Session(engine) as session:
            session.connection()  # begin the transaction before the race
            barrier.wait()
            won = claim_delivery(session=session, event_id="EvRACE", now=T0)
            time.sleep(0.2)  # hold the claim uncommitted while the other one tries
            session.commit()
            outcomes.append(won)

    threads = [threading.Thread(target=claim) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes) == [False, True]
    assert _claimed(engine) == ["EvRACE"]


def test_old_deliveries_are_pruned(engine: Engine) -> None:
    with Session(engine) as session:
        claim_delivery(session=session, event_id="EvOLD", now=T0 - timedelta(hours=2))
        claim_delivery(session=session, event_id="EvNEW", now=T0 - timedelta(minutes=10))
        session.commit()
    with Session(engine) as session:
        assert prune_deliveries(session=session, before=T0 - timedelta(hours=1)) == 1
        session.commit()
    assert _claimed(engine) == ["EvNEW"]


def test_a_bump_request_remembers_its_approval_message(engine: Engine) -> None:
    with Session(engine) as session:
        team = Team(name="vision", created_at=T0)
        session.add(team)
        session.flush()
        job = Job(
            name="bert",
            owner="UALICE",
            team_id=team.id or 0,
            est_gpu_hours=4,
            command="python train.py",
            state=JobState.QUEUED,
            submitted_at=T0,
        )
        session.add(job)
        session.flush()
        bump = BumpRequest(
            job_id=job.id or 0,
            requested_by="UALICE",
            from_priority="normal",
            to_priority="core",
            reason="deadline",
            created_at=T0,
        )
        session.add(bump)
        session.commit()
        request_id = bump.id or 0
        assert (bump.message_channel, bump.message_ts) == (None, None)
    with Session(engine) as session:
        assert set_bump_message(
            session=session, request_id=request_id, channel="C0APPROVE", ts="1764480000.000100"
        )
        assert not set_bump_message(session=session, request_id=999, channel="C0", ts="1.0")
        session.commit()
    with Session(engine) as session:
        stored = session.get(BumpRequest, request_id)
        assert stored is not None
        assert (stored.message_channel, stored.message_ts) == ("C0APPROVE", "1764480000.000100")
