"""The Slurm executor against the real one-node Slurm: a run starts exactly where paika put
it, as its owner's account, once; a stop gives it its grace; refusals carry their codes."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import LiveSlurm, wait_for

from scheduler.config import SlurmPool
from scheduler.dispatch import DispatchError, StartOrder
from scheduler.slurm.commands import SlurmCommands
from scheduler.slurm.dispatcher import SlurmDispatcher, path_name
from scheduler.slurm.models import QueuedJob

KEEPS_RUNNING = 'trap "echo got TERM" TERM\necho started\nwhile true; do sleep 0.1; done'


class Ticks:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def pool(live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path) -> SlurmPool:
    return SlurmPool(
        partition="debug",
        gres={"T4-16GB": "t4", "A100-80GB": "a100"},
        time_margin=1.5,
        log_path=str(shared_dir / "{job_id}.{attempt}-{name}.out"),
        job_name_prefix=slurm_prefix,
        conf=live_slurm.conf,
    )


def _order(**changes: object) -> StartOrder:
    fields: dict[str, object] = {
        "job_id": 12,
        "attempt": 2,
        "host": "localhost",
        "url": "",
        "gpu_indices": (2, 3),
        "command": 'echo "$(id -un) gpus=$CUDA_VISIBLE_DEVICES job=$PAIKA_JOB_ID.$PAIKA_ATTEMPT"',
        "env": {"PAIKA_JOB_NAME": "bert/base"},
        "account": "nobody",
        "gpu_type": "T4-16GB",
        "wall_hours": 0.5,
    }
    return StartOrder(**{**fields, **changes})  # type: ignore[arg-type]


def _run(slurm: SlurmCommands, name: str) -> QueuedJob | None:
    return next((job for job in slurm.queue() if job.name == name), None)


def test_a_run_starts_on_the_chosen_node_type_and_count_as_its_owner(
    pool: SlurmPool, shared_dir: Path
) -> None:
    dispatcher = SlurmDispatcher(pool)
    dispatcher.start(_order())
    log = shared_dir / "12.2-bert_base.out"  # the policy's log path, the name made safe
    said = wait_for(lambda: log.exists() and log.read_text(), what="the run's output")
    assert said == "nobody gpus=2,3 job=12.2\n"  # the node's two t4 GPUs
    run = wait_for(lambda: _run(dispatcher.commands, f"{pool.job_name_prefix}12.2.localhost"))
    assert run.comment == "paika job=12 attempt=2" and run.nodes == "localhost"
    assert run.user_name == "nobody" and run.time_limit == 45  # 0.5 h × 1.5
    assert run.gres_detail in ((), ("gpu:t4:2(IDX:2-3)",))  # () once it ended


def test_a_job_named_in_chinese_logs_to_an_ascii_file_of_its_own(
    pool: SlurmPool, shared_dir: Path
) -> None:
    dispatcher = SlurmDispatcher(pool)
    dispatcher.start(_order(job_id=13, env={"PAIKA_JOB_NAME": "医疗对话-sft"}))
    log = shared_dir / "13.2-xn---sft-up0g467buv7bmizb.out"  # IDNA's ASCII for the name
    said = wait_for(lambda: log.exists() and log.read_text(), what="the run's output")
    assert said == "nobody gpus=2,3 job=13.2\n"
    assert path_name("语音组") != path_name("视觉组")  # as "___" they would share one file
    assert path_name("语音组").isascii() and path_name("bert/base") == "bert_base"


class CountedCommands(SlurmCommands):
    """Slurm's clients, counting the by-name lookups a start makes."""

    def __init__(self, pool: SlurmPool) -> None:
        super().__init__(pool.conf)
        self.lookups = 0

    def ids_named(self, name: str) -> tuple[int, ...]:
        self.lookups += 1
        return super().ids_named(name)


def test_a_start_sent_again_after_the_cycles_read_is_not_a_second_run(pool: SlurmPool) -> None:
    commands = CountedCommands(pool)
    dispatcher = SlurmDispatcher(pool, commands)
    order = _order(command=KEEPS_RUNNING)
    dispatcher.saw(commands.queue())  # the cycle's read, before any start
    dispatcher.start(order)
    dispatcher.start(order)  # sent again in the same cycle: known from this dispatcher
    dispatcher.saw(commands.queue())  # a later cycle's read lists it
    dispatcher.start(order)
    assert commands.lookups == 0  # no squeue of its own
    assert len(SlurmCommands(pool.conf).ids_named(f"{pool.job_name_prefix}12.2.localhost")) == 1


def test_a_start_sent_again_with_no_read_asks_slurm_by_name(pool: SlurmPool) -> None:
    commands = CountedCommands(pool)
    dispatcher = SlurmDispatcher(pool, commands)
    order = _order(command=KEEPS_RUNNING)
    dispatcher.start(order)
    dispatcher.saw(None)  # the next cycle's read failed: nothing to go by
    dispatcher.start(order)  # its answer was lost: the cycle sends the same start again
    assert commands.lookups == 2
    assert len(commands.ids_named(f"{pool.job_name_prefix}12.2.localhost")) == 1


def test_a_submission_slurm_refused_in_the_read_is_no_run(pool: SlurmPool) -> None:
    dispatcher = SlurmDispatcher(pool)
    name = f"{pool.job_name_prefix}12.2.localhost"
    # Four A100s on a node with two: Slurm numbers the job, then fails it (BadConstraints).
    with pytest.raises(DispatchError):
        dispatcher.start(_order(gpu_type="A100-80GB", gpu_indices=(0, 1, 2, 3)))
    refused = wait_for(lambda: _run(dispatcher.commands, name), what="the refused record")
    assert (refused.job_state, refused.state_reason) == ("FAILED", "BadConstraints")
    dispatcher.saw(dispatcher.commands.queue())
    dispatcher.start(_order(command=KEEPS_RUNNING))  # the same run, now one that fits
    assert len(dispatcher.commands.ids_named(name)) == 1


def test_the_time_limit_is_never_below_the_floor(pool: SlurmPool) -> None:
    dispatcher = SlurmDispatcher(pool)
    dispatcher.start(_order(command=KEEPS_RUNNING, wall_hours=0.01, gpu_type="A100-80GB"))
    run = wait_for(lambda: _run(dispatcher.commands, f"{pool.job_name_prefix}12.2.localhost"))
    assert run.time_limit == pool.min_time_minutes


def test_a_stop_sends_term_then_cancels_after_the_grace(pool: SlurmPool, shared_dir: Path) -> None:
    ticks = Ticks()
    dispatcher = SlurmDispatcher(pool, monotonic=ticks)
    dispatcher.start(_order(command=KEEPS_RUNNING))
    log = shared_dir / "12.2-bert_base.out"
    wait_for(lambda: log.exists() and "started" in log.read_text(), what="the run to start")
    name = f"{pool.job_name_prefix}12.2.localhost"
    dispatcher.stop("localhost", "", "12.2", 60)
    wait_for(lambda: "got TERM" in log.read_text(), what="the TERM")
    ticks.now += 59
    dispatcher.stop("localhost", "", "12.2", 60)  # within its grace: left alone
    run = _run(dispatcher.commands, name)
    assert run is not None and run.job_state == "RUNNING" and log.read_text().count("got TERM") == 1
    ticks.now += 1
    dispatcher.stop("localhost", "", "12.2", 60)
    ended = wait_for(
        lambda: (run := _run(dispatcher.commands, name)) and run.ended and run,
        what="the run to be cancelled",
    )
    assert ended.job_state == "CANCELLED"


@pytest.mark.parametrize(
    ("change", "code", "own"),
    [
        ({"account": None}, "unmapped_user", True),
        ({"account": "no-such-user"}, "unknown_user", True),
        ({"image": "pytorch:2.3"}, "image_unsupported", True),
        ({"gpu_type": "H100-80GB"}, "invalid_gres", False),
    ],
)
def test_what_paika_refuses_never_reaches_slurm(
    pool: SlurmPool, change: dict[str, object], code: str, own: bool
) -> None:
    dispatcher = SlurmDispatcher(pool)
    with pytest.raises(DispatchError) as caught:
        dispatcher.start(_order(**change))
    assert (caught.value.code, caught.value.bad_order) == (code, own)
    assert not caught.value.reached and caught.value.known
    assert dispatcher.commands.ids_named(f"{pool.job_name_prefix}12.2.localhost") == ()


def test_a_refused_sbatch_is_a_dispatch_error_with_slurms_words(pool: SlurmPool) -> None:
    dispatcher = SlurmDispatcher(pool.model_copy(update={"partition": "nope"}))
    with pytest.raises(DispatchError) as caught:
        dispatcher.start(_order())
    error = caught.value
    assert error.code == "invalid_partition" and "Invalid partition name" in error.problem
    assert error.known and not error.bad_order  # the pool's setting, not the job's fault


def test_a_controller_away_surely_started_nothing(
    pool: SlurmPool, live_slurm: LiveSlurm, tmp_path: Path
) -> None:
    conf = Path(live_slurm.conf).read_text()
    conf = re.sub(r"(?m)^SlurmctldPort=.*$", "SlurmctldPort=6999", conf) + "MessageTimeout=2\n"
    (tmp_path / "slurm.conf").write_text(conf)
    shutil.copy(Path(live_slurm.conf).with_name("gres.conf"), tmp_path / "gres.conf")
    dispatcher = SlurmDispatcher(pool.model_copy(update={"conf": str(tmp_path / "slurm.conf")}))
    with pytest.raises(DispatchError) as caught:
        dispatcher.start(_order())
    assert caught.value.code == "slurmctld_unreachable"
    assert caught.value.known and not caught.value.reached  # queued again, the attempt kept
