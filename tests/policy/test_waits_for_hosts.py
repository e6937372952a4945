"""A job whose only hosts are down, draining or not yet seen waits for them: "no host can ever
fit this job" is said only when no registered host could ever fit it."""

from __future__ import annotations

from dataclasses import replace

from scheduler.policy.plan import WaitCode
from scheduler.policy.scheduler import schedule
from scheduler.policy.snapshot import Host
from tests.policy.builders import host, job, snapshot


def test_a_job_whose_only_host_is_down_waits_for_it_and_names_it() -> None:
    t4 = host("t4-box", "T4-16GB", 2)
    a100 = replace(host("a100-box", "A100-80GB", 4, schedulable=False), out="down")
    plan = schedule(snapshot([t4, a100], [job(1, gpus=2, mem=40)]), explain=True)
    wait = plan.waits[1]
    assert wait.code is WaitCode.WAITING_FOR_HOSTS
    assert wait.hosts == (("a100-box", "down"),)
    assert wait.eta is None


def test_draining_and_unseen_hosts_are_named_with_their_state() -> None:
    t4 = host("t4-box", "T4-16GB", 1)
    draining = replace(host("a100-box", "A100-80GB", 4, schedulable=False), out="draining")
    unseen = Host("new-box", ())  # added, not yet polled: its cards are not known
    plan = schedule(snapshot([t4, draining, unseen], [job(1, mem=40)]), explain=True)
    assert plan.waits[1].code is WaitCode.WAITING_FOR_HOSTS
    assert plan.waits[1].hosts == (("a100-box", "draining"), ("new-box", "unseen"))


def test_never_fits_is_kept_for_jobs_no_registered_host_could_fit() -> None:
    # The down host is too small for 8 GPUs, and the A100s on it are all there is.
    t4 = host("t4-box", "T4-16GB", 2)
    a100 = replace(host("a100-box", "A100-80GB", 4, schedulable=False), out="down")
    plan = schedule(snapshot([t4, a100], [job(1, gpus=8, mem=40)]), explain=True)
    assert plan.waits[1].code is WaitCode.NEVER_FITS and plan.waits[1].hosts == ()
    # A host that is up but holds only the wrong type is no reason to wait either.
    plan = schedule(snapshot([t4], [job(1, mem=40)]), explain=True)
    assert plan.waits[1].code is WaitCode.NEVER_FITS


def test_a_job_waiting_for_hosts_blocks_nobody() -> None:
    t4 = host("t4-box", "T4-16GB", 1)
    a100 = replace(host("a100-box", "A100-80GB", 4, schedulable=False), out="down")
    plan = schedule(snapshot([t4, a100], [job(1, mem=40, waited_h=5), job(2)]), explain=True)
    assert [start.job_id for start in plan.starts] == [2]
