"""A Slurm pool run by paika end to end, against the real one-node Slurm: jobs are submitted
with `paika cmd`'s grammar (the same parser and service as Slack), the real cycle starts
them with sbatch on the type and node it chose, reads Slurm's nodes and queue each cycle,
and records each run's end exactly as an agent's. A drained node takes nothing new; a
slurmctld outage loses no job, fails none and starts none twice."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import LiveSlurm, wait_for
from sqlmodel import Session, select

from scheduler.agent.app import build_app
from scheduler.agent.gpus import GpuLoad
from scheduler.agent.isolation import RunAs
from scheduler.agent.jobs import JobStore
from scheduler.agent.simulated import SimulatedReader
from scheduler.alerts.idle import ACTION_KIND, ASK_KIND, act_on_idle, check_idle
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.config import PolicyConfig
from scheduler.cycle import Cycle, CycleResult
from scheduler.dispatch import AgentDispatcher
from scheduler.executors import slurm_kind
from scheduler.hosts.executor import AgentsExecutor
from scheduler.hosts.poll import Target, poll_all_sync
from scheduler.hosts.report import HostReport
from scheduler.notices.events import EventCode, EventKind, RecordingObserver
from scheduler.notices.outbox import RecordingAnnouncer, deliver_pending
from scheduler.pools import Pools
from scheduler.serving import serve_in_thread, stop_server
from scheduler.slurm.commands import SlurmCommands
from scheduler.slurm.models import AccountedJob, QueuedJob
from scheduler.slurm.reconcile import SlurmPoller
from storage.models import (
    Gpu,
    GpuSample,
    Host,
    HostState,
    Job,
    JobEvent,
    JobState,
    LedgerEntry,
)

SQLITE = pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
SQLITE_AND_POSTGRESQL = pytest.mark.parametrize(
    "backend_url", ["sqlite", "postgresql"], indirect=True
)
TOKEN = "test-token-0123456789"
NODE = "localhost"


class Ticks:
    """The stop grace's clock: it moves only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


AgentPoll = Callable[[Sequence[Target]], Mapping[str, HostReport]]


def no_agents(targets: Sequence[Target]) -> Mapping[str, HostReport]:
    raise AssertionError(f"no host here has an agent: {targets}")


class SlurmSite:
    """paika with one Slurm pool (the one node), its cycle and what it told."""

    def __init__(
        self,
        paika: Paika,
        policy: PolicyConfig,
        ticks: Ticks,
        agents: AgentPoll = no_agents,
        slurm: SlurmPoller | None = None,
    ) -> None:
        self.paika, self.policy, self.ticks = paika, policy, ticks
        self.notifier = RecordingObserver()
        # Wired as `paika up` wires them: the starts go by the cycle's own queue read.
        self.pools = Pools(
            policy,
            AgentsExecutor(agents, AgentDispatcher(TOKEN, timeout=2.0)),
            monotonic=ticks,
            kinds={"slurm": slurm_kind(slurm)},
        )
        self.cycle = Cycle(paika.engine, policy, paika.clock, self.pools, self.notifier, self.pools)

    @property
    def clock(self) -> ManualClock:
        return self.paika.clock  # type: ignore[return-value]

    def ok(self, text: str, user: str = "UALICE") -> str:
        reply = self.paika.run(text, user)
        assert reply.ok, reply.text
        return reply.text

    def job(self, name: str) -> Job:
        with Session(self.paika.engine) as session:
            return session.exec(select(Job).where(Job.name == name)).one()

    def host(self) -> Host:
        with Session(self.paika.engine) as session:
            return session.exec(select(Host).where(Host.name == NODE)).one()

    def gpus(self) -> list[Gpu]:
        with Session(self.paika.engine) as session:
            return list(session.exec(select(Gpu).order_by(Gpu.index)))

    def until(
        self,
        done: Callable[[], object],
        *,
        step: timedelta = timedelta(seconds=5),
        timeout: float = 60.0,
        what: str = "it",
    ) -> CycleResult:
        """Run cycles (moving paika's clock by `step`) until `done()` holds."""
        deadline = time.monotonic() + timeout
        while True:
            self.clock.advance(step)
            result = self.cycle.run_once()
            assert not result.errors, result.errors
            if done():
                return result
            if time.monotonic() > deadline:
                pytest.fail(f"waited {timeout:g} s for {what}")
            time.sleep(0.2)


def slurm_policy(
    paika: Paika, live_slurm: LiveSlurm, prefix: str, shared_dir: Path, gres: dict[str, str]
) -> PolicyConfig:
    """The bundled policy with no headroom and the one node as a Slurm pool."""
    raw = paika.policy.model_dump(mode="json", exclude_unset=True)
    raw["scheduler"] = {**raw.get("scheduler", {}), "headroom": {}}
    raw["pools"] = {
        "cluster": {
            "executor": "slurm",
            "hosts": [NODE],
            "slurm": {
                "partition": live_slurm.partition,
                "gres": gres,
                "time_margin": 1.0,
                "min_time_minutes": 1,
                "log_path": str(shared_dir / "{job_id}.{attempt}.out"),
                "job_name_prefix": prefix,
                "conf": live_slurm.conf,
            },
        }
    }
    return PolicyConfig.model_validate(raw)


def open_site(
    paika: Paika,
    policy: PolicyConfig,
    agents: AgentPoll = no_agents,
    slurm: SlurmPoller | None = None,
    *,
    url: str = f"http://{NODE}:8700",
) -> SlurmSite:
    """Alice (Unix account `nobody`) on a paika that runs the Slurm node, added with `url`
    (where its agent answers, for a pool that takes its utilization from agents)."""
    paika.policy = policy
    site = SlurmSite(paika, policy, Ticks(), agents, slurm)
    site.ok("admin member add <@UALICE> team=vision", "UADMIN")
    site.ok("admin account set <@UALICE> account=nobody force=yes", "UADMIN")
    site.ok(f"admin host add {NODE} url={url}", "UADMIN")
    return site


@pytest.fixture
def site(
    paika: Paika, live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path
) -> Iterator[SlurmSite]:
    """paika whose only host is the Slurm node, both its GPU types mapped."""
    gres = {"T4-16GB": "t4", "A100-80GB": "a100"}
    site = open_site(paika, slurm_policy(paika, live_slurm, slurm_prefix, shared_dir, gres))
    yield site
    site.cycle.close()


def slurm_jobs(live_slurm: LiveSlurm, prefix: str) -> list[tuple[int, str, str]]:
    """(Slurm id, name, state) of every job of this test Slurm still knows."""
    out = subprocess.run(
        ["squeue", "--noheader", "--states=all", "--format=%i %j %T"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "SLURM_CONF": live_slurm.conf},
        check=True,
    ).stdout
    jobs = [line.split() for line in out.splitlines() if line.strip()]
    return [(int(i), name, state) for i, name, state in jobs if name.startswith(prefix)]


def submit(
    site: SlurmSite, name: str, cmd: str, extra: str = "data=ready", hours: float = 1
) -> None:
    site.ok(
        f'submit name={name} gpus=1 hours={hours} priority=normal type=T4-16GB {extra} cmd="{cmd}"'
    )


@SQLITE_AND_POSTGRESQL
def test_a_job_waits_for_its_data_then_runs_on_slurm_where_paika_put_it(
    site: SlurmSite, live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path
) -> None:
    env_file = shared_dir / "env.txt"
    cmd = f"env > {env_file}; id -un >> {env_file}; sleep 2"
    submit(site, "envdump", cmd, extra="data=pending")
    site.until(lambda: site.host().state == HostState.UP, what="the node to be read")
    assert [g.gpu_type for g in site.gpus()] == ["A100-80GB"] * 2 + ["T4-16GB"] * 2
    assert site.job("envdump").state == JobState.WAITING_DATA
    assert slurm_jobs(live_slurm, slurm_prefix) == []  # no data, no card, no Slurm job

    site.ok("ready envdump")
    site.until(lambda: site.job("envdump").state == JobState.SUCCEEDED, what="the job to end")

    done = site.job("envdump")
    assert (done.exit_code, done.attempts) == (0, 1)
    (started,) = [e for e in site.notifier.events if e.code is EventCode.STARTED]
    assert started.detail["hosts"] == [NODE] and started.detail["gpu_type"] == "T4-16GB"
    lines = env_file.read_text().splitlines()
    env = dict(line.split("=", 1) for line in lines if "=" in line)
    assert env["CUDA_VISIBLE_DEVICES"] in ("2", "3")  # a t4 card: Slurm numbers them 2-3
    assert env["SLURM_JOB_NODELIST"] == NODE and env["SLURM_JOB_PARTITION"] == "debug"
    assert env["PAIKA_JOB_ID"] == str(done.id) and env["PAIKA_ATTEMPT"] == "1"
    assert lines[-1] == "nobody"  # the owner's mapped account, never root
    ((slurm_id, name, state),) = slurm_jobs(live_slurm, slurm_prefix)
    assert (name, state) == (f"{slurm_prefix}{done.id}.1.{NODE}", "COMPLETED")
    assert [e.code for e in site.notifier.events if e.job_id == done.id][-1] is EventCode.FINISHED

    # Its ledger entry charges what Slurm's accounting does: its GPU and its run's elapsed time.
    accounting = SlurmCommands(live_slurm.conf)

    def accounted() -> AccountedJob | None:
        jobs = accounting.accounting([slurm_id])
        return next((j for j in jobs if j.state.current == "COMPLETED" and j.gpus()), None)

    record = wait_for(accounted, timeout=30, what="slurmdbd to record the run")
    with Session(site.paika.engine) as session:
        entries = list(session.exec(select(LedgerEntry).where(LedgerEntry.job_id == done.id)))
    assert [e.gpu_type for e in entries] == ["T4-16GB"] and record.gpus() == 1
    assert record.time.elapsed >= 2
    assert sum(e.gpu_hours for e in entries) == pytest.approx(record.gpu_hours, abs=1e-9)


@SQLITE
def test_a_job_that_exits_3_is_recorded_failed_with_exit_code_3(site: SlurmSite) -> None:
    submit(site, "breaks", "exit 3")
    site.until(lambda: site.job("breaks").state == JobState.FAILED, what="the job to fail")
    failed = site.job("breaks")
    assert failed.exit_code == 3
    (told,) = [e for e in site.notifier.events if e.kind is EventKind.JOB_FAILED]
    assert told.code is EventCode.FAILED and told.detail["exit_code"] == 3


@SQLITE
def test_cancel_sends_term_then_scancel_after_the_grace(
    site: SlurmSite, live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path
) -> None:
    heard, listening = shared_dir / "heard-term", shared_dir / "listening"
    # It hears the TERM and carries on: only the scancel after the grace ends it.
    submit(
        site,
        "stubborn",
        f"trap 'touch {heard}' TERM; touch {listening}; while true; do sleep 0.2; done",
    )
    # Once its trap is set (a TERM before that would simply end it).
    site.until(listening.exists, what="the job to run")
    site.ok("cancel stubborn")
    site.until(heard.exists, what="the TERM to reach the batch shell")
    assert site.job("stubborn").state == JobState.RUNNING  # the grace is running
    site.ticks.now += 31  # past the cancel's grace (30 s)
    site.until(lambda: site.job("stubborn").state == JobState.CANCELLED, what="the cancel")
    ((_, _, state),) = slurm_jobs(live_slurm, slurm_prefix)
    assert state == "CANCELLED"


@SQLITE
def test_a_job_slurm_kills_at_its_time_limit_is_recorded_with_that_reason(
    site: SlurmSite,
) -> None:
    # hours=0.01 on one card: --time is the floor, 1 minute. paika's clock stands still, so
    # only Slurm's limit can end it.
    submit(site, "overruns", "sleep 600", hours=0.01)
    site.until(
        lambda: site.job("overruns").state == JobState.FAILED,
        step=timedelta(0),
        timeout=180,
        what="Slurm's time limit",
    )
    (told,) = [e for e in site.notifier.events if e.kind is EventKind.JOB_FAILED]
    assert told.code is EventCode.KILLED and told.detail["ended_by"] == "timeout"
    assert site.job("overruns").exit_code is None
    with Session(site.paika.engine) as session:
        reasons = [e.reason for e in session.exec(select(JobEvent))]
    assert any("TIMEOUT" in (r or "") for r in reasons), reasons


def scontrol(live_slurm: LiveSlurm, *args: str) -> None:
    subprocess.run(
        ["scontrol", *args],
        timeout=30,
        env={**os.environ, "SLURM_CONF": live_slurm.conf},
        check=True,
    )


@SQLITE
def test_a_drained_node_is_unhealthy_and_nothing_new_starts_there(
    site: SlurmSite, live_slurm: LiveSlurm, slurm_prefix: str
) -> None:
    scontrol(live_slurm, "update", f"nodename={NODE}", "state=drain", "reason=fan broken")
    try:
        submit(site, "waits", "true")
        site.until(lambda: "DRAIN" in (site.host().last_error or ""), what="the drain to be seen")
        for _ in range(3):
            site.clock.advance(timedelta(seconds=5))
            assert not site.cycle.run_once().errors
        host = site.host()
        assert host.last_error is not None and "fan broken" in host.last_error
        assert not any(g.healthy for g in site.gpus())
        assert site.job("waits").state == JobState.QUEUED
        assert slurm_jobs(live_slurm, slurm_prefix) == []
    finally:
        scontrol(live_slurm, "update", f"nodename={NODE}", "state=resume")
    site.until(lambda: site.job("waits").state == JobState.SUCCEEDED, what="the resumed node")
    assert site.host().last_error is None and all(g.healthy for g in site.gpus())


def _slurmctld_pid(live_slurm: LiveSlurm) -> int | None:
    pid_file = Path(live_slurm.conf).parent.parent / "run" / "slurmctld.pid"
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def _start_slurmctld(live_slurm: LiveSlurm) -> None:
    """As tests/slurm/one-node.sh starts it (its state kept across restarts)."""
    if _slurmctld_pid(live_slurm) is None:
        subprocess.run(
            ["/usr/sbin/slurmctld", "-i"],
            env={**os.environ, "SLURM_CONF": live_slurm.conf},
            timeout=60,
            check=True,
        )

    def answers() -> bool:
        ping = subprocess.run(
            ["scontrol", "ping"],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "SLURM_CONF": live_slurm.conf},
            check=False,
        )
        return "UP" in ping.stdout

    wait_for(answers, timeout=60, what="slurmctld to answer again")


@pytest.fixture
def restores_slurmctld(live_slurm: LiveSlurm) -> Iterator[None]:
    """Whatever the test does to slurmctld, it runs again afterwards."""
    yield
    _start_slurmctld(live_slurm)


@SQLITE
def test_slurmctld_away_mid_run_loses_nothing_and_starts_nothing_twice(
    site: SlurmSite,
    live_slurm: LiveSlurm,
    slurm_prefix: str,
    shared_dir: Path,
    restores_slurmctld: None,
) -> None:
    go = shared_dir / "go"
    submit(site, "survives", f"while [ ! -e {go} ]; do sleep 0.2; done")
    site.until(
        lambda: (
            site.job("survives").confirmed_at is not None
            and any(s == "RUNNING" for _, _, s in slurm_jobs(live_slurm, slurm_prefix))
        ),
        what="the job to run",
    )
    ((slurm_id, _, _),) = slurm_jobs(live_slurm, slurm_prefix)

    pid = _slurmctld_pid(live_slurm)
    assert pid is not None
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: _slurmctld_pid(live_slurm) is None, timeout=60, what="slurmctld to stop")

    # Long past every patience of the policy (unknown, down, give up): still nothing concluded.
    give_up = site.policy.scheduler.hosts.give_up_after_hours
    site.until(lambda: site.host().state == HostState.DOWN, what="the node to be down")
    site.clock.advance(timedelta(hours=give_up + 1))
    for _ in range(2):
        site.clock.advance(timedelta(minutes=5))
        site.cycle.run_once()
    host, job = site.host(), site.job("survives")
    assert host.last_error is not None and "slurmctld_unreachable" in host.last_error
    assert job.state in (JobState.RUNNING, JobState.UNKNOWN) and job.attempts == 1
    down = [e for e in site.notifier.events if e.kind is EventKind.HOST_DOWN]
    assert [e.host for e in down] == [NODE]  # the admins' alert, once

    _start_slurmctld(live_slurm)
    site.until(
        lambda: (
            site.job("survives").state == JobState.RUNNING and site.host().state == HostState.UP
        ),
        what="the run to be recognised",
    )
    assert site.job("survives").attempts == 1
    assert [i for i, _, _ in slurm_jobs(live_slurm, slurm_prefix)] == [slurm_id]
    go.touch()
    site.until(lambda: site.job("survives").state == JobState.SUCCEEDED, what="its end")
    assert [i for i, _, _ in slurm_jobs(live_slurm, slurm_prefix)] == [slurm_id]


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[str]:
    """A paika agent with two simulated A100-80GB over real HTTP on loopback; its URL."""
    # Alice maps to `nobody` (uid 65534): a test rig's account, which a root agent runs jobs
    # as only when told it may.
    run_as = RunAs.for_this_process(allow_root_jobs=True, allow_system_accounts=True)
    store = JobStore(tmp_path / "agent", run_as=run_as)
    reader = SimulatedReader("2xA100-80GB", host="gpu-a", loads=store)
    server, thread, port = serve_in_thread(build_app(reader, store, TOKEN, host="gpu-a"))
    yield f"http://127.0.0.1:{port}"
    for run in store.all_jobs():
        if run.state == "running":
            store.stop(run.job_id, 0.1)
    stop_server(server, thread)
    store.close()


@SQLITE
def test_one_paika_runs_a_pool_on_slurm_and_a_host_on_its_agent(
    paika: Paika,
    live_slurm: LiveSlurm,
    slurm_prefix: str,
    shared_dir: Path,
    agent: str,
) -> None:
    # Only the node's t4 cards are paika's on Slurm; the A100s paika uses are the agent's.
    policy = slurm_policy(paika, live_slurm, slurm_prefix, shared_dir, {"T4-16GB": "t4"})

    def agents(targets: Sequence[Target]) -> Mapping[str, HostReport]:
        assert [t.name for t in targets] == ["gpu-a"]  # the Slurm node is never polled
        return poll_all_sync(targets, TOKEN, timeout=2.0)

    site = open_site(paika, policy, agents)
    try:
        site.ok(f"admin host add gpu-a url={agent}", "UADMIN")
        submit(site, "on-slurm", "true")
        site.ok(
            "submit name=on-agent gpus=1 hours=1 priority=normal type=A100-80GB "
            'data=ready cmd="true"'
        )
        site.until(
            lambda: {site.job(n).state for n in ("on-slurm", "on-agent")} == {JobState.SUCCEEDED},
            what="both jobs to end",
        )
        started = {
            e.name: e.detail["hosts"] for e in site.notifier.events if e.code is EventCode.STARTED
        }
        assert started == {"on-slurm": [NODE], "on-agent": ["gpu-a"]}
        ((_, name, state),) = slurm_jobs(live_slurm, slurm_prefix)
        assert (name, state) == (f"{slurm_prefix}{site.job('on-slurm').id}.1.{NODE}", "COMPLETED")
    finally:
        site.cycle.close()


class SlurmJobOnCard:
    """What NVML on the node shows: another Slurm job's process on card 2 (the first t4 in
    the node's gres.conf order), busy at 37 % with 2 GiB."""

    def gpu_loads(self) -> list[GpuLoad]:
        return [GpuLoad(2, 4242, "slurm", 37.0, 2048)]


@SQLITE
def test_a_slurm_pools_cards_carry_what_the_report_only_agent_on_its_node_reads(
    paika: Paika, live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path, tmp_path: Path
) -> None:
    store = JobStore(tmp_path / "node-agent")
    # The node's cards in its gres.conf order: a100, a100, t4, t4.
    reader = SimulatedReader("2xA100-80GB,2xT4-16GB", host=NODE, loads=SlurmJobOnCard())
    app = build_app(reader, store, TOKEN, host=NODE, report_only=True)
    server, thread, port = serve_in_thread(app)
    policy = slurm_policy(paika, live_slurm, slurm_prefix, shared_dir, {"T4-16GB": "t4"})
    pool = policy.pools["cluster"]
    assert pool.options is not None
    slurm = pool.options.model_copy(update={"utilization": "agents"})
    policy.pools["cluster"] = pool.model_copy(update={"options": slurm})

    def agents(targets: Sequence[Target]) -> Mapping[str, HostReport]:
        assert [t.name for t in targets] == [NODE]  # the node's agent, for its cards' use
        return poll_all_sync(targets, TOKEN, timeout=2.0)

    def use() -> list[tuple[int, float | None]]:
        return [(g.index, g.utilization_pct) for g in site.gpus()]

    site = open_site(paika, policy, agents, url=f"http://127.0.0.1:{port}")
    done = shared_dir / "done"
    try:
        submit(site, "watched", f"while [ ! -e {done} ]; do sleep 0.2; done")
        site.until(
            lambda: (
                site.job("watched").state == JobState.RUNNING
                and use() == [(0, 0.0), (1, 0.0), (2, 37.0), (3, 0.0)]
            ),
            what="the run, and its node's cards' use",
        )
        gpus = site.gpus()
        # The agent's UUIDs and names; Slurm's types and the catalog's sizes.
        assert [g.uuid for g in gpus] == [reader.uuid(i) for i in range(4)]
        assert [g.gpu_type for g in gpus] == ["slurm:a100"] * 2 + ["T4-16GB"] * 2
        assert gpus[2].memory_used_gib == pytest.approx(2.0)
        with Session(paika.engine) as session:  # what idle reclaim and the board go by
            sampled = {s.utilization_pct for s in session.exec(select(GpuSample))}
        assert {0.0, 37.0} <= sampled

        # The agent goes away: no utilization, and nothing else changes.
        stop_server(server, thread)
        site.until(lambda: all(pct is None for _, pct in use()), what="the use to be unknown")
        assert site.host().state == HostState.UP
        assert all(g.healthy for g in site.gpus())
        assert site.job("watched").state == JobState.RUNNING
        done.touch()
        site.until(lambda: site.job("watched").state == JobState.SUCCEEDED, what="its end")
    finally:
        done.touch()
        stop_server(server, thread)
        store.close()
        site.cycle.close()


@SQLITE
def test_idle_reclaim_releases_an_idle_run_on_slurm_by_its_nodes_agents_readings(
    paika: Paika, live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path, tmp_path: Path
) -> None:
    store = JobStore(tmp_path / "node-agent")
    reader = SimulatedReader("2xA100-80GB,2xT4-16GB", host=NODE)  # every card at 0 %
    server, thread, port = serve_in_thread(
        build_app(reader, store, TOKEN, host=NODE, report_only=True)
    )
    policy = slurm_policy(paika, live_slurm, slurm_prefix, shared_dir, {"T4-16GB": "t4"})
    pool = policy.pools["cluster"]
    assert pool.options is not None
    slurm = pool.options.model_copy(update={"utilization": "agents"})
    policy.pools["cluster"] = pool.model_copy(update={"options": slurm})
    policy = policy.model_copy(
        update={
            "reclaim": policy.reclaim.model_copy(update={"idle_minutes": 3, "grace_minutes": 1})
        }
    )

    def agents(targets: Sequence[Target]) -> Mapping[str, HostReport]:
        return poll_all_sync(targets, TOKEN, timeout=2.0)

    site = open_site(paika, policy, agents, url=f"http://127.0.0.1:{port}")
    heard, listening = shared_dir / "idle-heard-term", shared_dir / "idle-listening"
    announcer = RecordingAnnouncer()

    def reclaimed() -> bool:
        # What periodic work runs after each cycle: the idle checks, then the DMs' delivery.
        now, engine = site.clock.now(), paika.engine
        check_idle(engine, policy, now)
        act_on_idle(engine, policy, now)
        deliver_pending(engine, announcer, now)
        return site.job("dozing").state == JobState.CANCELLED

    try:
        site.ok(
            "submit name=dozing gpus=1 hours=8 priority=idle type=T4-16GB data=ready "
            f"cmd=\"trap 'touch {heard}; exit 0' TERM; touch {listening}; "
            'while true; do sleep 0.2; done"'
        )
        site.until(listening.exists, what="the run")
        site.until(reclaimed, step=timedelta(minutes=1), timeout=120, what="the idle reclaim")
        assert heard.exists()  # stopped as paika stops a Slurm run: TERM to its batch shell
        dozing = site.job("dozing")
        assert dozing.state_reason == "released: its GPUs sat idle"
        idle = [a for a in announcer.announcements if a.kind in (ASK_KIND, ACTION_KIND)]
        assert [(a.kind, a.to_users) for a in idle] == [
            (ASK_KIND, ("UALICE",)),
            (ACTION_KIND, ("UALICE",)),
        ]
        assert idle[0].detail["hosts"] == [NODE] and idle[0].detail["peak_pct"] == 0.0
        ((_, name, _),) = slurm_jobs(live_slurm, slurm_prefix)
        assert name == f"{slurm_prefix}{dozing.id}.1.{NODE}"
    finally:
        stop_server(server, thread)
        store.close()
        site.cycle.close()


@SQLITE
def test_an_idle_job_on_slurm_is_preempted_for_core_work_and_queued_again(
    site: SlurmSite, live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path
) -> None:
    heard, listening = shared_dir / "sweep-heard-term", shared_dir / "sweep-listening"
    site.ok("admin member add <@UVERA> team=vision role=approver", "UADMIN")
    site.ok("admin account set <@UVERA> account=nobody force=yes", "UADMIN")
    site.ok(
        "submit name=sweep gpus=2 hours=1 priority=idle type=T4-16GB data=ready "
        f"cmd=\"trap 'touch {heard}; exit 0' TERM; touch {listening}; "
        'while true; do sleep 0.2; done"'
    )
    site.until(listening.exists, what="the idle job to run")
    site.ok(
        'submit name=paper gpus=2 hours=1 priority=core type=T4-16GB data=ready cmd="true"',
        "UVERA",
    )
    site.until(lambda: site.job("paper").state == JobState.SUCCEEDED, what="the core job")
    assert heard.exists()  # the idle job was told with TERM, on its batch shell
    sweep = site.job("sweep")
    assert sweep.state != JobState.FAILED
    with Session(site.paika.engine) as session:
        history = [
            (e.to_state, e.reason)
            for e in session.exec(select(JobEvent).where(JobEvent.job_id == sweep.id))
        ]
    paper_id = site.job("paper").id
    assert (JobState.PREEMPTED, f"stopped: preempted for core job #{paper_id}") in history
    preempted = [e for e in site.notifier.events if e.kind is EventKind.JOB_PREEMPTED]
    assert {e.name for e in preempted} == {"sweep"}
    assert any(e.code is EventCode.STOPPED_REQUEUED for e in preempted)
    names = [name for _, name, _ in slurm_jobs(live_slurm, slurm_prefix)]
    assert f"{slurm_prefix}{sweep.id}.1.{NODE}" in names
    assert f"{slurm_prefix}{paper_id}.1.{NODE}" in names


class Forgetful(SlurmCommands):
    """Slurm's own clients, but squeue no longer lists the jobs named in `hidden`: as it
    forgets a job that ended longer ago than MinJobAge (300 s here: too long to wait)."""

    hidden: set[str] = set()

    def queue(self) -> tuple[QueuedJob, ...]:
        return tuple(job for job in super().queue() if job.name not in self.hidden)


@SQLITE
def test_a_run_squeue_has_forgotten_is_looked_up_in_slurms_accounting(
    paika: Paika, live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path
) -> None:
    gres = {"T4-16GB": "t4"}
    policy = slurm_policy(paika, live_slurm, slurm_prefix, shared_dir, gres)
    site = open_site(paika, policy, slurm=SlurmPoller(Forgetful))
    Forgetful.hidden = set()
    try:
        submit(site, "long-gone", "sleep 1; exit 3")
        site.until(lambda: site.job("long-gone").confirmed_at is not None, what="its start")
        job_id = site.job("long-gone").id
        name = f"{slurm_prefix}{job_id}.1.{NODE}"
        accounting = SlurmCommands(live_slurm.conf)
        wait_for(
            lambda: [r for r in accounting.ended_runs([name]) if r.ended],
            timeout=60,
            what="slurmdbd to record its end",
        )
        Forgetful.hidden = {name}  # paika never saw it end in squeue
        site.until(lambda: site.job("long-gone").state == JobState.FAILED, what="its end")
        gone = site.job("long-gone")
        assert (gone.exit_code, gone.attempts) == (3, 1)  # not lost, not started again
        assert [n for _, n, _ in slurm_jobs(live_slurm, slurm_prefix)] == [name]
        with Session(site.paika.engine) as session:
            (entry,) = session.exec(select(LedgerEntry).where(LedgerEntry.job_id == job_id))
        assert entry.gpu_hours == pytest.approx(
            next(r for r in accounting.ended_runs([name])).elapsed_seconds / 3600, abs=1e-9
        )
    finally:
        Forgetful.hidden = set()
        site.cycle.close()


@SQLITE
def test_a_run_whose_node_fails_is_lost_and_queued_again_not_failed(
    site: SlurmSite, live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path
) -> None:
    running = shared_dir / "first-run"
    # The first run waits for ever; the second ends at once.
    cmd = f"if [ $PAIKA_ATTEMPT = 1 ]; then touch {running}; while true; do sleep 0.2; done; fi"
    submit(site, "unlucky", cmd)
    site.until(running.exists, what="the first run")
    try:
        # Slurm ends the run NODE_FAIL. (This Slurm has ReturnToService=2: the node is back
        # as soon as its slurmd registers again, and paika may start the job again there.)
        scontrol(live_slurm, "update", f"nodename={NODE}", "state=down", "reason=psu failed")
        site.until(
            lambda: [e for e in site.notifier.events if e.code is EventCode.LOST_REQUEUED],
            what="the run to be lost",
        )
    finally:  # where it is not back by itself (Slurm refuses to resume a node that is up)
        subprocess.run(
            ["scontrol", "update", f"nodename={NODE}", "state=resume"],
            capture_output=True,
            timeout=30,
            env={**os.environ, "SLURM_CONF": live_slurm.conf},
            check=False,
        )
    (lost,) = [e for e in site.notifier.events if e.code is EventCode.LOST_REQUEUED]
    assert lost.detail["why"] == "node_failed"
    assert not [e for e in site.notifier.events if e.kind is EventKind.JOB_FAILED]
    site.until(
        lambda: site.job("unlucky").state == JobState.SUCCEEDED,
        timeout=120,
        what="the second run on the resumed node",
    )
    done = site.job("unlucky")
    assert (done.attempts, done.exit_code) == (2, 0)
    states = {name: state for _, name, state in slurm_jobs(live_slurm, slurm_prefix)}
    assert states == {
        f"{slurm_prefix}{done.id}.1.{NODE}": "NODE_FAIL",
        f"{slurm_prefix}{done.id}.2.{NODE}": "COMPLETED",
    }
