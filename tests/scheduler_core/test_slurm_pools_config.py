"""Pools in the policy file: which executor runs each pool's hosts, and a Slurm pool's
settings; each mistake names its key."""

from __future__ import annotations

import pytest

from scheduler.config import policy_from_text
from scheduler.errors import ConfigError

CATALOG = """
gpu_types:
  T4-16GB: {memory_gib: 16, price_per_gpu_hour: 0.35}
  A100-80GB: {memory_gib: 80, price_per_gpu_hour: 2.2}
"""
SLURM_POOL = """
pools:
  cluster:
    executor: slurm
    hosts: [node01, node02]
    slurm:
      partition: gpu
      gres: {A100-80GB: a100, T4-16GB: t4}
      log_path: /shared/paika/{job_id}.{attempt}.out
  boxes:
    hosts: [box1]
"""


def test_a_slurm_pool_and_an_agent_pool_side_by_side() -> None:
    policy = policy_from_text(CATALOG + SLURM_POOL, "policy.yml")
    name, pool = policy.pool_of("node02") or ("", None)
    assert name == "cluster" and pool is not None and pool.executor == "slurm"
    assert pool.slurm is not None and pool.slurm.gres["A100-80GB"] == "a100"
    assert pool.slurm.time_margin == 1.5 and pool.slurm.job_name_prefix == "paika-"
    assert policy.pool_of("box1") is not None and policy.pool_of("box1")[1].executor == "agents"  # type: ignore[index]
    assert policy.pool_of("elsewhere") is None  # no pool: its agent runs its jobs


def test_no_pools_is_every_host_on_agents() -> None:
    assert policy_from_text(CATALOG, "policy.yml").pools == {}


@pytest.mark.parametrize(
    ("change", "key", "problem"),
    [
        (("partition: gpu", "partition: gpu\n      time_margin: 0.5"), "pools.cluster.slurm.time_margin", "greater than or equal to 1"),
        (("    slurm:\n      partition: gpu", "    slurn:\n      partition: gpu"), "pools.cluster.slurn", "unknown key"),
        (("executor: slurm", "executor: pbs"), "pools.cluster.executor", "'agents' or 'slurm'"),
        (("gres: {A100-80GB: a100, T4-16GB: t4}", "gres: {A100-80GB: a100, V100: v100}"), "pools.cluster.slurm.gres.V100", "unknown GPU type 'V100'"),
        (("gres: {A100-80GB: a100, T4-16GB: t4}", "gres: {}"), "pools.cluster.slurm.gres", "at least 1"),
        (("partition: gpu", "partition: 'gpu;rm'"), "pools.cluster.slurm.partition", "should match pattern"),
        (("log_path: /shared/paika/{job_id}.{attempt}.out", "log_path: logs/{job_id}.out"), "pools.cluster.slurm.log_path", "not an absolute path"),
        (("log_path: /shared/paika/{job_id}.{attempt}.out", "log_path: /logs/{owner}.out"), "pools.cluster.slurm.log_path", "unknown field {owner}"),
        (("log_path: /shared/paika/{job_id}.{attempt}.out", "log_path: /logs/{job_id.out"), "pools.cluster.slurm.log_path", "not a valid template"),
        (("hosts: [box1]", "hosts: [node01]"), "pools.boxes.hosts", "already in pool 'cluster'"),
        (("  boxes:\n    hosts: [box1]", "  boxes:\n    hosts: [box1]\n    slurm: {partition: x, gres: {T4-16GB: t4}, log_path: /l}"), "pools.boxes", "only for executor: slurm"),
    ],
)  # fmt: skip
def test_a_bad_pool_names_its_key(change: tuple[str, str], key: str, problem: str) -> None:
    text = (CATALOG + SLURM_POOL).replace(*change)
    assert text != CATALOG + SLURM_POOL
    with pytest.raises(ConfigError) as caught:
        policy_from_text(text, "policy.yml")
    assert caught.value.key == key, caught.value
    assert problem in caught.value.problem


def test_a_slurm_pool_without_its_settings_says_what_it_needs() -> None:
    text = CATALOG + "pools:\n  cluster:\n    executor: slurm\n    hosts: [node01]\n"
    with pytest.raises(ConfigError) as caught:
        policy_from_text(text, "policy.yml")
    assert caught.value.key == "pools.cluster"
    assert "needs a slurm: section" in caught.value.problem
