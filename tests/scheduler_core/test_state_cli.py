"""`paika state show | diff | restore`, run as an operator runs them (in this process, through
typer's runner): a real SQLite file, snapshots in the default local object store
(PAIKA_DATA_DIR/objects)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from paika_test_cli import run_paika as run
from sqlmodel import Session

from scheduler.app import Paika
from scheduler.archive import state
from scheduler.service import jobs
from scheduler.settings import Settings
from storage.objects import keys
from storage.objects.local import LocalStore

SUBMIT = 'submit name={name} gpus=1 hours=2 priority={priority} data=ready cmd="python {name}.py"'


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PAIKA_")}
    return {**clean, "PAIKA_DATA_DIR": str(tmp_path / "data"), "PAIKA_ADMINS": "UADMIN"}


def snapshot(paika: Paika, store: LocalStore, at: datetime) -> str:
    """What the archiver writes: the document of the state now, under its moment's key."""
    with paika.context("UADMIN") as ctx:
        waits = jobs.current_waits(ctx)
    with Session(paika.engine) as session:
        doc = state.build_document(session, paika.policy, waits, at, 1)
    key = keys.snapshot(at)
    store.put(key, state.encode(doc))
    return key


@pytest.fixture
def archived(tmp_path: Path) -> tuple[datetime, datetime]:
    """Two snapshots ten minutes apart: three jobs waiting, then one of them cancelled."""
    data = tmp_path / "data"
    paika = Paika.start(Settings(data_dir=data, admins=("UADMIN",), config=None))
    store = LocalStore(data / "objects")
    for user, team in (("UALICE", "vision"), ("UNICK", "nlp")):
        assert paika.run(f"admin member add <@{user}> team={team}", "UADMIN").ok
    for name, user, priority in (("bert", "UALICE", "normal"), ("gpt", "UNICK", "idle"),
                                 ("vit", "UALICE", "normal")):  # fmt: skip
        assert paika.run(SUBMIT.format(name=name, priority=priority), user).ok
    first = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=20)
    snapshot(paika, store, first)
    assert paika.run("cancel 3", "UALICE").ok
    second = first + timedelta(minutes=10)
    snapshot(paika, store, second)
    paika.engine.dispose()
    return first, second


def test_show_prints_the_queue_as_it_was(
    archived: tuple[datetime, datetime], env: dict[str, str]
) -> None:
    first, second = archived
    latest = run(["state", "show"], env)
    assert latest.exit_code == 0, latest.stderr
    assert "The queue and the GPUs as they were at" in latest.stdout
    assert "#1 bert" in latest.stdout and "#3 vit" not in latest.stdout
    assert keys.snapshot(second) in latest.stderr  # which object it read, and where
    earlier = run(["state", "show", "--at", f"{first + timedelta(minutes=5):%Y-%m-%dT%H:%M}Z"], env)
    assert earlier.exit_code == 0, earlier.stderr
    assert "#3 vit" in earlier.stdout
    zh = run(["state", "show", "--lang", "zh"], env)
    assert "时的队列与 GPU" in zh.stdout
    raw = run(["state", "show", "--json"], env)
    doc = json.loads(raw.stdout)
    assert doc["schema"] == state.SCHEMA and len(doc["jobs"]["rows"]) == 2


def test_show_says_what_is_wrong_with_a_moment(
    archived: tuple[datetime, datetime], env: dict[str, str]
) -> None:
    first, _ = archived
    before = run(["state", "show", "--at", f"{first - timedelta(days=1):%Y-%m-%d %H:%M}"], env)
    assert before.exit_code == 2
    assert "No snapshot taken at or before" in before.stderr
    assert "objects" in before.stderr  # where it looked
    bad = run(["state", "show", "--at", "yesterday"], env)
    assert bad.exit_code == 2 and "yesterday is not a moment" in bad.stderr
    assert "2026-12-01T10:00" in bad.stderr


def test_diff_says_what_changed(archived: tuple[datetime, datetime], env: dict[str, str]) -> None:
    first, second = archived
    found = run(["state", "diff", f"{first:%Y-%m-%dT%H:%M:%S}Z", "latest"], env)
    assert found.exit_code == 0, found.stderr
    assert "- job #3 vit" in found.stdout
    same = run(["state", "diff", "latest", "latest"], env)
    assert "Nothing changed" in same.stdout


def test_restore_rebuilds_a_new_database_and_refuses_one_with_jobs(
    archived: tuple[datetime, datetime], env: dict[str, str], tmp_path: Path
) -> None:
    refused = run(["state", "restore"], env)  # the install's own database holds the jobs
    assert refused.exit_code == 2
    assert "not empty" in refused.stderr and "jobs" in refused.stderr
    fresh = {**env, "PAIKA_DATABASE_URL": f"sqlite:///{tmp_path / 'new.db'}"}
    restored = run(["state", "restore", "--at", "latest"], fresh)
    assert restored.exit_code == 0, restored.stderr
    assert "2 jobs under their old numbers" in restored.stdout
    queue = run(["cmd", "queue all", "--user", "UALICE"], fresh)
    assert "#1 bert" in queue.stdout and "#2 gpt" in queue.stdout
    again = run(["state", "restore"], fresh)
    assert again.exit_code == 2 and "not empty" in again.stderr
