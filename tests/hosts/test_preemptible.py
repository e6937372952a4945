"""Jobs that checkpoint and resume (`preemptible=yes`), end to end through simulated agents
over real HTTP: the policy stops one for a core job with its own grace, the host's agent
gives it SIGTERM, it writes its checkpoint into PAIKA_CHECKPOINT_DIR and reports it, paika
requeues it, and its next run (PAIKA_ATTEMPT=2) reads the checkpoint back; the ledger keeps
both stretches and the GPU-hours lost apart, and the owner was told why. A job that did not
declare it is never stopped that way. Database times follow a manual clock; each test runs
on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import stat
import sys
import time
from datetime import timedelta
from pathlib import Path

from agent_world import TOKEN, Agent, job, ok, submit, until
from sqlmodel import Session, col, select

from bot.notice_words import event_sentence
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.cycle import Cycle
from scheduler.dispatch import AgentDispatcher
from scheduler.hosts.poll import poll_all_sync
from scheduler.notices.events import EventCode, EventKind, RecordingObserver
from storage.models import AuditEvent, JobEvent, JobOutput, JobState, LedgerEntry

PY = sys.executable
GRACE_S = 90  # the preemptible job's own grace=90s


class StopsSeen(AgentDispatcher):
    """The real dispatcher, keeping each stop it sent: (host, run, grace)."""

    def __init__(self) -> None:
        super().__init__(TOKEN, timeout=2.0)
        self.stops: list[tuple[str, str, float]] = []

    def stop(self, host: str, url: str, agent_job: str, grace_s: float) -> None:
        self.stops.append((host, agent_job, grace_s))
        super().stop(host, url, agent_job, grace_s)


def cycle_of(paika: Paika, notifier: RecordingObserver, dispatcher: AgentDispatcher) -> Cycle:
    return Cycle(
        paika.engine,
        paika.policy,
        paika.clock,
        dispatcher,
        notifier,
        lambda targets: poll_all_sync(targets, TOKEN, timeout=2.0),
    )


def checkpoints_reported(paika: Paika) -> int:
    with Session(paika.engine) as session:
        return len(session.exec(select(JobOutput).where(JobOutput.name == "checkpoint")).all())


def trainer(tmp_path: Path) -> str:
    """A job that resumes from its checkpoint: each run writes down what it was told and
    what checkpoint it found; the first keeps training until SIGTERM, then saves its
    checkpoint, reports it, and goes on with a last bit of work until `go` appears (the
    grace it uses); a later run finishes at once."""
    seen, go = tmp_path / "seen.txt", tmp_path / "go"
    body = f"""
import os, pathlib, signal, sys, time
stopping = []
signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
folder = pathlib.Path(os.environ["PAIKA_CHECKPOINT_DIR"])
saved = folder / "model.ckpt"
found = saved.read_text() if saved.exists() else "-"
with open({str(seen)!r}, "a") as out:
    out.write(" ".join([os.environ["PAIKA_ATTEMPT"], os.environ["PAIKA_PREEMPTIONS"],
                        str(folder), found]) + "\\n")
if os.environ["PAIKA_ATTEMPT"] != "1":
    sys.exit(0)
while not stopping:
    time.sleep(0.05)
saved.write_text("step-9000")
with open(os.environ["PAIKA_REPORT_FILE"], "a") as report:
    report.write(f"checkpoint={{saved}}\\n")
while not os.path.exists({str(go)!r}):
    time.sleep(0.05)
"""
    path = tmp_path / "train.py"
    path.write_text(body)
    return f"{PY} {path}"


def test_a_preemptible_job_is_stopped_with_its_grace_requeued_and_resumes(
    world: Paika, clock: ManualClock, agents: dict[str, Agent], tmp_path: Path
) -> None:
    notifier, dispatcher = RecordingObserver(), StopsSeen()
    cycle = cycle_of(world, notifier, dispatcher)
    submit(
        world,
        "pretrain",
        trainer(tmp_path),
        gpus=2,
        hours=100,
        extra=f"type=A100-80GB preemptible=yes grace={GRACE_S}s",
    )
    cycle.run_once()
    pretrain = job(world, "pretrain")
    assert pretrain.state == JobState.RUNNING and pretrain.preemptible
    assert pretrain.preempt_grace_s == GRACE_S
    seen = tmp_path / "seen.txt"
    until(cycle, clock, seen.exists)
    # Past the policy's minimum run time since its start.
    clock.advance(timedelta(minutes=31))
    submit(
        world, "paper", "sleep 0.5", gpus=2, priority="core", user="UVERA", extra="type=A100-80GB"
    )
    paper = job(world, "paper")
    result = until(cycle, clock, lambda: job(world, "pretrain").stop_reason == "preempt")
    assert result.preempted == [pretrain.id]
    run = f"{pretrain.id}.1"
    # Its stop was sent with its own grace, and the agent gives SIGTERM now, SIGKILL after it.
    assert ("gpu-a", run, GRACE_S) in dispatcher.stops
    assert all(grace == GRACE_S for _, sent, grace in dispatcher.stops if sent == run)
    store = agents["gpu-a"].store
    assert store is not None
    held = store._jobs[run]
    assert held.stop_requested and held.kill_at is not None
    assert held.kill_at - time.time() > GRACE_S - 30  # not the agent's default of 30 s
    # Asked to stop, not killed: it saves and reports its checkpoint within its grace.
    until(cycle, clock, lambda: checkpoints_reported(world) == 1)
    assert job(world, "pretrain").state == JobState.RUNNING
    assert store.known(run).state == "running"  # type: ignore[union-attr]
    (tmp_path / "go").touch()
    until(cycle, clock, lambda: job(world, "paper").state == JobState.RUNNING)
    stopped = job(world, "pretrain")
    assert stopped.state == JobState.QUEUED and stopped.preemptions == 1
    until(cycle, clock, lambda: job(world, "pretrain").state == JobState.SUCCEEDED, timeout=90)
    done = job(world, "pretrain")
    assert done.attempts == 2 and done.preemptions == 1

    # Each run was told which it is and where its checkpoint is: the same folder, kept by
    # the agent beside its state dir, the job's own (0700); the second read it back.
    folder = agents["gpu-a"].state_dir.with_name("gpu-a-checkpoints") / f"job-{done.id}"
    assert seen.read_text().splitlines() == [f"1 0 {folder} -", f"2 1 {folder} step-9000"]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700

    with Session(world.engine) as session:
        entries = session.exec(
            select(LedgerEntry).where(LedgerEntry.job_id == done.id).order_by(col(LedgerEntry.id))
        ).all()
        [reported] = session.exec(
            select(JobOutput).where(JobOutput.job_id == done.id, JobOutput.name == "checkpoint")
        ).all()
        history = session.exec(
            select(JobEvent).where(JobEvent.job_id == done.id).order_by(col(JobEvent.id))
        ).all()
        [asked] = session.exec(
            select(AuditEvent).where(
                AuditEvent.action == "job.preempt", AuditEvent.target_id == str(done.id)
            )
        ).all()
    # Two stretches of two GPUs each; the first lost the work since its checkpoint.
    first, second = entries[:2], entries[2:]
    assert len(first) == len(second) == 2
    assert len({e.started_at for e in first}) == 1 and first[0].ended_at <= second[0].started_at
    assert reported.attempt == 1 and reported.text == str(folder / "model.ckpt")
    for entry in first:
        since_checkpoint = (entry.ended_at - reported.at).total_seconds() / 3600
        assert since_checkpoint > 0
        assert entry.lost_gpu_hours == since_checkpoint < entry.gpu_hours
    assert all(entry.lost_gpu_hours == 0 for entry in second)
    assert asked.detail == {
        "for_job": paper.id,
        "code": "for_core",
        "reason": asked.detail["reason"],  # type: ignore[index]
        "grace_s": GRACE_S,
        "attempt": 1,
    }
    reasons = [event.reason for event in history]
    assert f"stopped: preempted for core job #{paper.id}" in reasons
    assert f"requeued: preempted for core job #{paper.id}" in reasons

    # The owner was told why, which run, where it resumes from, and what was lost.
    told = [e for e in notifier.events if e.kind == EventKind.JOB_PREEMPTED and e.job_id == done.id]
    assert [e.code for e in told] == [EventCode.PREEMPT_ASKED, EventCode.STOPPED_REQUEUED]
    assert all(e.owner == "UALICE" for e in told)
    asked_words = event_sentence("en", told[0])
    assert f"(run 1) is asked to checkpoint and stop within 1.5 min, for core job #{paper.id}" in (
        asked_words
    )
    assert "resumes from its checkpoint folder on gpu-a" in asked_words
    lost = sum(entry.lost_gpu_hours for entry in first)
    assert event_sentence("en", told[1]) == (
        f"job #{done.id} pretrain was stopped for core job #{paper.id} after run 1 and is "
        f"queued again; {lost:.2f} GPU-hours since its last checkpoint were lost"
    )
    status = ok(world, "UALICE", f"status {done.id}")
    assert f"Preempted once, {lost:.2f} GPU-hours lost" in status
    assert f"for core job #{paper.id}" in status
    # The decision log tells the same story.
    story = ok(world, "UALICE", f"why {done.id}")
    assert f"for core job #{paper.id}; it resumes from its checkpoint" in story


def test_a_job_that_did_not_declare_it_is_never_stopped_for_core_work(
    world: Paika, clock: ManualClock
) -> None:
    notifier, dispatcher = RecordingObserver(), StopsSeen()
    cycle = cycle_of(world, notifier, dispatcher)
    submit(world, "steady", "sleep 60", gpus=2, hours=100, extra="type=A100-80GB")
    cycle.run_once()
    clock.advance(timedelta(hours=2))
    submit(
        world, "paper", "sleep 0.5", gpus=2, priority="core", user="UVERA", extra="type=A100-80GB"
    )
    for _ in range(5):
        clock.advance(timedelta(minutes=10))
        result = cycle.run_once()
        assert result.preempted == [] and dispatcher.stops == []
    steady, paper = job(world, "steady"), job(world, "paper")
    assert steady.state == JobState.RUNNING and steady.stop_reason is None
    assert steady.preemptions == 0
    assert paper.state == JobState.QUEUED  # the core job waits
    assert EventKind.JOB_PREEMPTED not in notifier.kinds()


def test_a_preemptible_job_is_stopped_for_much_shorter_work_and_loses_all_without_a_checkpoint(
    world: Paika, clock: ManualClock
) -> None:
    notifier, dispatcher = RecordingObserver(), StopsSeen()
    cycle = cycle_of(world, notifier, dispatcher)
    # It never reports a checkpoint: a stop loses its whole stretch.
    looping = "trap 'exit 0' TERM; while :; do sleep 0.05; done"
    submit(world, "sweep", looping, gpus=2, hours=1000, extra="type=A100-80GB preemptible=yes")
    cycle.run_once()
    sweep = job(world, "sweep")
    assert sweep.state == JobState.RUNNING
    clock.advance(timedelta(minutes=40))
    submit(world, "probe", "sleep 0.5", gpus=2, hours=1, extra="type=A100-80GB")
    probe = job(world, "probe")
    until(cycle, clock, lambda: job(world, "probe").state == JobState.RUNNING)
    stopped = job(world, "sweep")
    assert stopped.state == JobState.QUEUED and stopped.preemptions == 1
    # The policy's default grace for such jobs (default_grace_minutes: 5).
    assert {grace for _, run, grace in dispatcher.stops if run == f"{sweep.id}.1"} == {300}
    with Session(world.engine) as session:
        entries = session.exec(select(LedgerEntry).where(LedgerEntry.job_id == sweep.id)).all()
    assert len(entries) == 2 and all(e.lost_gpu_hours == e.gpu_hours > 0 for e in entries)
    told = [
        e for e in notifier.events if e.job_id == sweep.id and e.kind == EventKind.JOB_PREEMPTED
    ]
    assert told[0].detail["preempt"] == "for_shorter"
    assert f"for shorter job #{probe.id}" in event_sentence("en", told[0])
    assert f"for shorter job #{probe.id}" in event_sentence("en", told[1])
    assert "为更短的任务" in event_sentence("zh", told[1])
