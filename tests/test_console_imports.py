"""The console's commands (`paika cmd`, `paika digest --print`, `paika state show`) start
quickly: they load neither the Slack stack, the HTTP client, matplotlib nor Alembic, which
cost seconds a call together (bench/cli_timings.py measures them). Each command runs as its
own process, as the console script runs it, and says which modules it loaded; a module-level
import of one of these anywhere on the console's path fails here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlmodel import Session

from scheduler.app import Paika
from scheduler.archive import state
from scheduler.service import jobs
from scheduler.settings import Settings
from storage.objects import keys
from storage.objects.local import LocalStore

# The top-level packages the console never needs: Slack's (the bot), the agents' HTTP client
# (the cycle), the picture's, the schema's migrations (an up-to-date schema is checked
# without them), and S3's (the store here is a local folder).
HEAVY = (
    "slack_sdk",
    "slack_bolt",
    "httpx",
    "matplotlib",
    "alembic",
    "apscheduler",
    "boto3",
    "botocore",
)

# Runs the console script's entry and prints the heavy packages that are in sys.modules at its
# end, whatever the command's exit status.
COUNTING = """
import json, sys
sys.argv = ["paika", *sys.argv[1:]]
from bot.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = sorted({{name.partition(".")[0] for name in sys.modules}} & set({heavy!r}))
print(json.dumps({{"code": code, "heavy": heavy}}))
"""

ADMIN = "UADMIN"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite data dir with a member, a waiting job and a snapshot of the queue."""
    data = tmp_path_factory.mktemp("console") / "data"
    paika = Paika.start(Settings(data_dir=data, admins=(ADMIN,), config=None))
    try:
        assert paika.run("admin member add <@UALICE> team=vision", ADMIN).ok
        submit = 'submit name=bert gpus=1 hours=2 priority=normal data=ready cmd="python bert.py"'
        assert paika.run(submit, "UALICE").ok
        with paika.context(ADMIN) as ctx:
            waits = jobs.current_waits(ctx)
        at = datetime.now(UTC).replace(microsecond=0)
        with Session(paika.engine) as session:
            doc = state.build_document(session, paika.policy, waits, at, 1)
        LocalStore(data / "objects").put(keys.snapshot(at), state.encode(doc))
    finally:
        paika.engine.dispose()
    return data


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["cmd", "help"], "/gpu"),
        (["cmd", "--user", "UALICE", "queue"], "bert"),
        (["cmd", "--user", "UALICE", "status 1"], "bert"),
        (["digest", "--print"], "bert"),
        (["state", "show"], "bert"),
    ],
    ids=["cmd help", "cmd queue", "cmd status", "digest --print", "state show"],
)
def test_the_console_loads_no_slack_http_pictures_or_migrations(
    data_dir: Path, args: list[str], says: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAIKA_")}
    env |= {"PAIKA_DATA_DIR": str(data_dir), "PAIKA_ADMINS": ADMIN}
    done = subprocess.run(
        [sys.executable, "-c", COUNTING.format(heavy=HEAVY), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    *output, last = done.stdout.strip().splitlines()
    counted = json.loads(last)
    assert counted["code"] == 0, done.stderr
    assert says in "\n".join(output)
    assert counted["heavy"] == [], f"paika {' '.join(args)} loaded {counted['heavy']}"
