"""Every reason code has its words in English and Chinese (issue 29), the English the
scheduler stores is the catalogue's own, and a reason read back from storage is said the
same; one with no code, or with a code this version does not know, is said as stored."""

from __future__ import annotations

from string import Formatter
from typing import Any

import pytest

from bot.i18n import catalogue, placeholders
from bot.reason_words import reason_words
from scheduler.policy.reasons import ENGLISH, Reason, ReasonCode, because, reason_of

# A value for every name a reason takes, so each code can be said.
SAMPLE: dict[str, Any] = {
    "for_job": 57,
    "attempts": 3,
    "error": "KeyError: 'x'",
    "minutes": 12.5,
    "hours": 2.0,
    "slurm_reason": "Resources",
    "exit_code": 3,
    "ended_by": "TIMEOUT",
    "host": "gpu-a",
    "problem": "no such user",
    "gpu_type": "T4-16GB",
    "memory": 16.0,
    "needed": 40.0,
    "speed": 1.0,
    "stop": "cancel",
    "state": "running",
    "card": "gpu-a",
    "beside": "#812",
    "total": 80.0,
    "pressure": "light + light",
    "used": 23.4,
    "declared": 20.0,
    "upstream": 12,
    "by": "U0ALICE",
}
INNER = {"why", "done"}  # names that hold a reason said inside


def _values(code: ReasonCode) -> dict[str, Any]:
    names = {name for _, name, _, _ in Formatter().parse(ENGLISH[code]) if name}
    return {
        name: Reason(ReasonCode.AGENT_LOST) if name in INNER else SAMPLE[name] for name in names
    }


@pytest.mark.parametrize("code", list(ReasonCode))
def test_every_code_has_english_and_chinese_words_with_its_values(code: ReasonCode) -> None:
    words = catalogue()[f"reason.{code.value}"]
    assert words["en"] == ENGLISH[code]  # the stored text and the English said agree
    assert placeholders(words["zh"]) == placeholders(ENGLISH[code])
    said = because(code, **_values(code))
    assert reason_words("en", said, None) == said.english()
    chinese = reason_words("zh", said, None)
    assert chinese and chinese != said.english()
    assert "its host lost it" not in chinese  # a reason inside is said in Chinese too


@pytest.mark.parametrize("code", list(ReasonCode))
def test_a_stored_reason_reads_back_as_it_was_given(code: ReasonCode) -> None:
    said = because(code, **_values(code))
    assert reason_of(said.code.value, said.stored_values()) == said


def test_a_reason_without_a_code_is_said_as_stored() -> None:
    assert reason_words("zh", None, "wrong learning rate") == "wrong learning rate"
    assert reason_words("zh", None, None) == ""
    assert reason_of(None, None) is None
    assert reason_of("a_code_from_a_newer_paika", {}) is None
    inner_unknown = {"why": {"code": "a_code_from_a_newer_paika", "values": {}}}
    assert reason_of(ReasonCode.REQUEUED_BECAUSE.value, inner_unknown) is None


def test_a_code_whose_values_do_not_fit_its_words_is_said_as_stored() -> None:
    missing = Reason(ReasonCode.EXITED, {})  # as another version might have stored it
    assert reason_words("zh", missing, "exited with 3") == "exited with 3"
    odd = Reason(ReasonCode.HOST_GAVE_UP, {"hours": "two"})
    assert reason_words("zh", odd, "its host did not answer for two h") == (
        "its host did not answer for two h"
    )


def test_a_start_a_host_refused_is_said_in_paikas_words_where_its_code_has_some() -> None:
    held = because(
        ReasonCode.START_HELD, host="gpu-a", problem="no such user", refusal="account_unknown"
    )
    assert "不存在" in reason_words("zh", held, held.english())
    other = because(ReasonCode.START_HELD, host="gpu-a", problem="disk full", refusal="other")
    assert reason_words("zh", other, None) == "暂不派往 gpu-a（该主机拒绝启动它）：disk full"
