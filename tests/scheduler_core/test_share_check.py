"""`paika share check`: whether two jobs may share a GPU, by the policy's rule, from the command
line; `--json` prints {"share", "slowdown"} first, `--pairs FILE.csv` one such line per row.

The fingerprints are rows of Lucid's published single-job profiles.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paika_test_cli import run_paika

from scheduler.policy.colocation import FORM, Fingerprint, pair

DCGAN = "gpu_util=57.8,gmem_util=20.2,gmem_mb=2458"  # LSUN bs32: moderate
PPO = "gpu_util=12.4,gmem_util=0,gmem_mb=2051"  # LunarLander bs32: light
RESNET50 = "gpu_util=100,gmem_util=80.754,gmem_mb=5518"  # ImageNet bs32: heavy
LSTM = "gpu_util=97,gmem_util=74.875,gmem_mb=3884"  # Wikitext2 bs64: heavy
HEADER = "a_gpu_util,a_gmem_util,a_gmem_mb,b_gpu_util,b_gmem_util,b_gmem_mb"


def check(*args: str) -> tuple[int, str, str]:
    ran = run_paika(["share", "check", *args])
    return ran.exit_code, ran.stdout, ran.stderr


def test_json_says_share_and_slowdown_first() -> None:
    code, out, _ = check("--a", DCGAN, "--b", PPO, "--json")
    assert code == 0
    assert out.count("\n") == 1
    said = json.loads(out)
    assert list(said)[:2] == ["share", "slowdown"]
    expected = pair(Fingerprint(57.8, 20.2, 2458.0), Fingerprint(12.4, 0.0, 2051.0))
    assert said == {"share": True, "slowdown": round(expected.slowdown, 4), "why": "ok"}


def test_two_heavy_users_of_bandwidth_are_refused() -> None:
    code, out, _ = check("--a", RESNET50, "--b", LSTM, "--json")
    assert code == 0
    assert json.loads(out) == {"share": False, "slowdown": 0.4, "why": "bandwidth"}


def test_the_card_and_the_slowdown_allowed_are_options() -> None:
    # Heavy beside moderate: 20 % expected, refused at the default 15 %, allowed at 25 %.
    assert json.loads(check("--a", RESNET50, "--b", DCGAN, "--json")[1])["share"] is False
    allowed = check("--a", RESNET50, "--b", DCGAN, "--json", "--max-slowdown", "0.25")[1]
    assert json.loads(allowed)["share"] is True
    # Two 3 GiB jobs and the 1 GiB reserve do not fit a 6 GiB card.
    big = "gpu_util=5,gmem_util=1,gmem_mb=3072"
    assert json.loads(check("--a", big, "--b", big, "--json", "--card-gib", "7")[1])["share"]
    small = json.loads(check("--a", big, "--b", big, "--json", "--card-gib", "6")[1])
    assert (small["share"], small["why"]) == (False, "memory")


def test_without_json_a_sentence() -> None:
    code, out, _ = check("--a", RESNET50, "--b", DCGAN)
    assert code == 0
    assert out.startswith("They may not share a card") and "20%" in out and "15%" in out
    assert "may share a card" in check("--a", DCGAN, "--b", PPO)[1]
    assert "memory bandwidth" in check("--a", RESNET50, "--b", LSTM)[1]
    zh = check("--a", RESNET50, "--b", LSTM, "--lang", "zh")[1]
    assert "显存带宽" in zh


def test_pairs_prints_one_line_per_row_in_order(tmp_path: Path) -> None:
    rows = tmp_path / "pairs.csv"
    rows.write_text(
        f"{HEADER}\n57.8,20.2,2458,12.4,0,2051\n100,80.754,5518,97,74.875,3884\n"
        "100,80.754,5518,57.8,20.2,2458\n"
    )
    code, out, _ = check("--pairs", str(rows))
    assert code == 0
    said = [json.loads(line) for line in out.splitlines()]
    assert [(s["share"], s["why"]) for s in said] == [
        (True, "ok"),
        (False, "bandwidth"),
        (False, "compute"),
    ]
    assert all(list(s)[:2] == ["share", "slowdown"] for s in said)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--a", "gpu_util=57.8,gmem_util=20.2", "--b", PPO], ["--a", "gmem_mb is missing", FORM]),
        (["--a", DCGAN, "--b", PPO.replace("12.4", "lots")], ["--b", "gpu_util", '"lots"', FORM]),
        (["--a", DCGAN, "--b", PPO.replace("12.4", "120")], ["--b", "gpu_util", "out of range"]),
        (["--a", DCGAN, "--b", PPO + ",sm=3"], ["--b", "sm is not a field", FORM]),
        (["--a", DCGAN], ["--a and --b", FORM]),
        (["--a", DCGAN, "--b", PPO, "--max-slowdown", "2"], ["--max-slowdown", "0 to 1"]),
        (["--a", DCGAN, "--b", PPO, "--card-gib", "0"], ["--card-gib", "above 0"]),
        (["--a", DCGAN, "--b", PPO, "--lang", "fr"], ["--lang fr", "en or zh"]),
    ],
)
def test_bad_input_exits_2_naming_it(args: list[str], says: list[str]) -> None:
    code, out, err = check(*args)
    assert code == 2
    assert out == ""
    for words in says:
        assert words in err


def test_bad_pairs_files_exit_2_naming_the_row_and_column(tmp_path: Path) -> None:
    rows = tmp_path / "pairs.csv"
    rows.write_text(f"{HEADER}\n57.8,20.2,2458,12.4,0,2051\n57.8,x,2458,12.4,0,2051\n")
    code, out, err = check("--pairs", str(rows))
    assert code == 2
    assert len(out.splitlines()) == 1  # the good row before it was answered
    assert "row 3" in err and "a_gmem_util" in err and '"x"' in err and HEADER in err

    rows.write_text("a_gpu_util,a_gmem_util,b_gpu_util,b_gmem_util,b_gmem_mb\n1,2,3,4,5\n")
    code, _, err = check("--pairs", str(rows))
    assert code == 2 and "lacks the columns a_gmem_mb" in err

    code, _, err = check("--pairs", str(tmp_path / "none.csv"))
    assert code == 2 and "cannot read" in err and "none.csv" in err

    code, _, err = check("--pairs", str(rows), "--a", DCGAN)
    assert code == 2 and "not both" in err


def test_the_console_script_answers_without_a_database_or_settings(tmp_path: Path) -> None:
    """As a process: the database URL names a folder that does not exist and the policy file
    is not there; the command needs neither."""
    env = {
        **os.environ,
        "PAIKA_DATABASE_URL": f"sqlite:///{tmp_path / 'absent' / 'paika.db'}",
        "PAIKA_CONFIG": str(tmp_path / "absent.yml"),
    }
    paika = Path(sys.executable).with_name("paika")
    done = subprocess.run(
        [str(paika), "share", "check", "--a", DCGAN, "--b", PPO, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["share"] is True
    assert not (tmp_path / "absent").exists()
