"""A team that names its team and templates in Chinese, at the columns' full length, has
them archived like any other: on every database and both store backends."""

from __future__ import annotations

import json
from pathlib import Path

from test_archiver import archive, later, open_archiver, run

from scheduler.app import Paika
from storage import limits
from storage.objects import keys
from storage.objects.base import ObjectStore

TEAM = "语" * limits.TEAM_NAME
TEMPLATE = "模" * limits.TEMPLATE_NAME


def test_templates_of_a_team_named_in_chinese_are_archived_under_ascii_keys(
    paika: Paika, tmp_path: Path, store: ObjectStore
) -> None:
    run(paika, "UADMIN", f"admin team add {TEAM}")
    run(paika, "UADMIN", f"admin member add <@UALICE> team={TEAM}")
    run(paika, "UALICE", f"template save {TEMPLATE} gpus=1 hours=2")
    run(paika, "UALICE", "template save 医疗对话 gpus=2 hours=2")
    archiver = open_archiver(paika, tmp_path, store)
    try:
        later(paika, 60)
        archive(archiver, paika)
    finally:
        archiver.spool.close()
    for name, gpus in ((TEMPLATE, 1), ("医疗对话", 2)):
        key = keys.template(TEAM, name)
        assert key.isascii()
        body = json.loads(store.get(key))
        assert (body["team"], body["name"], body["fields"]["gpus"]) == (TEAM, name, gpus)
