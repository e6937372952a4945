"""Migration 0014 keeps the reasons stored before it: the text stays, with no code, so every
face shows such a reason as it was stored; a reason stored after it keeps its code and values
(a reason inside another one included) on every backend."""

from __future__ import annotations

from paika_test_time import T0
from sqlalchemy import Engine, column, insert, select, table, text
from sqlmodel import Session

from scheduler.policy.reasons import ReasonCode, because, reason_of
from scheduler.service.records import EventRecord, JobRecord
from storage.db import current_revision, head_revision, upgrade
from storage.models import Job, JobEvent, Match
from storage.types import UTCDateTime


def _old_rows(engine: Engine) -> None:
    """A failed job, its history and its match, as paika wrote them at 0013."""
    teams = table("teams", column("name"), column("created_at", UTCDateTime()))
    jobs = table(
        "jobs",
        *(column(name) for name in ("name", "owner", "team_id", "priority", "gpus")),
        *(column(name) for name in ("est_gpu_hours", "data_ready", "command", "state")),
        column("state_reason"),
        column("submitted_at", UTCDateTime()),
        column("attempts"),
    )
    events = table(
        "job_events",
        *(column(name) for name in ("job_id", "from_state", "to_state", "actor", "reason")),
        column("at", UTCDateTime()),
    )
    matches = table(
        "matches",
        *(column(name) for name in ("job_id", "chosen_type", "alternatives", "reason")),
        column("at", UTCDateTime()),
    )
    with engine.begin() as conn:
        conn.execute(insert(teams).values(name="vision", created_at=T0))
        team = conn.execute(text("SELECT id FROM teams")).scalar_one()
        conn.execute(
            insert(jobs).values(
                name="old",
                owner="UALICE",
                team_id=team,
                priority="normal",
                gpus=1,
                est_gpu_hours=2.0,
                data_ready=True,
                command="python train.py",
                state="failed",
                state_reason="exited with 3",
                submitted_at=T0,
                attempts=1,
            )
        )
        job = conn.execute(text("SELECT id FROM jobs")).scalar_one()
        conn.execute(
            insert(events).values(
                job_id=job,
                from_state="running",
                to_state="failed",
                actor="scheduler",
                reason="exited with 3",
                at=T0,
            )
        )
        conn.execute(
            insert(matches).values(
                job_id=job,
                chosen_type="T4",
                alternatives=None,
                reason="the cheapest adequate type, with GPUs free now",
                at=T0,
            )
        )


def test_reasons_from_before_0014_keep_their_text_and_have_no_code(bare: Engine) -> None:
    upgrade(bare, "0013")
    _old_rows(bare)

    upgrade(bare)

    assert current_revision(bare) == head_revision()
    with Session(bare) as session:
        job = session.exec(select(Job)).scalars().one()  # type: ignore[call-overload]
        record = JobRecord.of(job)
        assert (record.state_reason, record.state_why) == ("exited with 3", None)
        event = session.exec(select(JobEvent)).scalars().one()  # type: ignore[call-overload]
        assert (EventRecord.of(event).reason, EventRecord.of(event).why) == ("exited with 3", None)
        match = session.exec(select(Match)).scalars().one()  # type: ignore[call-overload]
        assert (match.reason_code, match.reason_values) == (None, None)

        # Written from now on: the code and its values, a reason inside one kept whole.
        why = because(ReasonCode.REQUEUED_BECAUSE, why=because(ReasonCode.HOST_GAVE_UP, hours=1.5))
        event.reason, event.reason_code = why.english(), why.code.value
        event.reason_values = why.stored_values()
        session.add(event)
        session.commit()
    with Session(bare) as session:
        event = session.exec(select(JobEvent)).scalars().one()  # type: ignore[call-overload]
        assert reason_of(event.reason_code, event.reason_values) == why
        assert EventRecord.of(event).why == why
