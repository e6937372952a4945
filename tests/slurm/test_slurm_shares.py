"""A Slurm pool whose nodes share cards through the site's own sharing GRES (`slurm.shares`):
the policy is told its nodes share, a run on a shared card asks sbatch for its part of one
card in shards (or MPS units) instead of a whole GPU, and the nodes' shards are read as parts
of their cards, never as cards. Against the real one-node Slurm (tests/slurm/one-node.sh
declares 8 shards per card), two share runs land on one card and a whole-card run keeps off it,
and a share=yes job goes through the real cycle to shards of one card, told its memory.

The reconcile cases read JSON captured from that Slurm (tests/slurm/captured/*-shards.json):
runs 31.1 and 32.1 (prefix "p-") hold 2 shards each of t4 card 2, and another Slurm job
holds 3 shards of a100 card 0."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from conftest import LiveSlurm, wait_for
from paika_test_servers import servers_required
from test_slurm_cycle import NODE, SQLITE, open_site, slurm_jobs, slurm_policy

from scheduler.app import Paika
from scheduler.config import SlurmPool, SlurmShares, load_policy, policy_from_text
from scheduler.dispatch import CardShare, DispatchError, StartOrder
from scheduler.errors import ConfigError
from scheduler.hosts.poll import Target
from scheduler.hosts.report import HostReport
from scheduler.settings import BUNDLED_POLICY
from scheduler.slurm.commands import SlurmCommands
from scheduler.slurm.dispatcher import SlurmDispatcher, share_units
from scheduler.slurm.executor import SlurmExecutor
from scheduler.slurm.models import NodeReply, QueuedJob, QueueReply
from scheduler.slurm.reconcile import (
    SlurmPoller,
    node_cards,
    node_report,
    shared_indices,
    used_indices,
)
from scheduler.snapshots import _sharing
from storage.models import JobState

CAPTURED = Path(__file__).parent / "captured"
CATALOG = """
gpu_types:
  T4-16GB: {memory_gib: 16, price_per_gpu_hour: 0.35}
  A100-80GB: {memory_gib: 80, price_per_gpu_hour: 2.2}
"""
POOLS = """
pools:
  cluster:
    executor: slurm
    hosts: [node01]
    slurm:
      partition: gpu
      gres: {A100-80GB: a100, T4-16GB: t4}
      log_path: /shared/paika/{job_id}.{attempt}.out
      shares: {mode: shard, per_gpu: 8}
  boxes:
    hosts: [box1, box2]
sharing:
  hosts: {box1: mps}
"""
MEMORY = {"T4-16GB": 16.0, "A100-80GB": 80.0}


def _pool(**changes: object) -> SlurmPool:
    fields: dict[str, object] = {
        "partition": "debug",
        "gres": {"T4-16GB": "t4", "A100-80GB": "a100"},
        "log_path": "/logs/{job_id}.{attempt}.out",
        "job_name_prefix": "p-",
        "shares": SlurmShares(mode="shard", per_gpu=8),
    }
    return SlurmPool.model_validate({**fields, **changes})


def _order(**changes: object) -> StartOrder:
    fields: dict[str, object] = {
        "job_id": 31,
        "attempt": 1,
        "host": "localhost",
        "url": "",
        "gpu_indices": (2,),
        "command": 'echo "gpus=$CUDA_VISIBLE_DEVICES shards=$SLURM_SHARDS_ON_NODE"; sleep 60',
        "env": {"PAIKA_JOB_NAME": "eval"},
        "account": "nobody",
        "gpu_type": "T4-16GB",
        "wall_hours": 0.5,
        "share": CardShare("advisory", 4096),
    }
    return StartOrder(**{**fields, **changes})  # type: ignore[arg-type]


# --- the pool's setting ---


def test_a_pools_shares_are_read_and_none_by_default() -> None:
    policy = policy_from_text(CATALOG + POOLS, "policy.yml")
    options = policy.pools["cluster"].options
    assert isinstance(options, SlurmPool) and options.shares is not None
    assert (options.shares.mode, options.shares.per_gpu, options.shares.typed) == (
        "shard",
        8,
        True,
    )
    plain = policy_from_text(CATALOG + POOLS.replace("shares:", "#"), "policy.yml")
    assert isinstance(plain.pools["cluster"].options, SlurmPool)
    assert plain.pools["cluster"].options.shares is None  # the pool shares no card


@pytest.mark.parametrize(
    ("shares", "key", "problem"),
    [
        ("{mode: shard, per_gpu: 1}", "pools.cluster.slurm.shares.per_gpu", "1 is out of bounds: a whole number of shards (or MPS units) per card from 2 to 1000"),
        ("{mode: mps, per_gpu: 0}", "pools.cluster.slurm.shares.per_gpu", "0 is out of bounds"),
        ("{mode: mps, per_gpu: 1001}", "pools.cluster.slurm.shares.per_gpu", "1001 is out of bounds"),
        ("{mode: shard, per_gpu: 2.5}", "pools.cluster.slurm.shares.per_gpu", "2.5 is out of bounds"),
        ("{mode: shard, per_gpu: yes}", "pools.cluster.slurm.shares.per_gpu", "True is out of bounds"),
        ("{mode: mig, per_gpu: 8}", "pools.cluster.slurm.shares.mode", "unknown mode 'mig': shard (Slurm's gres/shard) or mps (Slurm's gres/mps)"),
        ("{per_gpu: 8}", "pools.cluster.slurm.shares.mode", "required key is missing"),
        ("{mode: shard}", "pools.cluster.slurm.shares.per_gpu", "required key is missing"),
        ("{mode: shard, per_gpu: 8, count: 8}", "pools.cluster.slurm.shares.count", "unknown key"),
    ],
)  # fmt: skip
def test_bad_shares_name_their_key_and_what_is_allowed(shares: str, key: str, problem: str) -> None:
    text = CATALOG + POOLS.replace("{mode: shard, per_gpu: 8}", shares)
    with pytest.raises(ConfigError) as caught:
        policy_from_text(text, "policy.yml")
    assert caught.value.key == key, caught.value
    assert problem in caught.value.problem, caught.value.problem


def test_a_slurm_node_shares_only_where_its_pool_declares_shares() -> None:
    policy = policy_from_text(CATALOG + POOLS, "policy.yml")
    assert _sharing(policy, "node01") == "slurm-shard"
    mps = policy_from_text(CATALOG + POOLS.replace("mode: shard", "mode: mps"), "policy.yml")
    assert _sharing(mps, "node01") == "slurm-mps"
    none = policy_from_text(CATALOG + POOLS.replace("shares:", "#"), "policy.yml")
    assert _sharing(none, "node01") == ""
    # The agents' hosts go by the policy's own `sharing` section, as before.
    assert (_sharing(policy, "box1"), _sharing(policy, "box2")) == ("mps", "")
    assert _sharing(policy, "elsewhere") == ""


# --- the sbatch arguments ---


@pytest.mark.parametrize(
    ("memory_mib", "card_gib", "per_gpu", "units"),
    [
        (4096, 16, 8, 2),  # a quarter of a T4 in eighths
        (20480, 80, 8, 2),  # exactly two eighths: not three
        (20481, 80, 8, 3),  # a MiB more: rounded up
        (1, 80, 8, 1),  # never under one
        (200_000, 80, 8, 8),  # never over the whole card
        (20480, 80, 100, 25),  # MPS's percent
        (24576, 80, 100, 30),
        (1000, 16, 100, 7),  # 6.1 %: rounded up
    ],
)
def test_a_shares_part_of_the_card_is_its_memory_in_the_pools_units(
    memory_mib: int, card_gib: float, per_gpu: int, units: int
) -> None:
    assert share_units(memory_mib, card_gib, per_gpu) == units


def test_a_whole_card_order_asks_for_whole_gpus_as_before() -> None:
    order = _order(share=None, gpu_indices=(2, 3))
    shared = SlurmDispatcher(_pool(), card_memory_gib=MEMORY)._batch(order)
    plain = SlurmDispatcher(_pool(shares=None))._batch(order)
    assert "--gres=gpu:t4:2" in shared.arguments()
    assert shared.arguments() == plain.arguments() and shared.script() == plain.script()
    assert "PAIKA_GPU_MEMORY_MIB" not in shared.script()


def test_a_share_order_asks_for_its_shards_of_one_card_and_is_told_its_memory() -> None:
    batch = SlurmDispatcher(_pool(), card_memory_gib=MEMORY)._batch(_order())
    args = batch.arguments()
    assert "--gres=shard:t4:2" in args  # 4 GiB of 16, in eighths
    assert not [a for a in args if a.startswith("--gres=gpu")]
    script = batch.script()
    assert "export PAIKA_GPU_MEMORY_MIB=4096\n" in script
    assert "export PAIKA_GPU_SHARE=slurm-shard\n" in script
    assert "CUDA_MPS" not in script  # shards keep nothing apart: the job caps itself


def test_untyped_shards_are_asked_for_without_the_type() -> None:
    pool = _pool(shares=SlurmShares(mode="shard", per_gpu=4, typed=False))
    batch = SlurmDispatcher(pool, card_memory_gib=MEMORY)._batch(_order())
    assert "--gres=shard:1" in batch.arguments()


def test_an_mps_share_asks_for_its_percent_and_its_memory_limit() -> None:
    pool = _pool(shares=SlurmShares(mode="mps", per_gpu=100))
    order = _order(gpu_type="A100-80GB", gpu_indices=(0,), share=CardShare("mps", 20480, 50))
    batch = SlurmDispatcher(pool, card_memory_gib=MEMORY)._batch(order)
    assert "--gres=mps:a100:25" in batch.arguments()
    script = batch.script()
    assert "export CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20480M\n" in script
    assert "export PAIKA_GPU_SHARE=slurm-mps\n" in script
    # Slurm sets the SM share from the MPS units itself: paika's even split is not passed on.
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in script


def test_a_share_on_a_pool_that_shares_nothing_is_the_clusters_matter_and_says_what_to_set() -> (
    None
):
    dispatcher = SlurmDispatcher(_pool(shares=None), card_memory_gib=MEMORY)
    with pytest.raises(DispatchError) as caught:
        dispatcher.start(_order())
    error = caught.value
    assert (error.code, error.bad_order, error.reached) == ("invalid_gres", False, False)
    assert "slurm.shares" in error.problem


def test_a_share_of_a_type_the_catalog_does_not_size_is_refused() -> None:
    dispatcher = SlurmDispatcher(_pool(), card_memory_gib={"A100-80GB": 80.0})
    with pytest.raises(DispatchError) as caught:
        dispatcher.start(_order())
    assert caught.value.code == "invalid_gres" and "'T4-16GB'" in caught.value.problem


class NoAgents:
    def poll(self, targets: Sequence[Target]) -> Mapping[str, HostReport]:
        return {}

    def revoke(self, host: str, url: str, token: str) -> bool:
        return True


def test_the_executor_measures_shares_by_the_catalog_it_follows() -> None:
    policy = policy_from_text(CATALOG + POOLS, "policy.yml")
    pool = policy.pools["cluster"].options
    assert isinstance(pool, SlurmPool)
    executor = SlurmExecutor(pool, NoAgents(), policy)
    assert executor.dispatcher.card_memory_gib == MEMORY
    bigger = policy_from_text(
        CATALOG.replace("memory_gib: 16", "memory_gib: 32") + POOLS, "policy.yml"
    )
    executor.follow(bigger)
    assert executor.dispatcher.card_memory_gib["T4-16GB"] == 32.0
    assert "--gres=shard:t4:1" in executor.dispatcher._batch(_order()).arguments()


# --- reading the nodes ---


@pytest.mark.parametrize(
    ("gres", "cards"),
    [
        (
            "gpu:a100:2,gpu:t4:2,shard:a100:16,shard:t4:16",
            [(0, "a100"), (1, "a100"), (2, "t4"), (3, "t4")],
        ),
        ("shard:8(S:0),gpu:2(S:0)", [(0, "gpu"), (1, "gpu")]),
        ("gpu:t4:1,mps:t4:100", [(0, "t4")]),
        ("shard:16", []),
    ],
)
def test_shards_and_mps_add_no_cards(gres: str, cards: list[tuple[int, str]]) -> None:
    assert [(c.index, c.slurm_type) for c in node_cards(gres)] == cards


@pytest.mark.parametrize(
    ("gres", "whole", "shared"),
    [
        # A node's GresUsed as Slurm 22.05 shows it: the shard count is of cards, not shards.
        ("gpu:a100:0(IDX:N/A),gpu:t4:0(IDX:N/A),shard:a100:2(IDX:0-1),shard:t4:0(IDX:N/A)", set(), {0, 1}),
        ("gpu:a100:1(IDX:1),gpu:t4:0(IDX:N/A),shard:a100:1(IDX:0)", {1}, {0}),
        ("shard:a100:3(IDX:0)", set(), {0}),  # a job's gres_detail: 3 shards of card 0
        ("mps:t4:30(IDX:2)", set(), {2}),
        ("gpu:t4:2(IDX:2-3)", {2, 3}, set()),
        ("shard:8(S:0)", set(), set()),  # no index: nothing held
    ],
)  # fmt: skip
def test_a_shard_is_never_read_as_a_whole_card(
    gres: str, whole: set[int], shared: set[int]
) -> None:
    assert used_indices(gres) == whole
    assert shared_indices(gres) == shared


def _captured_node_and_queue() -> tuple[NodeReply, QueueReply]:
    nodes = NodeReply.model_validate_json((CAPTURED / "sinfo-shards.json").read_text())
    queue = QueueReply.model_validate_json((CAPTURED / "squeue-shards.json").read_text())
    return nodes, queue


def test_two_runs_sharing_a_card_are_both_running_on_it_and_a_foreign_share_takes_its_card() -> (
    None
):
    nodes, queue = _captured_node_and_queue()
    (node,) = nodes.nodes
    policy = load_policy(BUNDLED_POLICY)
    report = node_report(policy, _pool(), "localhost", node, queue.jobs)
    assert report.ok and report.unhealthy is None
    assert {run: state.state for run, state in report.jobs.items()} == {
        "31.1": "running",
        "32.1": "running",
    }
    cards = {gpu.index: gpu for gpu in report.gpus}
    assert sorted(cards) == [0, 1, 2, 3]  # the 32 shards are no cards
    assert cards[2].holder == "31.1" and not cards[2].taken  # shared by paika's two runs
    assert cards[0].taken and cards[0].holder is None  # another job's shards
    assert not cards[1].taken and not cards[3].taken
    assert [c.gpu_type for c in report.gpus] == ["A100-80GB"] * 2 + ["T4-16GB"] * 2


# --- against the real Slurm ---


def _squeue(live_slurm: LiveSlurm, prefix: str) -> list[QueuedJob]:
    return [j for j in SlurmCommands(live_slurm.conf).queue() if j.name.startswith(prefix)]


def _require_shards(live_slurm: LiveSlurm) -> None:
    """Skip where the running Slurm declares no t4 shards (one started before
    tests/slurm/one-node.sh declared them, or with SHARDS_PER_GPU=0); a failure where the
    servers are required (CI starts it afresh, with its shards)."""
    node = next(iter(SlurmCommands(live_slurm.conf).nodes()))
    if "shard:t4:" not in node.gres:
        problem = f"the test Slurm declares no t4 shards ({node.gres}); restart it"
        if servers_required():
            pytest.fail(problem)
        pytest.skip(problem)


@pytest.fixture
def shard_pool(live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path) -> SlurmPool:
    """The live pool with the shards tests/slurm/one-node.sh declares."""
    _require_shards(live_slurm)
    return _pool(
        log_path=str(shared_dir / "{job_id}.{attempt}.out"),
        job_name_prefix=slurm_prefix,
        conf=live_slurm.conf,
    )


def test_two_share_runs_run_on_one_card_and_a_whole_card_run_keeps_off_it(
    live_slurm: LiveSlurm, shard_pool: SlurmPool, slurm_prefix: str, shared_dir: Path
) -> None:
    dispatcher = SlurmDispatcher(shard_pool, card_memory_gib=MEMORY)
    dispatcher.start(_order(job_id=31))
    dispatcher.start(_order(job_id=32))

    def both_running() -> list[QueuedJob]:
        jobs = [j for j in _squeue(live_slurm, slurm_prefix) if j.job_state == "RUNNING"]
        return jobs if len(jobs) == 2 else []

    first, second = wait_for(both_running, what="both share runs to run")
    assert first.gres_detail == second.gres_detail  # the same card, 2 shards each
    (detail,) = first.gres_detail
    assert detail.startswith("shard:t4:2(IDX:")
    (card,) = shared_indices(detail)
    assert card in (2, 3)  # a t4
    for job_id in (31, 32):
        log = shared_dir / f"{job_id}.1.out"
        said = wait_for(lambda log=log: log.exists() and log.read_text(), what="its output")  # type: ignore[misc]
        assert said == f"gpus={card} shards=2\n"

    # The node read as paika reads it: both runs on, the card shared, no card taken.
    poller = SlurmPoller()
    target = Target("localhost", "", runs=("31.1", "32.1"))
    report = poller(load_policy(BUNDLED_POLICY), shard_pool, [target])["localhost"]
    assert {run: s.state for run, s in report.jobs.items()} == {
        "31.1": "running",
        "32.1": "running",
    }
    cards = {gpu.index: gpu for gpu in report.gpus}
    assert cards[card].holder == "31.1" and not any(g.taken for g in report.gpus)

    # A whole t4 goes to the other t4, never to the card the shares are on.
    dispatcher.start(_order(job_id=33, share=None, command="sleep 60"))
    whole = wait_for(
        lambda: next(
            (
                j
                for j in _squeue(live_slurm, slurm_prefix)
                if j.name.endswith("33.1.localhost") and j.job_state == "RUNNING"
            ),
            None,
        ),
        what="the whole-card run to run",
    )
    assert whole is not None
    assert used_indices(",".join(whole.gres_detail)) == {5 - card}


@SQLITE
def test_a_share_job_runs_through_the_cycle_on_shards_of_one_card_told_its_memory(
    paika: Paika, live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path
) -> None:
    _require_shards(live_slurm)
    gres = {"T4-16GB": "t4", "A100-80GB": "a100"}
    policy = slurm_policy(paika, live_slurm, slurm_prefix, shared_dir, gres)
    cluster = policy.pools["cluster"]
    assert isinstance(cluster.options, SlurmPool)
    options = cluster.options.model_copy(update={"shares": SlurmShares(mode="shard", per_gpu=8)})
    policy = policy.model_copy(
        update={"pools": {"cluster": cluster.model_copy(update={"options": options})}}
    )
    site = open_site(paika, policy)
    try:
        told = shared_dir / "told"
        site.ok(
            "submit name=evals gpus=1 hours=1 priority=normal type=T4-16GB mem=4GB share=yes"
            ' data=ready cmd="echo gpus=$CUDA_VISIBLE_DEVICES mem=$PAIKA_GPU_MEMORY_MIB'
            f' shards=$SLURM_SHARDS_ON_NODE > {told}"'
        )
        site.until(lambda: site.job("evals").state == JobState.SUCCEEDED, what="the job to end")
        card = told.read_text().split()[0]
        assert card in ("gpus=2", "gpus=3")  # a t4
        assert told.read_text() == f"{card} mem=4096 shards=2\n"  # 4 GB of 16, in eighths
        ((_, name, state),) = slurm_jobs(live_slurm, slurm_prefix)
        assert (name, state) == (f"{slurm_prefix}{site.job('evals').id}.1.{NODE}", "COMPLETED")
    finally:
        site.cycle.close()
