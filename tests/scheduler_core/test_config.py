"""The policy file: the bundled example loads, and each kind of mistake names file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.config import load_policy, policy_from_text
from scheduler.errors import ConfigError
from scheduler.settings import BUNDLED_POLICY, Settings

GOOD = """
gpu_types:
  T4-16GB: {memory_gib: 16, speed: 0.25, price_per_gpu_hour: 0.35}
teams:
  vision: {}
"""


def test_the_bundled_example_is_valid() -> None:
    policy = load_policy(BUNDLED_POLICY)
    assert list(policy.gpu_types)[:2] == ["T4-16GB", "A10-24GB"]
    assert policy.approval_required("core") and not policy.approval_required("normal")
    assert policy.canonical_type("a100-80gb") == "A100-80GB"


def test_defaults_fill_what_a_small_file_leaves_out(policy_file: Path) -> None:
    policy_file.write_text(GOOD)
    policy = load_policy(policy_file)
    assert policy.scheduler.cycle_seconds == 10 and policy.timezone == "Asia/Shanghai"
    assert policy.containers.options().run_options() == []  # no site options unless set


def test_the_examples_container_options_are_what_the_agents_get() -> None:
    options = load_policy(BUNDLED_POLICY).containers.options()
    assert options.run_options() == [
        "--volume", "/data/datasets:/datasets:ro", "--shm-size", "16g",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        (GOOD + "colour: blue\n", "colour", "unknown key"),
        (
            GOOD.replace("memory_gib: 16", "memory_gib: -1"),
            "gpu_types.T4-16GB.memory_gib",
            "greater than 0",
        ),
        (GOOD.replace("speed: 0.25, ", ""), None, None),
        (
            GOOD.replace("price_per_gpu_hour: 0.35", "price: 0.35"),
            "gpu_types.T4-16GB.price_per_gpu_hour",
            "required key is missing",
        ),
        (
            GOOD + "scheduler:\n  headroom: {V100: 1}\n",
            "scheduler.headroom.V100",
            "unknown GPU type 'V100'",
        ),
        (
            GOOD + "scheduler:\n  admission: {action: drop}\n",
            "scheduler.admission.action",
            "'warn' or 'defer'",
        ),
        (GOOD + "timezone: Mars/Olympus\n", "timezone", "unknown time zone"),
        ("gpu_types: {}\n", "gpu_types", "at least 1 item"),
        ("gpu_types: [\n", "line 2", "not valid YAML"),
        ("- a\n- b\n", "-", "must be a mapping"),
        (
            GOOD + "containers:\n  mounts: [{source: data, target: /data}]\n",
            "containers.mounts.0.source",
            "not an absolute path",
        ),
        (
            GOOD + "containers:\n  mounts: [{source: /d, target: '/x,readonly=false'}]\n",
            "containers.mounts.0.target",
            "no '..', ':' or ','",
        ),
        (GOOD + "containers:\n  shm_size: '--privileged'\n", "containers.shm_size", "16g"),
        (GOOD + "containers:\n  ipc: private\n", "containers.ipc", "'host'"),
    ],
    ids=[
        "unknown-key",
        "negative-memory",
        "optional-speed",
        "missing-price",
        "headroom-type",
        "bad-choice",
        "bad-zone",
        "empty-catalog",
        "yaml-syntax",
        "not-a-mapping",
        "mount-relative",
        "mount-injection",
        "shm-option",
        "ipc-choice",
    ],
)
def test_a_bad_file_names_the_file_the_key_and_the_problem(
    policy_file: Path, text: str, key: str | None, problem: str | None
) -> None:
    policy_file.write_text(text)
    if key is None:
        load_policy(policy_file)  # speed is optional
        return
    with pytest.raises(ConfigError) as caught:
        load_policy(policy_file)
    assert caught.value.path == str(policy_file)
    assert caught.value.key == key
    assert problem in caught.value.problem
    assert str(caught.value).startswith(f"{policy_file}: {key}: ")


def test_a_missing_file_says_how_to_point_at_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found; set PAIKA_CONFIG"):
        load_policy(tmp_path / "nope.yml")


def test_settings_read_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PAIKA_ADMINS", "U1, U2,")
    monkeypatch.setenv("PAIKA_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("PAIKA_DATABASE_URL", raising=False)
    settings = Settings()
    assert settings.admins == ("U1", "U2")
    assert settings.resolved_database_url() == f"sqlite:///{tmp_path.as_posix()}/paika.db"


@pytest.mark.parametrize(
    ("sample_s", "cycle_s", "period_s"),
    [(60, 10, 60), (61, 10, 70), (5, 10, 10), (1.1, 0.1, 1.1), (0.3, 0.1, 0.3)],
)
def test_one_sample_period_for_the_cycle_the_digest_and_the_idle_alerts(
    sample_s: float, cycle_s: float, period_s: float
) -> None:
    """The first cycle at least sample_seconds after the last sample, in whole cycles; the
    digest and the idle alerts read samples by the same period (they had two formulas, which
    disagreed where a float division lands just above a whole number)."""
    from scheduler.alerts.idle import sample_period
    from scheduler.digest.timeline import sample_interval

    policy = policy_from_text(
        f"gpu_types: {{T4: {{memory_gib: 16, price_per_gpu_hour: 1}}}}\n"
        f"scheduler: {{cycle_seconds: {cycle_s}, hosts: {{sample_seconds: {sample_s}}}}}\n",
        "test",
    )
    assert policy.sample_period_seconds() == pytest.approx(period_s)
    assert sample_interval(policy) == sample_period(policy) == policy.sample_period_seconds()
