"""Pools in the policy file: which executor runs each pool's hosts, and a Slurm pool's
settings; each mistake names its key."""

from __future__ import annotations

import pytest

from scheduler.config import PolicyConfig, policy_from_text
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
    assert pool.options is not None and pool.options.gres["A100-80GB"] == "a100"
    assert pool.options.time_margin == 1.5 and pool.options.job_name_prefix == "paika-"
    assert pool.options.utilization == "none"  # no agents on the nodes unless asked for
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
        (("partition: gpu", "partition: gpu\n      utilization: nvml"), "pools.cluster.slurm.utilization", "'none' or 'agents'"),
        (("hosts: [box1]", "hosts: [node01]"), "pools.boxes.hosts", "already in pool 'cluster'"),
        (("  boxes:\n    hosts: [box1]", "  boxes:\n    hosts: [box1]\n    slurm: {partition: x, gres: {T4-16GB: t4}, log_path: /l}"), "pools.boxes", "only for executor: slurm"),
        (("partition: gpu", "partition: gpu\n      container: {value: '{image}'}"), "pools.cluster.slurm.container.option", "required key is missing"),
        (("partition: gpu", "partition: gpu\n      container: {option: container-image}"), "pools.cluster.slurm.container.option", "not an sbatch long option"),
        (("partition: gpu", "partition: gpu\n      container: {option: '--container-image x'}"), "pools.cluster.slurm.container.option", "not an sbatch long option"),
        (("partition: gpu", "partition: gpu\n      container: {option: --uid}"), "pools.cluster.slurm.container.option", "sbatch's --uid, which paika sets itself"),
        (("partition: gpu", "partition: gpu\n      container: {option: --nodel}"), "pools.cluster.slurm.container.option", "sbatch's --nodelist"),
        (("partition: gpu", "partition: gpu\n      container: {option: --container-image, value: /images/x.sqsh}"), "pools.cluster.slurm.container.value", "does not name the job's {image}"),
        (("partition: gpu", "partition: gpu\n      container: {option: --container-image, value: '{name}'}"), "pools.cluster.slurm.container.value", "plain {image} or {enroot_image}"),
        (("partition: gpu", "partition: gpu\n      container: {option: --container-image, value: '{image!r}'}"), "pools.cluster.slurm.container.value", "plain {image} or {enroot_image}"),
        (("partition: gpu", "partition: gpu\n      container: {option: --container-image, value: '{image'}"), "pools.cluster.slurm.container.value", "not a valid template"),
        (("partition: gpu", "partition: gpu\n      container: {option: --container-image, value: \"{image}\\nx\"}"), "pools.cluster.slurm.container.value", "control character"),
        (("partition: gpu", "partition: gpu\n      container: {option: --container, value: 'oci/{image}'}"), "pools.cluster.slurm.container", "absolute bundle path"),
        (("partition: gpu", "partition: gpu\n      container: {option: --container-image, options: [--wrap=true]}"), "pools.cluster.slurm.container.options", "sbatch's --wrap"),
        (("partition: gpu", "partition: gpu\n      container: {option: --container-image, options: [--export=ALL]}"), "pools.cluster.slurm.container.options", "sbatch's --export"),
        (("partition: gpu", "partition: gpu\n      container: {option: --container-image, options: [-w node09]}"), "pools.cluster.slurm.container.options", "not an sbatch long option"),
        (("partition: gpu", "partition: gpu\n      container: {option: --container-image, options: [\"--container-mounts=/a:/a\\n\"]}"), "pools.cluster.slurm.container.options", "one line"),
        (("partition: gpu", "partition: gpu\n      container: {option: --container-image, colour: red}"), "pools.cluster.slurm.container.colour", "unknown key"),
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


def test_a_pools_container_setting_is_read_and_left_unset_by_default() -> None:
    plain = policy_from_text(CATALOG + SLURM_POOL, "policy.yml").pools["cluster"].options
    assert plain is not None and plain.container is None  # image jobs are refused there
    pyxis = SLURM_POOL.replace(
        "partition: gpu",
        "partition: gpu\n      container:\n        option: --container-image\n"
        "        value: '{enroot_image}'\n"
        "        options: [--container-mounts=/data:/data:ro, --no-container-mount-home]",
    )
    slurm = policy_from_text(CATALOG + pyxis, "policy.yml").pools["cluster"].options
    assert slurm is not None and slurm.container is not None
    assert slurm.container.arguments("nvcr.io/nvidia/pytorch:24.05-py3") == (
        "--container-image=nvcr.io#nvidia/pytorch:24.05-py3",
        "--container-mounts=/data:/data:ro",
        "--no-container-mount-home",
    )


def test_a_policy_with_pools_dumps_as_its_file_reads() -> None:
    # The pool's section is kept under its executor's name, so a dump reads back the same.
    policy = policy_from_text(CATALOG + SLURM_POOL, "policy.yml")
    dumped = policy.model_dump(mode="json", exclude_unset=True)
    assert set(dumped["pools"]["cluster"]) == {"executor", "hosts", "slurm"}
    assert dumped["pools"]["cluster"]["slurm"]["partition"] == "gpu"
    assert "slurm" not in dumped["pools"]["boxes"]
    assert PolicyConfig.model_validate(dumped) == policy
