"""Migration 0013 keeps the teams and jobs stored before it, names in any script intact, and
from then on names that differ only by an accent or a rare character are two, on every
backend (MariaDB's default collation took them for one)."""

from __future__ import annotations

from paika_test_time import T0
from sqlalchemy import Engine, column, insert, select, table, text

from storage.db import current_revision, head_revision, upgrade
from storage.types import UTCDateTime

TEAMS = table("teams", column("name"), column("created_at", UTCDateTime()))
JOBS = table(
    "jobs",
    *(column(name) for name in ("name", "owner", "team_id", "priority", "gpus", "project")),
    *(column(name) for name in ("est_gpu_hours", "data_ready", "command", "state")),
    column("submitted_at", UTCDateTime()),
    column("attempts"),
)


def test_names_from_before_0013_are_kept_and_then_tell_accents_apart(bare: Engine) -> None:
    upgrade(bare, "0012")
    with bare.begin() as conn:
        conn.execute(insert(TEAMS).values(name="équipe", created_at=T0))
        team = conn.execute(text("SELECT id FROM teams")).scalar_one()
        conn.execute(
            insert(JOBS).values(
                name="医疗对话-sft",
                owner="UALICE",
                team_id=team,
                priority="normal",
                gpus=1,
                project="𠀀",
                est_gpu_hours=2.0,
                data_ready=True,
                command="python train.py",
                state="queued",
                submitted_at=T0,
                attempts=0,
            )
        )
    upgrade(bare)
    assert current_revision(bare) == head_revision()
    with bare.begin() as conn:
        conn.execute(insert(TEAMS).values(name="equipe", created_at=T0))
        names = set(conn.execute(select(TEAMS.c.name)).scalars())
        found = conn.execute(select(JOBS.c.name).where(JOBS.c.project == "𠀁")).all()
        job = conn.execute(select(JOBS.c.name, JOBS.c.project)).one()
    assert names == {"équipe", "equipe"}
    assert found == []  # 𠀁 is not 𠀀
    assert tuple(job) == ("医疗对话-sft", "𠀀")
