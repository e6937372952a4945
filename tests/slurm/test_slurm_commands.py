"""Slurm's clients against the real one-node Slurm: submit, read the queue and the nodes,
signal, cancel, read the accounting; and each kind of failure with its code and words."""

from __future__ import annotations

import pwd
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import LiveSlurm, wait_for

from scheduler.slurm.batch import BatchJob
from scheduler.slurm.commands import SlurmCommands
from scheduler.slurm.errors import SlurmError, SlurmProblem

TRAP_TERM = 'trap "echo got TERM; exit 7" TERM\nwhile true; do sleep 0.1; done'


@pytest.fixture
def slurm(live_slurm: LiveSlurm) -> SlurmCommands:
    return SlurmCommands(live_slurm.conf)


def _job(prefix: str, folder: Path, command: str, **changes: object) -> BatchJob:
    fields: dict[str, object] = {
        "name": f"{prefix}1.1",
        "comment": "paika job=1 attempt=1",
        "partition": "debug",
        "node": "localhost",
        "gres": "gpu:t4:1",
        "time_minutes": 5,
        "output": str(folder / "1.1.out"),
        "uid": "nobody",
        "gid": pwd.getpwnam("nobody").pw_gid,
        "command": command,
        "env": {"PAIKA_JOB_ID": "1", "ODD": "it's $HOME"},
    }
    return BatchJob(**{**fields, **changes})  # type: ignore[arg-type]


def test_a_submitted_job_runs_as_its_account_on_its_gpus(
    slurm: SlurmCommands, slurm_prefix: str, shared_dir: Path
) -> None:
    job = _job(
        slurm_prefix, shared_dir, 'echo "$(id -un) $CUDA_VISIBLE_DEVICES $PAIKA_JOB_ID $ODD"'
    )
    job_id = slurm.submit(job)
    log = Path(job.output)
    said = wait_for(lambda: log.exists() and log.read_text(), what="the job's output")
    assert said == "nobody 2 1 it's $HOME\n"  # the first t4; the value exactly as given
    assert slurm.ids_named(job.name) == (job_id,)
    ended = wait_for(
        lambda: next((j for j in slurm.queue() if j.job_id == job_id and j.ended), None),
        what="the job to end",
    )
    assert (ended.name, ended.comment, ended.user_name) == (job.name, job.comment, "nobody")
    assert (ended.job_state, ended.exit_status, ended.time_limit) == ("COMPLETED", 0, 5)


def test_the_scheduler_environment_does_not_reach_the_job(
    slurm: SlurmCommands, slurm_prefix: str, shared_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-secret")
    job = _job(slurm_prefix, shared_dir, 'echo "token=${SLACK_BOT_TOKEN:-none}"')
    slurm.submit(job)
    log = Path(job.output)
    assert wait_for(lambda: log.exists() and log.read_text()) == "token=none\n"


def test_term_reaches_the_batch_shell_then_cancel_ends_it(
    slurm: SlurmCommands, slurm_prefix: str, shared_dir: Path
) -> None:
    job = _job(slurm_prefix, shared_dir, f"echo started\n{TRAP_TERM}")
    job_id = slurm.submit(job)
    log = Path(job.output)
    wait_for(lambda: log.exists() and "started" in log.read_text(), what="the job to start")
    slurm.signal(job.name, "TERM")
    wait_for(lambda: "got TERM" in log.read_text(), what="the TERM")
    ended = wait_for(
        lambda: next((j for j in slurm.queue() if j.job_id == job_id and j.ended), None)
    )
    assert ended.exit_status == 7  # its own exit, after its own cleanup
    slurm.cancel(job.name)  # a job that already ended: nothing to do, no error


def test_cancel_ends_a_job_that_ignores_term(
    slurm: SlurmCommands, slurm_prefix: str, shared_dir: Path
) -> None:
    job = _job(
        slurm_prefix, shared_dir, "trap '' TERM\necho started\nwhile true; do sleep 0.1; done"
    )
    job_id = slurm.submit(job)
    log = Path(job.output)
    wait_for(lambda: log.exists() and "started" in log.read_text(), what="the job to start")
    slurm.cancel(job.name)
    ended = wait_for(
        lambda: next((j for j in slurm.queue() if j.job_id == job_id and j.ended), None),
        what="the job to be killed",
    )
    assert ended.job_state == "CANCELLED"


def test_the_node_with_its_gpus(slurm: SlurmCommands) -> None:
    (node,) = [n for n in slurm.nodes() if n.name == "localhost"]
    # tests/slurm/one-node.sh cuts each card into 8 shards (none with SHARDS_PER_GPU=0).
    assert node.gres in ("gpu:a100:2,gpu:t4:2", "gpu:a100:2,gpu:t4:2,shard:a100:16,shard:t4:16")
    assert "debug" in node.partitions


def test_accounting_records_the_gpus_and_time(
    slurm: SlurmCommands, slurm_prefix: str, shared_dir: Path
) -> None:
    job = _job(slurm_prefix, shared_dir, "sleep 1", gres="gpu:a100:2")
    job_id = slurm.submit(job)

    def recorded() -> object:
        return next(
            (
                j
                for j in slurm.accounting([job_id])
                if j.time.end and j.state.current == "COMPLETED"
            ),
            None,
        )

    accounted = wait_for(recorded, timeout=60, what="slurmdbd to record the job")
    assert accounted.comment.job == job.comment  # type: ignore[attr-defined]
    assert accounted.gpus() == 2 and accounted.time.elapsed >= 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("change", "code", "words"),
    [
        ({"partition": "nope"}, SlurmProblem.INVALID_PARTITION, "Invalid partition name specified"),
        ({"gres": "gpu:h100:1"}, SlurmProblem.INVALID_GRES, "Requested node configuration is not available"),
        ({"gres": "fpga:1"}, SlurmProblem.INVALID_GRES, "Invalid generic resource"),
        ({"uid": "no-such-user"}, SlurmProblem.UNKNOWN_USER, "Invalid --uid"),
    ],
)  # fmt: skip
def test_a_refused_submission_has_its_code_and_slurms_words(
    slurm: SlurmCommands,
    slurm_prefix: str,
    shared_dir: Path,
    change: dict[str, object],
    code: SlurmProblem,
    words: str,
) -> None:
    with pytest.raises(SlurmError) as caught:
        slurm.submit(_job(slurm_prefix, shared_dir, "true", **change))
    assert caught.value.code is code and words in caught.value.stderr
    assert caught.value.command[0] == "sbatch"
    assert slurm.ids_named(f"{slurm_prefix}1.1") == ()  # no run to take for a started one


@pytest.fixture
def controller_away(live_slurm: LiveSlurm, tmp_path: Path) -> Iterator[SlurmCommands]:
    """The same cluster's config pointing at a port nothing listens on (a controller down),
    with a short message timeout so the clients give up quickly."""
    conf = Path(live_slurm.conf).read_text()
    conf = re.sub(r"(?m)^SlurmctldPort=.*$", "SlurmctldPort=6999", conf) + "MessageTimeout=2\n"
    (tmp_path / "slurm.conf").write_text(conf)
    shutil.copy(Path(live_slurm.conf).with_name("gres.conf"), tmp_path / "gres.conf")
    yield SlurmCommands(str(tmp_path / "slurm.conf"))


@pytest.mark.parametrize("call", ["submit", "queue", "nodes"])
def test_a_controller_away_is_told_as_such(
    controller_away: SlurmCommands, slurm_prefix: str, shared_dir: Path, call: str
) -> None:
    with pytest.raises(SlurmError) as caught:
        if call == "submit":
            controller_away.submit(_job(slurm_prefix, shared_dir, "true"))
        else:
            getattr(controller_away, call)()
    assert caught.value.code is SlurmProblem.UNREACHABLE, caught.value


def test_no_answer_in_time_is_timed_out(
    live_slurm: LiveSlurm, controller_away: SlurmCommands
) -> None:
    slow = SlurmCommands(controller_away.conf, timeout=0.5)
    with pytest.raises(SlurmError) as caught:
        slow.queue()
    assert caught.value.code is SlurmProblem.TIMED_OUT


def test_a_job_cancelled_while_pending_never_ran_and_a_running_one_is_left_alone(
    slurm: SlurmCommands, slurm_prefix: str, shared_dir: Path
) -> None:
    holds = slurm.submit(_job(slurm_prefix, shared_dir, "sleep 300", name=f"{slurm_prefix}holds",
                              gres="gpu:t4:2"))  # fmt: skip
    wait_for(lambda: _state(slurm, holds) == "RUNNING", what="the first job to run")
    waits = slurm.submit(_job(slurm_prefix, shared_dir, "true", name=f"{slurm_prefix}waits"))
    wait_for(lambda: _reason(slurm, waits) == "Resources", what="Slurm to say why it pends")

    slurm.cancel_pending(holds)  # it runs: left alone
    slurm.cancel_pending(waits)
    gone = wait_for(
        lambda: next((j for j in slurm.queue() if j.job_id == waits and j.ended), None),
        what="the pending job to end",
    )
    # As Slurm 22.05 shows a job cancelled while PENDING: no node, its reason kept.
    assert (gone.job_state, gone.nodes, gone.state_reason) == ("CANCELLED", "", "Resources")
    assert gone.never_ran and gone.start_time == gone.end_time
    assert _state(slurm, holds) == "RUNNING"
    record = wait_for(
        lambda: [r for r in slurm.ended_runs([f"{slurm_prefix}waits"]) if r.ended],
        what="slurmdbd to record it",
    )[0]
    assert (record.state, record.nodes, record.elapsed_seconds) == ("CANCELLED", "None assigned", 0)
    assert record.never_ran and record.submitted and record.ended_at
    assert record.submitted <= record.ended_at


def _state(slurm: SlurmCommands, job_id: int) -> str:
    return next((j.job_state for j in slurm.queue() if j.job_id == job_id), "")


def _reason(slurm: SlurmCommands, job_id: int) -> str:
    return next((j.state_reason for j in slurm.queue() if j.job_id == job_id), "")
