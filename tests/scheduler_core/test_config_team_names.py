"""A policy file names its teams in any script, by the rules /gpu admin team add uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.config import load_policy
from scheduler.errors import ConfigError

EXAMPLE = Path(__file__).parents[2] / "scheduler" / "examples" / "policy.yml"


def _policy(tmp_path: Path, team: str) -> Path:
    path = tmp_path / "policy.yml"
    path.write_text(
        EXAMPLE.read_text().replace("  nlp: {channel:", f'  "{team}": {{channel:'),
        encoding="utf-8",
    )
    return path


def test_a_team_named_in_chinese_is_taken_and_kept_nfc(tmp_path: Path) -> None:
    assert "语音组" in load_policy(_policy(tmp_path, "语音组")).teams
    assert "équipe" in load_policy(_policy(tmp_path, "e\\u0301quipe")).teams


@pytest.mark.parametrize(
    ("team", "says"),
    [
        ("语\\u202e音", "U+202E (character 2) may not be in a team name: an invisible formatting"),
        ("语\\u200b音", "U+200B (character 2) may not be in a team name"),
        ("语音 组", "U+0020 (character 3) may not be in a team name: a space"),
    ],
)
def test_a_team_name_that_reads_differently_is_refused_naming_the_character(
    tmp_path: Path, team: str, says: str
) -> None:
    with pytest.raises(ConfigError, match="may not be in a team name") as caught:
        load_policy(_policy(tmp_path, team))
    assert says in str(caught.value)
