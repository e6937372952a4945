"""The `paika` command line, run as a user runs it on a real SQLite file: in this process
through typer's runner, and once as the installed console script in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from paika_test_cli import run_paika as run

from storage.db import head_revision

PAIKA = Path(sys.executable).with_name("paika")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PAIKA_")}
    return {**clean, "PAIKA_DATA_DIR": str(tmp_path / "data"), "PAIKA_ADMINS": "UADMIN"}


def test_a_fresh_install_bootstraps_from_paika_admins(env: dict[str, str], tmp_path: Path) -> None:
    upgraded = run(["db", "upgrade"], env)
    assert upgraded.exit_code == 0, upgraded.stderr
    assert f"database at revision {head_revision()} (was empty)" in upgraded.stdout
    assert (tmp_path / "data" / "paika.db").exists()

    added = run(["cmd", "admin member add <@UALICE> team=vision", "--user", "UADMIN"], env)
    assert added.exit_code == 0, added.stderr
    submitted = run(
        [
            "cmd",
            'submit name=bert gpus=2 hours=8 priority=normal data=ready cmd="python train.py"',
            "--user",
            "UALICE",
        ],
        env,
    )
    assert submitted.exit_code == 0, submitted.stderr
    assert "Queued job #1 bert for team vision" in submitted.stdout

    queue = run(["cmd", "queue", "--user", "UALICE"], env)
    assert "#1 bert" in queue.stdout


def test_a_user_error_exits_non_zero_with_the_message(env: dict[str, str]) -> None:
    """The console script itself, in a process of its own: its exit status is the command's."""

    def script(args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PAIKA), *args], env=env, capture_output=True, text=True, timeout=60, check=False
        )

    denied = script(["cmd", "admin team add robotics", "--user", "UALICE"])
    assert denied.returncode == 1
    assert "Only admins can add teams." in denied.stderr

    bad = script(["cmd", "submit name=x gpus=two", "--user", "UALICE"])
    assert bad.returncode == 1
    assert "gpus" in bad.stderr and "Example:" in bad.stderr


def test_a_bad_policy_file_stops_paika_at_start(env: dict[str, str], tmp_path: Path) -> None:
    policy = tmp_path / "policy.yml"
    policy.write_text("gpu_types:\n  T4: {memory_gib: 16, price_per_gpu_hour: 0.3, colour: red}\n")
    result = run(["cmd", "queue", "--user", "U1"], {**env, "PAIKA_CONFIG": str(policy)})
    assert result.exit_code == 2
    assert f"{policy}: gpu_types.T4.colour: unknown key" in result.stderr


def test_help_comes_from_the_grammar(env: dict[str, str]) -> None:
    result = run(["cmd", "help submit", "--user", "U1"], env)
    assert result.exit_code == 0
    for key in ("name=", "gpus=", "hours=", "priority=", "data=", "cmd="):
        assert key in result.stdout


def test_an_unreachable_database_is_named_without_its_password(env: dict[str, str]) -> None:
    url = "postgresql://paika:s3cret@127.0.0.1:1/paika"  # nothing listens on port 1
    result = run(["cmd", "queue", "--user", "U1"], {**env, "PAIKA_DATABASE_URL": url})
    assert result.exit_code == 2
    assert (
        "cannot reach the database at postgresql+psycopg://paika:***@127.0.0.1:1/paika"
        in result.stderr
    )
    assert "s3cret" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["cmd", "queue", "--user", "U\udcff"], '--user "U\\udcff"'),
        (["cmd", "queue \udcff", "--user", "U1"], 'the command\'s text "queue \\udcff"'),
    ],
)
def test_bytes_that_are_not_text_are_named_not_a_traceback(
    env: dict[str, str], args: list[str], named: str
) -> None:
    # (a byte such as 0xff in argv reaches Python as a lone surrogate: `--user $'U\xff'`)
    result = run(args, env)
    assert result.exit_code == 2
    assert f"paika cmd: {named} holds bytes that are not text" in result.stderr
    assert not (Path(env["PAIKA_DATA_DIR"]) / "paika.db").exists()  # refused before anything


def test_cmd_speaks_the_language_asked_for_else_the_users_choice(env: dict[str, str]) -> None:
    run(["db", "upgrade"], env)
    run(["cmd", "admin member add <@UALICE> team=vision", "--user", "UADMIN"], env)
    submit = 'submit name=bert gpus=2 hours=8 priority=normal data=pending cmd="python train.py"'

    queued = run(["cmd", submit, "--user", "UALICE", "--lang", "zh"], env)
    assert queued.exit_code == 0, queued.stderr
    assert "任务 #1 bert 已为团队 vision 排队：2 张卡，8 卡时，普通。" in queued.stdout
    assert "数据就位后运行：/gpu ready #1" in queued.stdout

    refused = run(["cmd", "admin team add robotics", "--user", "UALICE", "--lang", "zh"], env)
    assert refused.exit_code == 1
    assert "只有管理员可以添加团队。" in refused.stderr

    # Without --lang, the console says what the user chose with /gpu lang.
    assert (
        "Job #1 bert — waiting for data"
        in run(["cmd", "status #1", "--user", "UALICE"], env).stdout
    )
    run(["cmd", "lang zh", "--user", "UALICE"], env)
    status = run(["cmd", "status #1", "--user", "UALICE"], env).stdout
    assert "任务 #1 bert — 等待数据就绪" in status and "负责人 <@UALICE>" in status
    english = run(["cmd", "status #1", "--user", "UALICE", "--lang", "en"], env).stdout
    assert "Job #1 bert — waiting for data" in english

    unknown = run(["cmd", "queue", "--user", "UALICE", "--lang", "fr"], env)
    assert unknown.exit_code == 2
    assert "--lang fr is not known; use en or zh." in unknown.stderr


@pytest.mark.parametrize(
    ("words", "fmt", "env", "job"),
    [
        (["metric=loss:0.31", "output=s3://ckpt/x"], None, {}, True),
        (["status=succeeded"], None, {}, True),
        (["metric=top1:76.2"], None, {}, True),
        (["by=project", "metric=top1"], None, {}, False),  # a metric by name: the ledger's
        (["by=round", "project=llm"], None, {}, False),
        ([], None, {}, False),
        (["metric=loss:0.31"], "csv", {}, False),  # --format: always the export
        (["metric=top1"], None, {"PAIKA_JOB_ID": "42"}, True),  # inside a job: its report
    ],
)
def test_paika_report_tells_a_jobs_report_from_the_ledger_export(
    words: list[str], fmt: str | None, env: dict[str, str], job: bool
) -> None:
    from bot.cli import is_job_report

    assert is_job_report(words, fmt, env) is job
