"""Every reason the policy can give for a preemption is said: in the catalogue, in English and
Chinese, for the owner's DM, /gpu status and /gpu why, and in the job's history."""

from __future__ import annotations

import pytest

from bot.notice_words import preempt_reason
from scheduler.hosts.reconcile import _PREEMPTED_FOR
from scheduler.policy.plan import PreemptCode
from scheduler.policy.reasons import because


@pytest.mark.parametrize("code", list(PreemptCode))
def test_every_preemption_reason_has_its_words(code: PreemptCode) -> None:
    for lang in ("en", "zh"):
        said = preempt_reason(lang, code.value, 57)
        assert "#57" in said and code.value not in said
    assert "#57" in because(_PREEMPTED_FOR[code], for_job=57).english()


def test_an_unknown_reason_is_shown_as_it_is() -> None:
    assert preempt_reason("en", "for_a_new_reason", 57) == "for_a_new_reason"
