"""Slurm 22.05's JSON, as captured from the one-node Slurm, read into paika's models; and
its clients' error words into codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.slurm.errors import SlurmProblem, classify
from scheduler.slurm.models import AccountingReply, NodeReply, QueueReply

CAPTURED = Path(__file__).parent / "captured"


def _read(name: str) -> str:
    return (CAPTURED / name).read_text()


def test_squeue_running_failed_and_killed_jobs() -> None:
    jobs = {job.name: job for job in QueueReply.model_validate_json(_read("squeue.json")).jobs}
    running, failed, killed = jobs["paika-41.2"], jobs["paika-40.1"], jobs["paika-39.1"]
    assert running.job_state == "RUNNING" and running.nodes == "localhost"
    assert running.comment == "paika job=41 attempt=2" and running.time_limit == 7
    assert running.gres_detail == ("gpu:t4:2(IDX:2-3)",)
    assert (failed.job_state, failed.exit_status, failed.signal) == ("FAILED", 3, None)
    assert failed.state_reason == "NonZeroExitCode"
    assert (killed.exit_status, killed.signal) == (None, 9)


@pytest.mark.parametrize(
    ("capture", "state", "flags", "reason"),
    [
        ("sinfo-mixed.json", "mixed", (), ""),
        ("sinfo-draining.json", "mixed", ("DRAIN",), "fan broken"),  # jobs still on it
        ("sinfo-drained.json", "idle", ("DRAIN",), "fan broken"),  # 22.05 says idle + DRAIN
    ],
)
def test_sinfo_node_states(capture: str, state: str, flags: tuple[str, ...], reason: str) -> None:
    (node,) = NodeReply.model_validate_json(_read(capture)).nodes
    assert (node.name, node.state, node.state_flags, node.reason) == (
        "localhost",
        state,
        flags,
        reason,
    )
    assert node.gres == "gpu:a100:2,gpu:t4:2" and node.partitions == ("debug",)


def test_sacct_gives_comment_state_and_gpu_hours() -> None:
    jobs = {job.name: job for job in AccountingReply.model_validate_json(_read("sacct.json")).jobs}
    cancelled = jobs["paika-41.2"]
    assert cancelled.comment.job == "paika job=41 attempt=2"
    assert cancelled.state.current == "CANCELLED" and cancelled.gpus() == 2
    assert cancelled.gpu_hours == pytest.approx(2 * cancelled.time.elapsed / 3600)
    assert cancelled.time.elapsed > 0 and cancelled.time.limit == 7
    assert jobs["paika-40.1"].state.current == "FAILED" and jobs["paika-40.1"].gpus() == 1


@pytest.mark.parametrize("capture", ["squeue-unreachable.json", "sinfo-unreachable.json"])
def test_a_controller_away_is_an_error_entry_not_an_empty_cluster(capture: str) -> None:
    model = QueueReply if capture.startswith("squeue") else NodeReply
    reply = model.model_validate_json(_read(capture))
    assert reply.errors  # exit 0 and no jobs or nodes: only this tells it from an empty cluster


@pytest.mark.parametrize(
    ("stderr", "code"),
    [
        ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)", SlurmProblem.UNREACHABLE),
        ("slurm_load_jobs error: Unable to contact slurm controller (connect failure)", SlurmProblem.UNREACHABLE),
        ("sbatch: error: invalid partition specified: nope\nsbatch: error: Batch job submission failed: Invalid partition name specified", SlurmProblem.INVALID_PARTITION),
        ("sbatch: error: Invalid generic resource (gres) specification", SlurmProblem.INVALID_GRES),
        ("sbatch: error: Batch job submission failed: Requested node configuration is not available", SlurmProblem.INVALID_GRES),
        ("sbatch: error: Invalid --uid specification", SlurmProblem.UNKNOWN_USER),
        ("sbatch: error: --uid only permitted by root user", SlurmProblem.OTHER),
        ("Unknown job signal: BOGUS", SlurmProblem.OTHER),
    ],
)  # fmt: skip
def test_error_words_become_codes(stderr: str, code: SlurmProblem) -> None:
    assert classify(stderr) is code
