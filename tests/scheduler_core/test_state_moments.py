"""What `paika state show` prints is taken back: the moment in its header, given to --at,
finds the same snapshot (issue 29)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from paika_test_cli import run_paika as run

from scheduler.app import Paika
from scheduler.settings import Settings
from storage.objects.local import LocalStore
from tests.scheduler_core.test_state_cli import SUBMIT, archived, env, snapshot  # noqa: F401

HEADER = re.compile(r"as they were at (.+?)(?: \(policy config version \d+\))?:$", re.M)


def test_the_moment_state_show_prints_is_accepted_back_by_at(
    archived: tuple[datetime, datetime],  # noqa: F811
    env: dict[str, str],  # noqa: F811
) -> None:
    first, second = archived
    for asked in ("latest", f"{first:%Y-%m-%dT%H:%M:%S}Z"):
        shown = run(["state", "show", "--at", asked], env)
        assert shown.exit_code == 0, shown.stderr
        found = HEADER.search(shown.stdout)
        assert found, shown.stdout
        printed = found.group(1)
        again = run(["state", "show", "--at", printed], env)
        assert again.exit_code == 0, again.stderr
        assert HEADER.search(again.stdout).group(1) == printed  # type: ignore[union-attr]
        assert again.stdout == shown.stdout  # the same snapshot


def test_diff_names_the_jobs_that_came_and_went_between_the_snapshots(
    tmp_path: Path,
    env: dict[str, str],  # noqa: F811
) -> None:
    data = tmp_path / "data"
    paika = Paika.start(Settings(data_dir=data, admins=("UADMIN",), config=None))
    store = LocalStore(data / "objects")
    assert paika.run("admin member add <@UALICE> team=vision", "UADMIN").ok
    assert paika.run(SUBMIT.format(name="bert", priority="normal"), "UALICE").ok
    first = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=20)
    snapshot(paika, store, first)
    # In between: a job submitted, run and ended; nothing else changed.
    assert paika.run(SUBMIT.format(name="quick", priority="normal"), "UALICE").ok
    assert paika.run("cancel quick", "UALICE").ok
    snapshot(paika, store, first + timedelta(minutes=10))
    paika.engine.dispose()
    found = run(["state", "diff", f"{first:%Y-%m-%dT%H:%M:%S}Z", "latest"], env)
    assert found.exit_code == 0, found.stderr
    assert "Nothing changed" not in found.stdout, found.stdout
    assert "came and went" in found.stdout and "#2" in found.stdout, found.stdout
