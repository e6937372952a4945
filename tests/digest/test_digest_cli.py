"""`paika digest` run as a user runs it (in this process, through typer's runner) on a fresh
SQLite file."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from paika_test_cli import run_paika as run
from PIL import Image


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PAIKA_")}
    return {**clean, "PAIKA_DATA_DIR": str(tmp_path / "data"), "PAIKA_ADMINS": "UADMIN"}


def test_print_and_png_on_a_fresh_install(env: dict[str, str], tmp_path: Path) -> None:
    submitted = run(
        [
            "cmd",
            'submit name=bert gpus=2 hours=8 priority=normal data=pending cmd="python train.py" team=vision',
            "--user",
            "UADMIN",
        ],
        env,
    )
    assert submitted.exit_code == 0, submitted.stderr
    out = tmp_path / "board.png"
    result = run(["digest", "--print", "--png", str(out)], env)
    assert result.exit_code == 0, result.stderr
    assert "paika daily GPU board — " in result.stdout
    assert "GPUs: none registered yet" in result.stdout
    assert "Waiting for data (1), longest first:" in result.stdout
    assert "#1 bert · vision · owner UADMIN · waiting 0 min" in result.stdout
    assert f"picture written to {out}" in result.stderr
    image = Image.open(io.BytesIO(out.read_bytes()))
    assert image.format == "PNG" and image.size[0] == 1600


def test_the_picture_alone_in_chinese(env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "zh.png"
    result = run(["digest", "--png", str(out), "--lang", "zh"], env)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_without_print_or_png_it_says_what_to_pass(env: dict[str, str]) -> None:
    result = run(["digest"], env)
    assert result.exit_code == 2
    assert "--print" in result.stderr and "--png FILE" in result.stderr
    wrong = run(["digest", "--print", "--lang", "fr"], env)
    assert wrong.exit_code == 2 and "use en or zh" in wrong.stderr


def test_print_speaks_the_policys_language_and_lang_overrides_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yml"
    example = (Path(__file__).parents[2] / "scheduler/examples/policy.yml").read_text()
    # A Chinese team's own policy: its language, and its team named in its own script.
    policy.write_text(
        example.replace("default_language: en", "default_language: zh").replace(
            "  nlp: {channel:", "  语音组: {channel:"
        )
    )
    team = {**env, "PAIKA_CONFIG": str(policy)}
    submitted = run(
        [
            "cmd",
            'submit name=医疗对话-sft gpus=2 hours=8 priority=normal data=pending cmd="python train.py" '
            "team=语音组",
            "--user",
            "UADMIN",
        ],
        team,
    )
    assert submitted.exit_code == 0, submitted.stderr
    chinese = run(["digest", "--print"], team)
    assert chinese.exit_code == 0, chinese.stderr
    assert "每日 GPU 看板 — " in chinese.stdout
    assert "等待数据就绪（1），等待最久的在前" in chinese.stdout
    assert "#1 医疗对话-sft · 语音组 · UADMIN · 已等待 0 分钟" in chinese.stdout
    assert "*" not in chinese.stdout and "&amp;" not in chinese.stdout  # no Slack marks
    assert "昨天（" in chinese.stdout and "）：没有使用 GPU。" in chinese.stdout
    assert "paika daily GPU board" not in chinese.stdout
    english = run(["digest", "--print", "--lang", "en"], team)
    assert english.exit_code == 0, english.stderr
    assert "paika daily GPU board — " in english.stdout
    assert "#1 医疗对话-sft · 语音组 · owner UADMIN · waiting 0 min" in english.stdout
