"""Migration 0011 keeps the jobs and ledger entries stored before it: none preemptible, none
preempted, nothing lost."""

from __future__ import annotations

from paika_test_time import T0
from sqlalchemy import Engine, column, insert, select, table, text
from sqlmodel import Session

from storage.db import current_revision, head_revision, upgrade
from storage.models import Job, LedgerEntry
from storage.types import UTCDateTime


def test_jobs_and_charges_from_before_0011_read_as_not_preemptible(bare: Engine) -> None:
    upgrade(bare, "0010")
    teams = table("teams", column("name"), column("created_at", UTCDateTime()))
    jobs = table(
        "jobs",
        *(column(name) for name in ("name", "owner", "team_id", "priority", "gpus")),
        *(column(name) for name in ("est_gpu_hours", "data_ready", "command", "state")),
        column("submitted_at", UTCDateTime()),
        column("attempts"),
    )
    ledger = table(
        "ledger_entries",
        *(column(name) for name in ("job_id", "team_id", "gpu_type", "gpu_hours", "cost")),
        *(column(name) for name in ("idle_gpu_hours",)),
        column("started_at", UTCDateTime()),
        column("ended_at", UTCDateTime()),
        column("recorded_at", UTCDateTime()),
    )
    with bare.begin() as conn:
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
                state="succeeded",
                submitted_at=T0,
                attempts=1,
            )
        )
        job = conn.execute(text("SELECT id FROM jobs")).scalar_one()
        conn.execute(
            insert(ledger).values(
                job_id=job,
                team_id=team,
                gpu_type="T4",
                gpu_hours=1.5,
                cost=0.5,
                idle_gpu_hours=0.0,
                started_at=T0,
                ended_at=T0,
                recorded_at=T0,
            )
        )

    upgrade(bare)

    assert current_revision(bare) == head_revision()
    with Session(bare) as session:
        old = session.exec(select(Job)).scalars().one()  # type: ignore[call-overload]
        assert (old.preemptible, old.preempt_grace_s, old.preemptions, old.checkpoint) == (
            False,
            None,
            0,
            None,
        )
        entry = session.exec(select(LedgerEntry)).scalars().one()  # type: ignore[call-overload]
        assert (entry.gpu_hours, entry.lost_gpu_hours) == (1.5, 0.0)
