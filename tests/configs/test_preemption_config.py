"""The policy file's preemption keys: defaults, bounds, what the policy code gets of them, and
where a preemptible job keeps its checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from scheduler.config import PolicyConfig, Preemption, load_policy

EXAMPLE = Path(__file__).parents[2] / "scheduler" / "examples" / "policy.yml"


def test_the_example_file_sets_every_key_and_the_knobs_follow() -> None:
    policy = load_policy(EXAMPLE)
    preemption = policy.scheduler.preemption
    assert preemption == Preemption()  # the file says the defaults
    assert (preemption.preemptible, preemption.max_per_job, preemption.min_run_minutes) == (
        True,
        3,
        30,
    )
    assert (preemption.shorter_factor, preemption.default_grace_minutes) == (8, 5)
    assert preemption.checkpoint_root is None
    knobs = policy.knobs()
    assert knobs.preemptible_preemption is True
    assert (knobs.preempt_max_per_job, knobs.preempt_min_run_s) == (3, 1800)
    assert knobs.shorter_factor == 8


def _with(**preemption: object) -> PolicyConfig:
    raw = load_policy(EXAMPLE).model_dump(mode="json")
    raw["scheduler"]["preemption"] = {**raw["scheduler"]["preemption"], **preemption}
    return PolicyConfig.model_validate(raw)


def test_the_knobs_take_the_policys_values() -> None:
    knobs = _with(preemptible=False, max_per_job=1, min_run_minutes=5, shorter_factor=None).knobs()
    assert knobs.preemptible_preemption is False
    assert (knobs.preempt_max_per_job, knobs.preempt_min_run_s) == (1, 300)
    assert knobs.shorter_factor is None  # only core work preempts


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_per_job", -1),
        ("min_run_minutes", -5),
        ("shorter_factor", 0.5),
        ("default_grace_minutes", 0),
        ("default_grace_minutes", 121),
        ("checkpoint_root", "relative/ckpt"),
        ("checkpoint_root", ""),
        ("preemptable", True),
    ],
)
def test_bad_values_are_refused_naming_the_key(key: str, value: object) -> None:
    with pytest.raises(ValidationError) as caught:
        _with(**{key: value})
    assert key in str(caught.value)


def test_where_a_preemptible_job_keeps_its_checkpoint() -> None:
    shared = Preemption(checkpoint_root="/mnt/nas/paika-ckpt/")
    assert shared.checkpoint_of(42, None) == "/mnt/nas/paika-ckpt/job-42"
    assert shared.checkpoint_of(42, "s3://ckpt/mine") == "s3://ckpt/mine"
    assert Preemption().checkpoint_of(42, None) is None  # its host's agent keeps a folder
    assert Preemption().grace_of(None) == 300 and Preemption().grace_of(90.0) == 90.0
