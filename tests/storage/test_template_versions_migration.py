"""Migration 0009 keeps every template saved before versions existed as its version 1."""

from __future__ import annotations

from datetime import timedelta

from paika_test_time import T0
from sqlalchemy import JSON, Engine, column, insert, select, table, text

from storage.db import current_revision, head_revision, upgrade
from storage.models import Template, TemplateVersion
from storage.types import UTCDateTime


def test_templates_from_before_versions_become_version_1(bare: Engine) -> None:
    upgrade(bare, "0008")
    # The tables as 0008 left them, by hand: reflection reads MariaDB's JSON as text.
    teams = table("teams", column("name"), column("created_at", UTCDateTime()))
    templates = table(
        "templates",
        *(column(name) for name in ("team_id", "name", "created_by")),
        column("fields", JSON()),
        column("created_at", UTCDateTime()),
        column("updated_at", UTCDateTime()),
    )
    saved = T0 + timedelta(days=3, microseconds=250)
    fields = {"gpus": 4, "type": "A100-80GB", "cmd": "python train.py --cfg base.yaml"}
    with bare.begin() as conn:
        conn.execute(insert(teams).values(name="vision", created_at=T0))
        team = conn.execute(text("SELECT id FROM teams")).one()
        conn.execute(
            insert(templates),
            [
                {
                    "team_id": team[0],
                    "name": "bert-base",
                    "fields": fields,
                    "created_by": "UALICE",
                    "created_at": T0,
                    "updated_at": saved,
                },
                {
                    "team_id": team[0],
                    "name": "sweep",
                    "fields": {},
                    "created_by": "UBOB",
                    "created_at": T0,
                    "updated_at": T0,
                },
            ],
        )

    upgrade(bare)

    assert current_revision(bare) == head_revision()
    versions = TemplateVersion.__table__
    with bare.connect() as conn:
        rows = conn.execute(select(versions).order_by(versions.c.name)).mappings().all()
        latest = conn.execute(select(Template.__table__.c.version)).scalars().all()
    assert [(r["name"], r["version"], r["author"]) for r in rows] == [
        ("bert-base", 1, "UALICE"),
        ("sweep", 1, "UBOB"),
    ]
    assert rows[0]["team_id"] == team[0]
    assert rows[0]["fields"] == fields and rows[1]["fields"] == {}
    # The time of its last save, to the microsecond, on every backend.
    assert rows[0]["at"].replace(tzinfo=None) == saved.replace(tzinfo=None)
    assert latest == [1, 1]
