"""Container images on a Slurm pool, the site's way: the pool's `slurm.container` names the
sbatch option that runs an image (pyxis's --container-image, Slurm's own --container), and
each image run's sbatch arguments carry it. A pool without it refuses image jobs, saying
which setting is missing.

This Slurm (tests/slurm/one-node.sh, 22.05) has neither pyxis nor an oci.conf: sbatch takes
`--container` and slurmctld records it, but with no oci.conf slurmd runs the batch script
without any container (its log says "No oci.conf file"); pyxis's --container-image is an
option this sbatch does not know. The tests assert exactly that much of the cluster."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import LiveSlurm, wait_for
from test_slurm_cycle import NODE, SQLITE, SlurmSite, open_site, slurm_policy, submit

from bot.notice_words import event_sentence
from scheduler.app import Paika
from scheduler.config import SBATCH_OWN_OPTIONS, PolicyConfig, SlurmContainer, SlurmPool
from scheduler.dispatch import DispatchError, StartOrder
from scheduler.notices.events import EventCode
from scheduler.slurm.batch import BatchJob
from scheduler.slurm.dispatcher import SlurmDispatcher
from scheduler.slurm.models import QueuedJob
from storage.models import JobState

OCI = {"option": "--container", "value": "/srv/oci/{image}"}
PYXIS = {
    "option": "--container-image",
    "value": "{enroot_image}",
    "options": ["--container-mounts=/data:/data:ro", "--no-container-mount-home"],
}


def _pool(prefix: str, folder: Path, conf: str | None = None, **container: object) -> SlurmPool:
    return SlurmPool(
        partition="debug",
        gres={"T4-16GB": "t4"},
        log_path=str(folder / "{job_id}.{attempt}.out"),
        job_name_prefix=prefix,
        conf=conf,
        container=SlurmContainer.model_validate(container) if container else None,
    )


def _order(**changes: object) -> StartOrder:
    fields: dict[str, object] = {
        "job_id": 12,
        "attempt": 2,
        "host": "localhost",
        "url": "",
        "gpu_indices": (2,),
        "command": 'echo "job=$PAIKA_JOB_ID.$PAIKA_ATTEMPT name=$PAIKA_JOB_NAME"',
        "env": {"PAIKA_JOB_NAME": "bert"},
        "account": "nobody",
        "gpu_type": "T4-16GB",
        "wall_hours": 0.5,
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    }
    return StartOrder(**{**fields, **changes})  # type: ignore[arg-type]


# --- the argument list (no Slurm needed) ---


def test_paikas_own_options_are_all_known_to_the_container_check() -> None:
    job = BatchJob(
        name="n", comment="c", partition="p", node="h", gres="gpu:t4:1", time_minutes=1,
        output="/o", uid="nobody", gid=1, command="true", workdir="/w",
    )  # fmt: skip
    named = {arg[2:].split("=")[0] for arg in job.arguments()[1:]}
    assert named == SBATCH_OWN_OPTIONS  # a new option of paika's is also refused as a container's


def test_an_image_run_carries_the_pools_container_options_before_paikas_own(
    tmp_path: Path,
) -> None:
    batch = SlurmDispatcher(_pool("p-", tmp_path, **PYXIS))._batch(_order())
    args = batch.arguments()
    assert args[:5] == [
        "sbatch",
        "--parsable",
        "--container-image=nvcr.io#nvidia/pytorch:24.05-py3",  # enroot's registry form
        "--container-mounts=/data:/data:ro",
        "--no-container-mount-home",
    ]
    # paika's placement comes after: where sbatch takes an option's last value, paika's wins.
    assert args[5] == "--export=NONE" and "--nodelist=localhost" in args[5:]
    assert "--uid=nobody" in args and "--gres=gpu:t4:1" in args
    script = batch.script()
    assert "export PAIKA_JOB_ID=12\n" in script and "export PAIKA_ATTEMPT=2\n" in script
    assert "export PAIKA_JOB_NAME=bert\n" in script


@pytest.mark.parametrize(
    ("value", "image", "given"),
    [
        ("{image}", "pytorch:2.3", "pytorch:2.3"),
        ("{enroot_image}", "pytorch:2.3", "pytorch:2.3"),  # Docker Hub: no registry part
        ("{enroot_image}", "library/ubuntu:22.04", "library/ubuntu:22.04"),
        ("{enroot_image}", "localhost:5000/team/x:1", "localhost:5000#team/x:1"),
        ("{enroot_image}", "localhost/x", "localhost#x"),
        ("/images/{image}.sqsh", "team/x:1", "/images/team/x:1.sqsh"),
    ],
)
def test_the_value_is_made_from_the_image(value: str, image: str, given: str) -> None:
    container = SlurmContainer(option="--container-image", value=value)
    assert container.arguments(image) == (f"--container-image={given}",)


def test_a_job_without_an_image_gets_no_container_options(tmp_path: Path) -> None:
    args = SlurmDispatcher(_pool("p-", tmp_path, **PYXIS))._batch(_order(image=None)).arguments()
    assert not [a for a in args if "container" in a]


@pytest.mark.parametrize("image", ["team/../../etc", "-rm", "a b", "x;y", "nvcr.io#nvidia/x"])
def test_an_image_paika_would_not_pass_on_is_the_jobs_own_refusal(
    tmp_path: Path, image: str
) -> None:
    with pytest.raises(DispatchError) as caught:
        SlurmDispatcher(_pool("p-", tmp_path, **OCI)).start(_order(image=image))
    assert (caught.value.code, caught.value.bad_order, caught.value.reached) == (
        "bad_image",
        True,
        False,
    )


# --- the real Slurm ---


def _run(dispatcher: SlurmDispatcher, name: str) -> QueuedJob | None:
    return next((job for job in dispatcher.commands.queue() if job.name == name), None)


def _scontrol_job(live_slurm: LiveSlurm, slurm_id: int) -> str:
    return subprocess.run(
        ["scontrol", "show", "job", str(slurm_id)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "SLURM_CONF": live_slurm.conf},
        check=True,
    ).stdout


def test_slurm_takes_and_records_the_oci_bundle_of_an_image_run(
    live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path
) -> None:
    dispatcher = SlurmDispatcher(_pool(slurm_prefix, shared_dir, live_slurm.conf, **OCI))
    dispatcher.start(_order(image="pytorch:2.3"))
    run = wait_for(lambda: _run(dispatcher, f"{slurm_prefix}12.2.localhost"), what="the run")
    assert run.container == "/srv/oci/pytorch:2.3"  # squeue --json's own field
    assert "Container=/srv/oci/pytorch:2.3" in _scontrol_job(live_slurm, run.job_id)
    # Without an oci.conf this slurmd runs the script with no container: the run's own
    # environment still reached it. (A node with an OCI runtime would run it in the bundle.)
    log = shared_dir / "12.2.out"
    said = wait_for(lambda: log.exists() and log.read_text(), what="the run's output")
    assert said == "job=12.2 name=bert\n"


def test_a_container_option_this_sbatch_lacks_is_the_pools_fault_and_starts_nothing(
    live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path
) -> None:
    dispatcher = SlurmDispatcher(_pool(slurm_prefix, shared_dir, live_slurm.conf, **PYXIS))
    with pytest.raises(DispatchError) as caught:
        dispatcher.start(_order())  # no pyxis here: sbatch knows no --container-image
    error = caught.value
    assert error.code == "unknown_option" and "unrecognized option" in error.problem
    assert error.known and not error.bad_order and not error.reached  # queued again
    assert dispatcher.commands.ids_named(f"{slurm_prefix}12.2.localhost") == ()


def test_a_pool_without_the_setting_refuses_an_image_and_names_the_setting(
    live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path
) -> None:
    dispatcher = SlurmDispatcher(_pool(slurm_prefix, shared_dir, live_slurm.conf))
    with pytest.raises(DispatchError) as caught:
        dispatcher.start(_order())
    error = caught.value
    assert (error.code, error.bad_order, error.reached) == ("image_unsupported", True, False)
    assert "slurm.container" in error.problem
    assert dispatcher.commands.ids_named(f"{slurm_prefix}12.2.localhost") == ()


def test_an_image_run_with_the_controller_away_surely_started_nothing(
    live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path, tmp_path: Path
) -> None:
    conf = Path(live_slurm.conf).read_text()
    conf = re.sub(r"(?m)^SlurmctldPort=.*$", "SlurmctldPort=6999", conf) + "MessageTimeout=2\n"
    (tmp_path / "slurm.conf").write_text(conf)
    shutil.copy(Path(live_slurm.conf).with_name("gres.conf"), tmp_path / "gres.conf")
    away = SlurmDispatcher(_pool(slurm_prefix, shared_dir, str(tmp_path / "slurm.conf"), **OCI))
    with pytest.raises(DispatchError) as caught:
        away.start(_order(image="pytorch:2.3"))
    assert caught.value.code == "slurmctld_unreachable"
    assert caught.value.known and not caught.value.reached  # queued again, the attempt kept
    here = SlurmDispatcher(_pool(slurm_prefix, shared_dir, live_slurm.conf, **OCI))
    assert here.commands.ids_named(f"{slurm_prefix}12.2.localhost") == ()


# --- end to end: /gpu submit image=… through the real cycle ---


OpenSite = Callable[[dict[str, object] | None], SlurmSite]


@pytest.fixture
def open_with(
    paika: Paika, live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path
) -> Iterator[OpenSite]:
    """Opens paika on the Slurm node, its pool's container setting as given (None: unset)."""
    opened: list[SlurmSite] = []

    def open_it(container: dict[str, object] | None) -> SlurmSite:
        policy = slurm_policy(paika, live_slurm, slurm_prefix, shared_dir, {"T4-16GB": "t4"})
        if container is not None:
            raw = policy.model_dump(mode="json", exclude_unset=True)
            raw["pools"]["cluster"]["slurm"]["container"] = container
            policy = PolicyConfig.model_validate(raw)
        opened.append(open_site(paika, policy))
        return opened[-1]

    yield open_it
    for site in opened:
        site.cycle.close()


@SQLITE
def test_an_image_job_runs_on_the_pool_with_its_container_recorded(
    open_with: OpenSite, slurm_prefix: str
) -> None:
    site = open_with(OCI)
    submit(site, "boxed", "true", extra="data=ready image=pytorch:2.3")
    site.until(lambda: site.job("boxed").state == JobState.SUCCEEDED, what="the job to end")
    pool = site.policy.pools["cluster"].options
    assert isinstance(pool, SlurmPool)
    record = _run(SlurmDispatcher(pool), f"{slurm_prefix}{site.job('boxed').id}.1.{NODE}")
    assert record is not None and record.container == "/srv/oci/pytorch:2.3"


@SQLITE
def test_an_image_job_on_a_pool_without_the_setting_fails_saying_what_to_set(
    open_with: OpenSite,
) -> None:
    site = open_with(None)
    submit(site, "boxed", "true", extra="data=ready image=pytorch:2.3")
    site.until(lambda: site.job("boxed").state == JobState.FAILED, what="the refusal")
    (refused,) = [e for e in site.notifier.events if e.code is EventCode.START_REFUSED]
    assert refused.detail["dispatch"] == "image_unsupported"
    english, chinese = event_sentence("en", refused), event_sentence("zh", refused)
    assert "not set up to run container images" in english and "slurm.container" in english
    assert "容器镜像" in chinese and "slurm.container" in chinese
