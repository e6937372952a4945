"""A start a host refuses for good (its agent's 403: the Unix account is missing there) is not
retried every cycle: the job is held off that host, stays queued with words saying what to
do, its owner and the admins are told once, and it starts once the mapping changes. Real
simulated agents over HTTP at a short cycle; the agents run as root and refuse an account
the machine does not have."""

from __future__ import annotations

import pwd
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from agent_world import TOKEN, Agent, job, make_cycle, ok, submit, until
from sqlmodel import Session, col, select

from scheduler.agent.app import build_app
from scheduler.agent.jobs import JobStore
from scheduler.agent.simulated import SimulatedReader
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.dispatch import RefusalCode, refusal_of
from scheduler.hosts.poll import Target, poll_all_sync
from scheduler.hosts.report import HostReport
from scheduler.notices.events import RecordingObserver
from scheduler.notices.kinds import NoticeKind
from scheduler.serving import serve_in_thread
from storage.models import Host, HostState, JobEvent, JobState, Notice, StartHold

MISSING = "paika-nobody-here"


def notices(paika: Paika, kind: NoticeKind) -> list[Notice]:
    with Session(paika.engine) as session:
        return list(session.exec(select(Notice).where(Notice.kind == kind.value)).all())


def holds(paika: Paika, job_id: int) -> list[StartHold]:
    with Session(paika.engine) as session:
        query = select(StartHold).where(StartHold.job_id == job_id).order_by(col(StartHold.id))
        return list(session.exec(query).all())


def test_a_start_refused_for_a_missing_account_is_held_told_once_and_starts_once_mapped(
    world: Paika, clock: ManualClock
) -> None:
    try:
        pwd.getpwnam(MISSING)
    except KeyError:
        pass
    else:
        raise AssertionError(f"this machine has an account {MISSING}; the test needs none")
    ok(world, "UADMIN", f"admin account set <@UALICE> account={MISSING}")
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "train", "sleep 300")  # any type: both hosts are tried, both refuse
    train = job(world, "train").id or 0
    for _ in range(15):  # 30 s at a 2 s cycle: the finding's 15 attempts and 15 DMs
        clock.advance(timedelta(seconds=2))
        cycle.run_once()

    held = holds(world, train)
    assert sorted(h.host for h in held) == ["gpu-a", "gpu-b"]  # one refusal per host
    assert {h.refusal for h in held} == {RefusalCode.ACCOUNT_UNKNOWN.value}
    assert all(h.released_at is None and h.account == MISSING for h in held)
    queued = job(world, "train")
    assert queued.state == JobState.QUEUED  # held, not failed
    assert queued.attempts == 2  # each refusal counts as an attempt
    told = notices(world, NoticeKind.JOB_HELD)
    assert len(told) == 1  # the owner once, and the admins (the channel) with the same notice
    assert told[0].detail is not None
    assert told[0].detail["to_users"] == ["UALICE"] and told[0].detail["to_channel"] is True
    assert notices(world, NoticeKind.JOB_REQUEUED) == []
    with Session(world.engine) as session:
        history = session.exec(select(JobEvent).where(JobEvent.job_id == train)).all()
    assert sum(1 for e in history if (e.reason or "").startswith("held off")) == 2

    status = ok(world, "UALICE", f"status #{train}")
    assert "refused to start it" in status, status
    assert "/gpu admin account set" in status, status

    # The admin maps Alice to an account the hosts have: the holds are released, it starts.
    ok(world, "UADMIN", "admin account set <@UALICE> account=root force=yes")
    until(cycle, clock, lambda: job(world, "train").state == JobState.RUNNING)
    assert job(world, "train").account == "root"
    assert {h.released_why for h in holds(world, train)} == {"account_changed"}
    assert len(notices(world, NoticeKind.JOB_HELD)) == 1


def test_the_agents_refusals_are_known_by_their_words() -> None:
    said = {
        "account: missing: this agent runs as root and does not run jobs as root; name …": (
            RefusalCode.ACCOUNT_UNMAPPED
        ),
        "account: there is no Unix account 'bob' on this host; create it (useradd) …": (
            RefusalCode.ACCOUNT_UNKNOWN
        ),
        "account: 'toor' is root (uid 0) and this agent does not run jobs as root; …": (
            RefusalCode.ROOT_REFUSED
        ),
        "account: this agent runs as 'svc', not root, so it runs jobs only as 'svc', not …": (
            RefusalCode.AGENT_NOT_ROOT
        ),
        "this agent is report-only (--report-only): it reports gpu-a's GPUs and starts no job": (
            RefusalCode.REPORT_ONLY
        ),
        "account: 'sys' is a system account (uid 2); …": RefusalCode.OTHER,
    }
    assert {words: refusal_of(words) for words in said} == said


class ReportOnlyAgent(Agent):
    """A simulated agent that only reports its GPUs (`paika agent --report-only`)."""

    def start(self) -> None:
        self.store = JobStore(self.state_dir, allow_root_jobs=True)
        reader = SimulatedReader(self.spec, host=self.name, loads=self.store)
        app = build_app(reader, self.store, TOKEN, host=self.name, report_only=True)
        self.server, self.thread, self.port = serve_in_thread(app, port=self.port)


@pytest.fixture
def report_only(world: Paika, tmp_path: Path) -> Iterator[Agent]:
    agent = ReportOnlyAgent("gpu-r", "2xA100-80GB", tmp_path / "gpu-r")
    agent.start()
    ok(world, "UADMIN", f"admin host add gpu-r url={agent.url}")
    yield agent
    agent.stop()


def test_a_report_only_host_is_held_off_until_an_admin_resumes_it_and_told_once(
    world: Paika, clock: ManualClock, report_only: Agent
) -> None:
    ok(world, "UADMIN", "admin host drain gpu-a")  # the A100s left are the report-only host's
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "train", "sleep 300", extra="type=A100-80GB")
    train = job(world, "train").id or 0
    for _ in range(10):
        clock.advance(timedelta(seconds=2))
        cycle.run_once()
    held = holds(world, train)
    assert [(h.host, h.refusal) for h in held] == [("gpu-r", RefusalCode.REPORT_ONLY.value)]
    assert job(world, "train").state == JobState.QUEUED
    status = ok(world, "UALICE", f"status #{train}")
    assert "only reports its GPUs" in status, status

    # An admin resumes the host: it is asked again, refuses again, and nobody is told twice.
    ok(world, "UADMIN", "admin host resume gpu-r")
    until(cycle, clock, lambda: len(holds(world, train)) == 2, step=timedelta(seconds=2))
    first, second = holds(world, train)
    assert first.released_why == "admin_released" and second.released_at is None
    assert len(notices(world, NoticeKind.JOB_HELD)) == 1

    ok(world, "UADMIN", "admin host resume gpu-a")  # a host that runs jobs: it starts there
    until(cycle, clock, lambda: job(world, "train").state == JobState.RUNNING)
    assert "gpu-a" in ok(world, "UALICE", f"status #{train}")
    assert len(notices(world, NoticeKind.JOB_HELD)) == 1


def test_a_cancelled_held_job_lets_go_of_its_holds(world: Paika, clock: ManualClock) -> None:
    ok(world, "UADMIN", f"admin account set <@UALICE> account={MISSING}")
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "train", "sleep 300", extra="type=A100-80GB")
    train = job(world, "train").id or 0
    until(cycle, clock, lambda: len(holds(world, train)) == 1)
    ok(world, "UALICE", f"cancel #{train}")
    until(cycle, clock, lambda: holds(world, train)[0].released_at is not None)
    assert holds(world, train)[0].released_why == "job_ended"
    assert job(world, "train").state == JobState.CANCELLED


def test_a_start_refused_for_good_is_not_one_of_the_attempts_a_lost_run_fails_after(
    world: Paika, clock: ManualClock, agents: dict[str, Agent], report_only: Agent, tmp_path: Path
) -> None:
    hosts = world.policy.scheduler.hosts.model_copy(update={"max_attempts": 2})
    scheduler = world.policy.scheduler.model_copy(update={"hosts": hosts})
    world.policy = world.policy.model_copy(update={"scheduler": scheduler})
    ok(world, "UADMIN", "admin host drain gpu-a")
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "train", "sleep 300", extra="type=A100-80GB")
    train = job(world, "train").id or 0
    until(cycle, clock, lambda: len(holds(world, train)) == 1)  # gpu-r refused: attempt 1
    ok(world, "UADMIN", "admin host resume gpu-a")
    until(cycle, clock, lambda: job(world, "train").state == JobState.RUNNING)  # attempt 2
    wiped = agents["gpu-a"]  # the host comes back with an empty disk: its run is lost
    wiped.stop_all_jobs()
    wiped.stop()
    wiped.state_dir = tmp_path / "fresh-disk"
    wiped.start()
    # Started once, not twice: queued again as a new attempt, not failed.
    until(cycle, clock, lambda: job(world, "train").attempts == 3)
    assert job(world, "train").state == JobState.RUNNING
    assert notices(world, NoticeKind.JOB_LOST) == []


class Silencing:
    """Polls the agents over HTTP, but a host in `silent` does not answer (a network blip)."""

    def __init__(self) -> None:
        self.silent: set[str] = set()

    def __call__(self, targets: Sequence[Target]) -> Mapping[str, HostReport]:
        reports = dict(poll_all_sync(targets, TOKEN, timeout=2.0))
        for name in self.silent:
            reports[name] = HostReport(host=name, ok=False, error="TimeoutError")
        return reports


def host_state(paika: Paika, name: str) -> str:
    with Session(paika.engine) as session:
        return session.exec(select(Host).where(Host.name == name)).one().state


def test_a_missed_poll_ends_no_hold_and_a_host_that_went_down_is_asked_again(
    world: Paika, clock: ManualClock, report_only: Agent
) -> None:
    ok(world, "UADMIN", "admin host drain gpu-a")
    poller = Silencing()
    cycle = make_cycle(world, RecordingObserver(), poller)
    submit(world, "train", "sleep 300", extra="type=A100-80GB")
    train = job(world, "train").id or 0
    until(cycle, clock, lambda: len(holds(world, train)) == 1, step=timedelta(seconds=2))
    attempts = job(world, "train").attempts

    # One poll missed, then answered: the host only degraded, the refusal still stands.
    poller.silent = {"gpu-r"}
    until(cycle, clock, lambda: host_state(world, "gpu-r") == HostState.DEGRADED.value)
    poller.silent = set()
    until(cycle, clock, lambda: host_state(world, "gpu-r") == HostState.UP.value)
    for _ in range(3):
        clock.advance(timedelta(seconds=2))
        cycle.run_once()
    (standing,) = holds(world, train)
    assert standing.released_at is None
    assert job(world, "train").attempts == attempts  # not sent again to be refused again

    # Down (three polls missed in a row) and back: it may be another machine now; asked
    # again, refused again, held again, and nobody told a second time.
    poller.silent = {"gpu-r"}
    until(cycle, clock, lambda: host_state(world, "gpu-r") == HostState.DOWN.value)
    assert holds(world, train)[0].released_why == "host_down"
    poller.silent = set()
    until(cycle, clock, lambda: len(holds(world, train)) == 2, step=timedelta(seconds=2))
    assert holds(world, train)[1].released_at is None
    assert job(world, "train").state == JobState.QUEUED
    assert len(notices(world, NoticeKind.JOB_HELD)) == 1


def test_an_agent_upgraded_on_the_host_is_asked_again_and_nobody_told_twice(
    world: Paika, clock: ManualClock, report_only: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok(world, "UADMIN", "admin host drain gpu-a")
    cycle = make_cycle(world, RecordingObserver())
    submit(world, "train", "sleep 300", extra="type=A100-80GB")
    train = job(world, "train").id or 0
    until(cycle, clock, lambda: len(holds(world, train)) == 1, step=timedelta(seconds=2))

    # The host's agent is restarted at another version between two polls (never down).
    monkeypatch.setattr("scheduler.agent.app.agent_version", lambda: "99.0.0")
    report_only.stop()
    report_only.start()
    until(cycle, clock, lambda: len(holds(world, train)) == 2, step=timedelta(seconds=2))
    first, second = holds(world, train)
    assert first.released_why == "host_changed" and second.released_at is None
    assert len(notices(world, NoticeKind.JOB_HELD)) == 1
