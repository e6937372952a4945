"""`/gpu logs`: a job's output tail read from its host's real (simulated) agent over HTTP:
who may read it, how many lines, rank 0's host for a run on several, a host that is down."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_world import TOKEN, Agent, job, make_cycle, ok, submit, until
from sqlmodel import Session, select

from bot.console import render
from scheduler.app import Paika, Reply
from scheduler.clock import ManualClock
from scheduler.cycle import Cycle
from scheduler.errors import Problem
from scheduler.notices.events import RecordingObserver
from scheduler.service.logs import LOG_TIMEOUT_S, LogsResult
from storage.models import Host, JobState

PRINTS = "seq -f line-%g 1 300"


@pytest.fixture
def logs_world(world: Paika) -> Paika:
    """The world, with the agents' shared token known to the commands too (as `paika up`
    is given PAIKA_AGENT_TOKEN)."""
    world.settings = world.settings.model_copy(update={"agent_token": TOKEN})
    ok(world, "UADMIN", "admin member add <@UNLP> team=nlp")
    return world


def _finished(world: Paika, clock: ManualClock, name: str, cmd: str, **kw: object) -> Cycle:
    cycle = make_cycle(world, RecordingObserver())
    submit(world, name, cmd, **kw)  # type: ignore[arg-type]
    until(cycle, clock, lambda: job(world, name).state == JobState.SUCCEEDED)
    return cycle


def _tail(reply: Reply) -> LogsResult:
    assert reply.ok, reply.text
    assert isinstance(reply.result, LogsResult)
    return reply.result


def test_the_owner_reads_the_tail_of_a_finished_job(logs_world: Paika, clock: ManualClock) -> None:
    _finished(logs_world, clock, "printer", PRINTS)
    printer = job(logs_world, "printer")
    tail = _tail(logs_world.run("logs printer lines=20", "UALICE"))
    assert tail.lines == tuple(f"line-{i}" for i in range(281, 301))
    assert (tail.host, tail.hosts, tail.attempt) == ("gpu-b", ("gpu-b",), 1)
    default = _tail(logs_world.run(f"logs #{printer.id}", "UALICE"))
    assert len(default.lines) == 50 and default.lines[-1] == "line-300"
    text = logs_world.run("logs printer lines=3", "UALICE").text
    assert text.splitlines() == [
        f"Output of job #{printer.id} printer on gpu-b (run 1), last 3 lines",
        "line-298",
        "line-299",
        "line-300",
    ]
    assert not logs_world.run("logs printer lines=1001", "UALICE").ok  # at most 1,000


def test_an_outsider_is_refused_and_an_approver_or_admin_of_the_team_allowed(
    logs_world: Paika, clock: ManualClock
) -> None:
    _finished(logs_world, clock, "printer", PRINTS)
    printer = job(logs_world, "printer").id
    refused = logs_world.run(f"logs #{printer}", "UNLP")
    assert not refused.ok and refused.error is not None
    assert refused.error.problem is Problem.NOT_YOURS
    assert "read its output" in refused.text and "<@UALICE>" in refused.text
    # A member of the team who does not own the job is refused too.
    ok(logs_world, "UADMIN", "admin member add <@UMALLORY> team=vision")
    assert not logs_world.run(f"logs #{printer}", "UMALLORY").ok
    for reader in ("UVERA", "UADMIN"):
        assert _tail(logs_world.run(f"logs #{printer}", reader)).lines


def test_a_job_that_never_ran_has_no_output_to_show(logs_world: Paika) -> None:
    submit(logs_world, "waiting", "true")
    reply = logs_world.run("logs waiting", "UALICE")
    assert not reply.ok and reply.error is not None
    assert reply.error.problem is Problem.LOGS_NEVER_RAN
    assert "has not run yet" in reply.text and "/gpu status" in reply.text


def test_a_host_that_is_down_answers_quickly_with_a_clear_message(
    logs_world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    _finished(logs_world, clock, "printer", PRINTS)
    agents["gpu-b"].stop()
    began = time.monotonic()
    reply = logs_world.run("logs printer", "UALICE")
    assert time.monotonic() - began < LOG_TIMEOUT_S + 2
    assert not reply.ok and reply.error is not None
    assert reply.error.problem is Problem.LOGS_HOST_UNREACHABLE
    assert "Could not read job" in reply.text and "from host gpu-b" in reply.text
    assert "try again in a minute" in reply.text
    assert "未能在 3 秒内从主机 gpu-b 读取" in render(reply.error, logs_world.policy.zone, "zh")


def test_a_host_that_takes_the_request_but_never_answers_times_out_quickly(
    logs_world: Paika, clock: ManualClock
) -> None:
    _finished(logs_world, clock, "printer", PRINTS)
    with socket.socket() as silent:  # accepts connections (the backlog), answers nothing
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        with Session(logs_world.engine) as session:
            host = session.exec(select(Host).where(Host.name == "gpu-b")).one()
            host.url = f"http://127.0.0.1:{silent.getsockname()[1]}"
            session.add(host)
            session.commit()
        began = time.monotonic()
        reply = logs_world.run("logs printer", "UALICE")
        took = time.monotonic() - began
    assert LOG_TIMEOUT_S - 0.5 < took < LOG_TIMEOUT_S + 2
    assert not reply.ok and reply.error is not None
    assert reply.error.problem is Problem.LOGS_HOST_UNREACHABLE
    assert "within 3 s" in reply.text and "sent no answer" in reply.text


def test_a_host_that_no_longer_keeps_the_run_says_so(
    logs_world: Paika, clock: ManualClock, agents: dict[str, Agent]
) -> None:
    _finished(logs_world, clock, "printer", PRINTS)
    agent = agents["gpu-b"]
    agent.stop()
    for path in agent.state_dir.rglob("*"):  # a fresh agent state: the run is forgotten
        if path.is_file():
            path.unlink()
    agent.start()
    reply = logs_world.run("logs printer", "UALICE")
    assert not reply.ok and reply.error is not None, reply.text
    assert reply.error.problem is Problem.LOGS_NOT_KEPT


@pytest.fixture
def third(tmp_path: Path, logs_world: Paika) -> Iterator[Agent]:
    """A second T4 host, so a four-GPU T4 job spans two hosts."""
    agent = Agent("gpu-c", "2xT4-16GB", tmp_path / "gpu-c")
    agent.start()
    ok(logs_world, "UADMIN", f"admin host add {agent.name} url={agent.url}")
    yield agent
    agent.stop_all_jobs()
    agent.stop()


def test_a_run_on_several_hosts_is_read_from_rank_zeros(
    logs_world: Paika, clock: ManualClock, third: Agent
) -> None:
    cmd = "echo rank-$PAIKA_NODE_RANK"
    _finished(logs_world, clock, "wide", cmd, gpus=4, extra="type=T4-16GB")
    tail = _tail(logs_world.run("logs wide", "UALICE"))
    assert tail.hosts == ("gpu-b", "gpu-c")
    assert (tail.host, tail.lines) == ("gpu-b", ("rank-0",))
    assert "The run spans hosts gpu-b, gpu-c; this is rank 0's output (gpu-b)." in (
        logs_world.run("logs wide", "UALICE").text
    )
