"""Migration 0015 keeps what was stored before it: an open allocation holds its card whole (the
card is booked whole), an ended one books nothing, the ledger still refers to its allocations
(SQLite copies the allocations table to drop its unique index), and no job shares."""

from __future__ import annotations

import pytest
from alembic import command
from paika_test_time import T0
from sqlalchemy import Engine, column, insert, inspect, select, table, text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from storage.db import _alembic_config, current_revision, head_revision, upgrade
from storage.models import Allocation, Gpu, Job, LedgerEntry
from storage.models.cluster import WHOLE_CARD
from storage.types import UTCDateTime


def _rows(bare: Engine) -> dict[str, int]:
    teams = table("teams", column("name"), column("created_at", UTCDateTime()))
    hosts = table(
        "hosts",
        *(column(name) for name in ("name", "url", "state", "draining", "failed_polls")),
        column("added_at", UTCDateTime()),
    )
    gpus = table(
        "gpus",
        *(column(name) for name in ("host_id", "index", "gpu_type", "memory_gib", "healthy")),
        *(column(name) for name in ("foreign_memory_gib", "memory_used_gib")),
    )
    jobs = table(
        "jobs",
        *(column(name) for name in ("name", "owner", "team_id", "priority", "gpus")),
        *(column(name) for name in ("est_gpu_hours", "data_ready", "command", "state")),
        column("submitted_at", UTCDateTime()),
        column("attempts"),
    )
    allocations = table(
        "allocations",
        *(column(name) for name in ("job_id", "gpu_id", "active_gpu_id")),
        column("started_at", UTCDateTime()),
        column("ended_at", UTCDateTime()),
    )
    ledger = table(
        "ledger_entries",
        *(column(name) for name in ("job_id", "allocation_id", "team_id", "gpu_type")),
        *(column(name) for name in ("gpu_hours", "cost", "idle_gpu_hours")),
        *(column(name, UTCDateTime()) for name in ("started_at", "ended_at", "recorded_at")),
    )
    ids: dict[str, int] = {}
    with bare.begin() as conn:
        conn.execute(insert(teams).values(name="vision", created_at=T0))
        conn.execute(
            insert(hosts).values(
                name="gpu-01",
                url="http://127.0.0.1:1",
                state="up",
                draining=False,
                failed_polls=0,
                added_at=T0,
            )
        )
        team = conn.execute(text("SELECT id FROM teams")).scalar_one()
        host = conn.execute(text("SELECT id FROM hosts")).scalar_one()
        for index in (0, 1):
            conn.execute(
                insert(gpus).values(
                    host_id=host,
                    index=index,
                    gpu_type="A100",
                    memory_gib=80,
                    healthy=True,
                    foreign_memory_gib=0,
                    memory_used_gib=0,
                )
            )
        held, free = conn.execute(text("SELECT id FROM gpus ORDER BY id")).scalars().all()
        for name, state in (("running", "running"), ("done", "succeeded")):
            conn.execute(
                insert(jobs).values(
                    name=name,
                    owner="UALICE",
                    team_id=team,
                    priority="normal",
                    gpus=1,
                    est_gpu_hours=1.0,
                    data_ready=True,
                    command="python train.py",
                    state=state,
                    submitted_at=T0,
                    attempts=1,
                )
            )
        running, done = conn.execute(text("SELECT id FROM jobs ORDER BY id")).scalars().all()
        conn.execute(
            insert(allocations).values(
                job_id=running, gpu_id=held, active_gpu_id=held, started_at=T0
            )
        )
        conn.execute(
            insert(allocations).values(job_id=done, gpu_id=free, started_at=T0, ended_at=T0)
        )
        ended = conn.execute(
            text("SELECT id FROM allocations WHERE ended_at IS NOT NULL")
        ).scalar_one()
        conn.execute(
            insert(ledger).values(
                job_id=done,
                allocation_id=ended,
                team_id=team,
                gpu_type="A100",
                gpu_hours=1.0,
                cost=2.0,
                idle_gpu_hours=0.0,
                started_at=T0,
                ended_at=T0,
                recorded_at=T0,
            )
        )
    ids.update(held=held, free=free, ended=ended, done=done, team=team)
    return ids


def test_cards_held_before_0015_are_booked_whole_and_the_ledger_keeps_its_allocations(
    bare: Engine,
) -> None:
    upgrade(bare, "0014")
    ids = _rows(bare)

    upgrade(bare)

    assert current_revision(bare) == head_revision()
    with Session(bare) as session:
        booked = {gpu.id: gpu.booked_milli for gpu in session.exec(select(Gpu)).scalars()}  # type: ignore[call-overload]
        assert booked == {ids["held"]: WHOLE_CARD, ids["free"]: 0}
        parts = [a.share_milli for a in session.exec(select(Allocation)).scalars()]  # type: ignore[call-overload]
        assert parts == [WHOLE_CARD, WHOLE_CARD]
        assert not any(job.share for job in session.exec(select(Job)).scalars())  # type: ignore[call-overload]
        entry = session.exec(select(LedgerEntry)).scalars().one()  # type: ignore[call-overload]
        assert entry.allocation_id == ids["ended"]
    foreign = inspect(bare).get_foreign_keys("ledger_entries")
    assert any(fk["referred_table"] == "allocations" for fk in foreign)
    # The reference still holds: an entry for an allocation that does not exist is refused.
    with bare.begin() as conn, pytest.raises(IntegrityError):
        conn.execute(
            text(
                "INSERT INTO ledger_entries (job_id, allocation_id, team_id, gpu_type, gpu_hours,"
                " cost, idle_gpu_hours, lost_gpu_hours, started_at, ended_at, recorded_at)"
                " VALUES (:job, 999999, :team, 'A100', 1, 1, 0, 0, :at, :at, :at)"
            ),
            {"job": ids["done"], "team": ids["team"], "at": T0.replace(tzinfo=None)},
        )


def test_0015_downgrades_to_the_unique_index_again(bare: Engine) -> None:
    upgrade(bare)
    config = _alembic_config()
    with bare.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0014")
    uniques = inspect(bare).get_unique_constraints("allocations")
    assert [u["column_names"] for u in uniques] == [["active_gpu_id"]]
