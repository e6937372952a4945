"""A run Slurm does not start when paika sends it, against the real one-node Slurm through
the real cycle: a node in a reservation takes nothing new; a run another Slurm job beat to
its cards (between paika's read and its sbatch) pends, keeps the cards paika booked, and
past the pool's `pending_timeout_seconds` is cancelled and queued again as a new attempt —
only once Slurm shows it ended, never while slurmctld is away; a user's cancel of a pending
run ends it cancelled."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import LiveSlurm, wait_for
from sqlmodel import Session, select
from test_slurm_cycle import (
    NODE,
    SQLITE,
    SlurmSite,
    _slurmctld_pid,
    _start_slurmctld,
    open_site,
    restores_slurmctld,  # noqa: F401 (a fixture)
    slurm_jobs,
    slurm_policy,
)

from bot.notice_words import event_sentence
from scheduler.app import Paika
from scheduler.notices.events import Event, EventCode, EventKind
from scheduler.slurm import dispatcher as slurm_dispatcher
from scheduler.slurm.batch import BatchJob
from scheduler.slurm.commands import SlurmCommands
from scheduler.slurm.reconcile import SlurmPoller
from storage.models import HostState, JobEvent, JobState, LedgerEntry

LIMIT_S = 600  # the pool's default pending_timeout_seconds


def scontrol(live_slurm: LiveSlurm, *args: str, check: bool = True) -> None:
    subprocess.run(
        ["scontrol", *args],
        capture_output=True,
        timeout=30,
        env={**os.environ, "SLURM_CONF": live_slurm.conf},
        check=check,
    )


def node_flags(live_slurm: LiveSlurm) -> tuple[str, ...]:
    (node,) = [n for n in SlurmCommands(live_slurm.conf).nodes() if n.name == NODE]
    return node.state_flags


@pytest.fixture
def reservation(live_slurm: LiveSlurm, slurm_prefix: str) -> Iterator[str]:
    """An active reservation of the node for root only (paika's runs are not in it); its
    name. Deleted afterwards, whatever the test did."""
    name = f"{slurm_prefix}resv"
    scontrol(
        live_slurm, "create", "reservation", f"reservationname={name}", "starttime=now",
        "duration=30", f"nodes={NODE}", "users=root", "flags=ignore_jobs",
    )  # fmt: skip
    try:
        wait_for(lambda: "RESERVED" in node_flags(live_slurm), what="the reservation to begin")
        yield name
    finally:
        scontrol(live_slurm, "delete", f"reservation={name}", check=False)


@SQLITE
def test_a_reserved_node_is_unhealthy_and_takes_nothing_new_until_the_reservation_ends(
    paika: Paika, live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path, reservation: str
) -> None:
    gres = {"T4-16GB": "t4", "A100-80GB": "a100"}
    site = open_site(paika, slurm_policy(paika, live_slurm, slurm_prefix, shared_dir, gres))
    try:
        site.ok(
            'submit name=waits gpus=1 hours=1 priority=normal type=T4-16GB data=ready cmd="true"'
        )
        site.until(
            lambda: "RESERVED" in (site.host().last_error or ""), what="the reservation seen"
        )
        for _ in range(3):
            site.clock.advance(timedelta(seconds=5))
            assert not site.cycle.run_once().errors
        host = site.host()
        assert host.state == HostState.UP  # it answers: only unhealthy
        assert host.last_error == "Slurm node IDLE+RESERVED: in an active Slurm reservation"
        assert not any(g.healthy for g in site.gpus())
        assert site.job("waits").state == JobState.QUEUED
        assert slurm_jobs(live_slurm, slurm_prefix) == []

        scontrol(live_slurm, "delete", f"reservation={reservation}")
        site.until(lambda: site.job("waits").state == JobState.SUCCEEDED, what="the run")
        assert site.host().last_error is None and all(g.healthy for g in site.gpus())
    finally:
        site.cycle.close()


class Wall:
    """The poller's wall clock: Slurm's own, moved on by the test (a run's pending time is
    measured on it against Slurm's submit_time)."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.time() + self.ahead


class Crowded(SlurmCommands):
    """Slurm's own clients, but just before paika's first run of a job is submitted another
    Slurm job (not paika's) takes one t4 card: as one submitted between paika's read of the
    queue and its sbatch. `blocker`: its name (set by the test)."""

    blocker = ""
    crowd = True

    def submit(self, job: BatchJob) -> int:
        if Crowded.crowd and ".1." in job.name:
            Crowded.crowd = False
            other = BatchJob(
                name=Crowded.blocker, comment="", partition=job.partition, node=job.node,
                gres="gpu:t4:1", time_minutes=10, output="/dev/null", uid="nobody",
                gid=65534, command="sleep 600",
            )  # fmt: skip
            blocker = super().submit(other)
            wait_for(lambda: self._state(blocker) == "RUNNING", what="the other job to run")
        return super().submit(job)

    def _state(self, job_id: int) -> str:
        return next((j.job_state for j in self.queue() if j.job_id == job_id), "")


@pytest.fixture
def crowded(
    paika: Paika,
    live_slurm: LiveSlurm,
    slurm_prefix: str,
    shared_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[SlurmSite, Wall]]:
    """paika on the Slurm node whose first run of a job will pend: another job beat it to
    a card; the poller's wall clock."""
    monkeypatch.setattr(slurm_dispatcher, "SlurmCommands", Crowded)
    Crowded.blocker, Crowded.crowd = f"{slurm_prefix}blocker", True
    wall = Wall()
    gres = {"T4-16GB": "t4"}
    policy = slurm_policy(paika, live_slurm, slurm_prefix, shared_dir, gres)
    site = open_site(paika, policy, slurm=SlurmPoller(clock=wall))
    yield site, wall
    site.cycle.close()


def pending_run(site: SlurmSite, live_slurm: LiveSlurm, prefix: str, name: str) -> int:
    """Submit `name` on both t4 cards; once paika started it and Slurm holds it PENDING (one
    card is the other job's), its paika id."""
    site.ok(f'submit name={name} gpus=2 hours=1 priority=normal type=T4-16GB data=ready cmd="true"')
    site.until(lambda: site.job(name).confirmed_at is not None, what="paika to start it")
    job_id = site.job(name).id
    assert job_id is not None
    states = {n: s for _, n, s in slurm_jobs(live_slurm, prefix)}
    assert states == {f"{prefix}blocker": "RUNNING", f"{prefix}{job_id}.1.{NODE}": "PENDING"}
    run = f"{prefix}{job_id}.1.{NODE}"

    def reason() -> str:  # Slurm's scheduler says why at its first look at the job
        said = [j.state_reason for j in SlurmCommands(live_slurm.conf).queue() if j.name == run]
        return said[0] if said and said[0] != "None" else ""

    assert wait_for(reason, what="Slurm's pending reason") == "Resources"
    return job_id


def end_blocker(live_slurm: LiveSlurm, prefix: str) -> None:
    subprocess.run(
        ["scancel", f"--name={prefix}blocker"],
        timeout=30,
        env={**os.environ, "SLURM_CONF": live_slurm.conf},
        check=True,
    )


def given_up(site: SlurmSite, wall: Wall) -> None:
    """Run cycles until the pending run is given up; then the wall clock is Slurm's again
    (a new attempt is not submitted in the past)."""

    def lost() -> bool:
        if told(site, EventCode.LOST_REQUEUED):
            wall.ahead = 0.0
            return True
        return False

    site.until(lost, what="the run to be given up")


def charged(site: SlurmSite, job_id: int) -> list[float]:
    with Session(site.paika.engine) as session:
        entries = session.exec(select(LedgerEntry).where(LedgerEntry.job_id == job_id))
        return [e.gpu_hours for e in entries]


def told(site: SlurmSite, code: EventCode) -> list[Event]:
    return [e for e in site.notifier.events if e.code is code]


@SQLITE
def test_a_run_slurm_keeps_pending_past_the_limit_is_cancelled_and_runs_again_as_attempt_2(
    crowded: tuple[SlurmSite, Wall], live_slurm: LiveSlurm, slurm_prefix: str
) -> None:
    site, wall = crowded
    job_id = pending_run(site, live_slurm, slurm_prefix, "crowded")

    # Pending, it is running for paika and keeps both cards it booked: the one Slurm shows
    # free is given to no other job.
    site.ok('submit name=second gpus=1 hours=1 priority=normal type=T4-16GB data=ready cmd="true"')
    for _ in range(3):
        site.clock.advance(timedelta(seconds=5))
        assert not site.cycle.run_once().errors
    assert site.job("crowded").state == JobState.RUNNING and site.job("crowded").attempts == 1
    assert site.job("second").state == JobState.QUEUED
    assert not told(site, EventCode.LOST_REQUEUED)

    wall.ahead = LIMIT_S + 1  # past the limit, by Slurm's submit time
    given_up(site, wall)
    ((lost),) = told(site, EventCode.LOST_REQUEUED)
    assert lost.job_id == job_id and lost.kind is EventKind.JOB_REQUEUED
    assert lost.detail == {"why": "pending_too_long", "minutes": 10.0, "reason": "Resources"}
    assert event_sentence("en", lost) == (
        f"job #{job_id} crowded: Slurm kept it pending past 10 min (Slurm says: Resources) and"
        " it never ran; it is queued again as a new attempt"
    )
    assert "排队等待超过 10 分钟（Slurm 的原因：Resources）" in event_sentence("zh", lost)
    states = {n: s for _, n, s in slurm_jobs(live_slurm, slurm_prefix)}
    assert states[f"{slurm_prefix}{job_id}.1.{NODE}"] == "CANCELLED"
    assert charged(site, job_id) == []  # it never ran: nothing charged
    assert not [e for e in site.notifier.events if e.kind is EventKind.JOB_FAILED]

    end_blocker(live_slurm, slurm_prefix)
    site.until(
        lambda: {site.job(n).state for n in ("crowded", "second")} == {JobState.SUCCEEDED},
        what="both to run",
    )
    done = site.job("crowded")
    assert done.attempts == 2 and len(charged(site, job_id)) == 2  # its two cards, once
    runs = sorted(n for _, n, _ in slurm_jobs(live_slurm, slurm_prefix) if n.startswith(
        f"{slurm_prefix}{job_id}."))  # fmt: skip
    assert runs == [f"{slurm_prefix}{job_id}.1.{NODE}", f"{slurm_prefix}{job_id}.2.{NODE}"]
    with Session(site.paika.engine) as session:
        history = [
            e.reason for e in session.exec(select(JobEvent).where(JobEvent.job_id == job_id))
        ]
    assert "requeued: Slurm kept it pending past 10 min (Resources)" in history


@SQLITE
def test_with_slurmctld_away_a_run_pending_past_the_limit_is_neither_requeued_nor_run_twice(
    crowded: tuple[SlurmSite, Wall],
    live_slurm: LiveSlurm,
    slurm_prefix: str,
    restores_slurmctld: None,  # noqa: F811 (the fixture imported above)
) -> None:
    site, wall = crowded
    job_id = pending_run(site, live_slurm, slurm_prefix, "patient")
    pid = _slurmctld_pid(live_slurm)
    assert pid is not None
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: _slurmctld_pid(live_slurm) is None, timeout=60, what="slurmctld to stop")

    wall.ahead = LIMIT_S + 1
    site.until(lambda: site.host().state == HostState.DOWN, what="the node to be down")
    for _ in range(3):
        site.clock.advance(timedelta(minutes=5))
        site.cycle.run_once()
    job = site.job("patient")
    assert job.state in (JobState.RUNNING, JobState.UNKNOWN) and job.attempts == 1
    assert not told(site, EventCode.LOST_REQUEUED)

    _start_slurmctld(live_slurm)
    # Still PENDING when slurmctld answers: cancelled then, and queued again once.
    given_up(site, wall)
    end_blocker(live_slurm, slurm_prefix)
    site.until(lambda: site.job("patient").state == JobState.SUCCEEDED, what="attempt 2")
    assert site.job("patient").attempts == 2 and len(told(site, EventCode.LOST_REQUEUED)) == 1
    states = {
        n: s for _, n, s in slurm_jobs(live_slurm, slurm_prefix) if n != f"{slurm_prefix}blocker"
    }
    assert states == {
        f"{slurm_prefix}{job_id}.1.{NODE}": "CANCELLED",
        f"{slurm_prefix}{job_id}.2.{NODE}": "COMPLETED",
    }


@SQLITE
@pytest.mark.parametrize("past_the_limit", [False, True])
def test_a_pending_run_its_owner_cancels_ends_cancelled_not_queued_again(
    crowded: tuple[SlurmSite, Wall], live_slurm: LiveSlurm, slurm_prefix: str, past_the_limit: bool
) -> None:
    site, wall = crowded
    job_id = pending_run(site, live_slurm, slurm_prefix, "unwanted")
    site.ok("cancel unwanted")
    if past_the_limit:  # paika's own cancel for the pending time, in the same cycle
        wall.ahead = LIMIT_S + 1
    site.until(lambda: site.job("unwanted").state == JobState.CANCELLED, what="the cancel")
    job = site.job("unwanted")
    assert job.attempts == 1 and not told(site, EventCode.LOST_REQUEUED)
    assert job.state_reason == (
        "stopped (cancel) while Slurm kept it pending past 10 min (Resources); it never ran"
        if past_the_limit
        else "cancelled"
    )
    assert sum(charged(site, job_id)) == 0  # it never ran
    states = {n: s for _, n, s in slurm_jobs(live_slurm, slurm_prefix)}
    assert states == {
        f"{slurm_prefix}blocker": "RUNNING",
        f"{slurm_prefix}{job_id}.1.{NODE}": "CANCELLED",
    }
    # It stays cancelled: nothing is started again for it.
    for _ in range(2):
        site.clock.advance(timedelta(seconds=5))
        assert not site.cycle.run_once().errors
    assert site.job("unwanted").state == JobState.CANCELLED
    assert len(slurm_jobs(live_slurm, slurm_prefix)) == 2
