"""What `paika state show` prints is taken back: the moment in its header, given to --at,
finds the same snapshot (issue 29)."""

from __future__ import annotations

import re
from datetime import datetime

from paika_test_cli import run_paika as run

from tests.scheduler_core.test_state_cli import archived, env  # noqa: F401  (fixtures)

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
