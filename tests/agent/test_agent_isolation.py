"""Jobs run as their owners and cannot touch paika or each other.

A real `paika agent` process runs as root on loopback (as CI runs); the tests make throw-away
Unix accounts and submit jobs for them. Each attack a job could make before isolation is
tried by a job here, and must fail: reading the agent's token, another account's log or the
agent's state, forging an exit code, calling the agent's API. Needs root (skipped otherwise).
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from agent_harness import shutdown_agent, start_agent, wait_for

from scheduler.agent.client import AgentClient
from scheduler.agent.errors import AccountRefused, BadRequest
from scheduler.agent.isolation import Account, RunAs, jobs_cgroup_root
from scheduler.agent.jobs import JobStore
from scheduler.agent.protocol import JobInfo, JobState, StartRequest

pytestmark = [
    # Unix accounts are made and removed here: one worker at a time edits /etc/passwd.
    pytest.mark.xdist_group("unix-accounts"),
    pytest.mark.skipif(
        os.geteuid() != 0, reason="making Unix accounts and switching to them needs root"
    ),
]

TOKEN = "isolation-token-" + secrets.token_hex(8)
PLANTED = "planted-" + secrets.token_hex(8)  # in the agent's environment, for no job's eyes
PAIKA = Path(sys.executable).with_name("paika")


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: Path


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def users() -> Iterator[dict[str, User]]:
    """Two accounts (a and b, a also in an extra group), homes in a folder both can reach."""
    if shutil.which("useradd") is None:
        pytest.skip("useradd is not installed")
    base = Path(tempfile.mkdtemp(prefix="paika-isolation-"))
    base.chmod(0o755)
    tag = secrets.token_hex(4)
    extra = f"pkx{tag}"
    made: dict[str, User] = {}
    _run("groupadd", extra)
    try:
        for key in ("a", "b"):
            name = f"pk{key}{tag}"
            more = ["-G", extra] if key == "a" else []
            home = base / name
            _run("useradd", "-m", "-d", str(home), "-s", "/bin/sh", "-U", *more, name)
            entry = pwd.getpwnam(name)
            groups = tuple(sorted(set(os.getgrouplist(name, entry.pw_gid))))
            made[key] = User(name, entry.pw_uid, entry.pw_gid, groups, home)
        assert grp.getgrnam(extra).gr_gid in made["a"].groups
        yield made
    finally:
        for user in made.values():
            # -f: even if a job of a failed test still runs as it
            subprocess.run(["userdel", "-f", user.name], capture_output=True, check=False)
        subprocess.run(["groupdel", extra], capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)


@dataclass
class RealAgent:
    url: str
    client: AgentClient
    process: subprocess.Popen[bytes]
    state_dir: Path
    token_file: Path

    def wait_ended(self, job_id: str, timeout: float = 10.0) -> JobInfo:
        wait_for(
            lambda: self.client.job(job_id).state is not JobState.RUNNING,
            timeout,
            f"job {job_id} to end",
        )
        return self.client.job(job_id)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def real_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealAgent]:
    """`paika agent` as root, with the token both in a file and in its environment (the
    worst case: a job must reach neither), and a secret planted in its environment."""
    folder = tmp_path_factory.mktemp("real-agent")
    token_file = folder / "agent-token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    port = _free_port()
    env = {
        **os.environ,
        "PAIKA_AGENT_TOKEN": TOKEN,
        "PAIKA_AGENT_TOKEN_FILE": str(token_file),
        "PLANTED_SECRET": PLANTED,
    }
    state = folder / "state"
    agent_log = (folder / "agent.log").open("wb")
    process = subprocess.Popen(
        [str(PAIKA), "agent", "--simulate", "4xT4", "--host", "127.0.0.1", "--port", str(port)]
        + ["--state-dir", str(state)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=agent_log,
    )
    url = f"http://127.0.0.1:{port}"
    client = AgentClient(url, TOKEN)

    def up() -> bool:
        assert process.poll() is None, (folder / "agent.log").read_text()
        try:
            client.health()
        except Exception:
            return False
        return True

    try:
        wait_for(up, 60, "the agent to serve")
        yield RealAgent(url, client, process, state, token_file)
    finally:
        if process.poll() is None:
            for job in client.jobs():
                if job.running:
                    client.stop_job(job.job_id, grace_s=0)
            wait_for(lambda: not any(j.running for j in client.jobs()), 10, "the jobs to end")
        client.close()
        process.terminate()
        process.wait(timeout=30)
        agent_log.close()


def _job_id(what: str) -> str:
    return f"{what}-{secrets.token_hex(3)}"


def _start(agent: RealAgent, user: User, shell: str, gpu: int = 0, **more: object) -> str:
    job_id = _job_id("job")
    request = StartRequest(
        job_id=job_id,
        gpus=[gpu],
        shell=shell,
        account=user.name,
        **more,  # type: ignore[arg-type]
    )
    agent.client.start_job(request)
    return job_id


def test_a_job_runs_as_its_account_with_its_groups_in_its_home_and_a_clean_environment(
    real_agent: RealAgent, users: dict[str, User]
) -> None:
    a = users["a"]
    job_id = _start(real_agent, a, "id -u > ids; id -g >> ids; id -G >> ids; pwd > cwd; env > env")
    job = real_agent.wait_ended(job_id)
    assert (job.state, job.exit_code, job.account) == (JobState.EXITED, 0, a.name)
    uid, gid, groups = (a.home / "ids").read_text().splitlines()
    assert (int(uid), int(gid)) == (a.uid, a.gid)
    assert sorted(int(g) for g in groups.split()) == list(a.groups)
    assert (a.home / "cwd").read_text().strip() == str(a.home)
    assert (a.home / "ids").stat().st_uid == a.uid  # what it wrote is its own
    env = dict(line.split("=", 1) for line in (a.home / "env").read_text().splitlines())
    assert (env["USER"], env["LOGNAME"], env["HOME"], env["SHELL"]) == (
        a.name,
        a.name,
        str(a.home),
        "/bin/sh",
    )
    assert env["PAIKA_JOB_ID"] == job_id and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert "PAIKA_AGENT_TOKEN" not in env and "PAIKA_AGENT_TOKEN_FILE" not in env
    assert PLANTED not in (a.home / "env").read_text() and TOKEN not in (a.home / "env").read_text()


def test_a_job_cannot_read_the_agent_token_anywhere(
    real_agent: RealAgent, users: dict[str, User]
) -> None:
    a = users["a"]
    pid = real_agent.process.pid
    script = (
        f"cat /proc/{pid}/environ > environ 2> environ.err; echo $? > environ.rc; "
        f"cat {real_agent.token_file} > file 2> file.err; echo $? > file.rc; "
        f"grep -a -l {TOKEN} /proc/*/environ > found 2>/dev/null; true"
    )
    real_agent.wait_ended(_start(real_agent, a, script))
    for name in ("environ", "file"):
        assert (a.home / f"{name}.rc").read_text().strip() != "0"
        assert "Permission denied" in (a.home / f"{name}.err").read_text()
        assert TOKEN not in (a.home / name).read_text()
    assert (a.home / "found").read_text() == ""  # in no process's environment it can read


def test_a_job_cannot_call_the_agent_api(real_agent: RealAgent, users: dict[str, User]) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    a = users["a"]
    script = (
        f"curl -s -o /dev/null -w '%{{http_code}}' {real_agent.url}/v1/jobs > plain; "
        f"curl -s -o /dev/null -w '%{{http_code}}' -H \"Authorization: Bearer $PAIKA_AGENT_TOKEN\" "
        f"{real_agent.url}/v1/jobs > with-env"
    )
    real_agent.wait_ended(_start(real_agent, a, script))
    assert (a.home / "plain").read_text() == "401"
    assert (a.home / "with-env").read_text() == "401"  # it has no token to send


def test_a_job_cannot_read_or_write_another_accounts_log_nor_the_agents_state(
    real_agent: RealAgent, users: dict[str, User]
) -> None:
    a, b = users["a"], users["b"]
    secret = "b-only-" + secrets.token_hex(4)
    b_job = _start(real_agent, b, f"echo {secret}; sleep 60", gpu=1)
    wait_for(lambda: secret in real_agent.client.log(b_job).text, what="b's job to log")
    b_log = Path(real_agent.client.job(b_job).log_path)
    state = real_agent.state_dir
    probes = {
        "read-log": f"cat {b_log}",
        "write-log": f"echo forged >> {b_log}",
        "list-state": f"ls {state}",
        "list-logs": f"ls {state}/logs",
        "read-table": f"cat {state}/jobs.json",
        "write-table": f"echo {{}} > {state}/jobs.json",
    }
    script = "; ".join(
        f"({cmd}) > {name} 2>&1; echo $? > {name}.rc" for name, cmd in probes.items()
    )
    real_agent.wait_ended(_start(real_agent, a, script, gpu=2))
    for name in probes:
        assert (a.home / f"{name}.rc").read_text().strip() != "0", name
        assert "Permission denied" in (a.home / name).read_text(), name
    assert real_agent.client.log(b_job).lines == (secret,)  # intact, and the agent reads it
    assert (b_log.stat().st_uid, b_log.stat().st_mode & 0o777) == (b.uid, 0o600)
    assert state.stat().st_mode & 0o777 == 0o700
    assert (state / "jobs.json").stat().st_mode & 0o777 == 0o600
    real_agent.client.stop_job(b_job, grace_s=0)
    real_agent.wait_ended(b_job)


def test_a_job_cannot_forge_an_exit_code_or_kill_another_accounts_job(
    real_agent: RealAgent, users: dict[str, User]
) -> None:
    a, b = users["a"], users["b"]
    victim = _start(real_agent, b, "sleep 60", gpu=3)
    victim_pid = real_agent.client.job(victim).pid
    exits = real_agent.state_dir / "exits"
    forged = json.dumps({"exit_code": 0, "signal": None, "ended_at": 1.0})
    script = (
        f"{{ echo '{forged}' > {exits}/{victim}.json; }} 2> other.err; "
        f"{{ echo '{forged}' > {exits}/\"$PAIKA_JOB_ID\".json; }} 2> own.err; "
        f"kill -KILL -- -{victim_pid} 2> kill.err; kill -KILL {victim_pid} 2>> kill.err; exit 3"
    )
    attacker = _start(real_agent, a, script, gpu=0)
    job = real_agent.wait_ended(attacker)
    assert (job.state, job.exit_code) == (JobState.EXITED, 3)  # the real code, not the forged 0
    for name in ("other.err", "own.err"):
        assert "Permission denied" in (a.home / name).read_text()
    assert "not permitted" in (a.home / "kill.err").read_text()
    assert real_agent.client.job(victim).state is JobState.RUNNING
    real_agent.client.stop_job(victim, grace_s=5)
    ended = real_agent.wait_ended(victim)
    assert (ended.state, ended.signal, ended.exit_code) == (JobState.KILLED, 15, None)


def test_the_agent_refuses_root_jobs_unknown_accounts_and_unwritable_workdirs(
    real_agent: RealAgent, users: dict[str, User]
) -> None:
    client = real_agent.client
    with pytest.raises(AccountRefused) as no_account:
        client.start_job(StartRequest(job_id=_job_id("r"), gpus=[0], argv=["true"]))
    assert no_account.value.status == 403
    assert "--allow-root-jobs" in no_account.value.message
    with pytest.raises(AccountRefused, match="is root"):
        client.start_job(StartRequest(job_id=_job_id("r"), gpus=[0], argv=["id"], account="root"))
    ghost = "pkghost" + secrets.token_hex(3)
    with pytest.raises(AccountRefused) as unknown:
        client.start_job(StartRequest(job_id=_job_id("u"), gpus=[0], argv=["id"], account=ghost))
    assert f"no Unix account {ghost!r} on this host" in unknown.value.message
    with pytest.raises(BadRequest, match="cannot write to"):
        client.start_job(
            StartRequest(
                job_id=_job_id("w"),
                gpus=[0],
                argv=["id"],
                account=users["a"].name,
                cwd=str(users["b"].home),
            )
        )
    assert not [j for j in client.jobs() if j.job_id.startswith(("r-", "u-", "w-"))]


def test_an_image_job_runs_its_container_as_the_accounts_uid_and_groups(
    tmp_path: Path, users: dict[str, User]
) -> None:
    a = users["a"]
    runtime = tmp_path / "fake-docker"
    runtime.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    runtime.chmod(0o755)
    store = JobStore(tmp_path / "state", container_runtime=str(runtime), use_cgroups=False)
    try:
        store.start(
            StartRequest(job_id="img", gpus=[0], argv=["id"], image="ubuntu", account=a.name)
        )
        wait_for(lambda: store.get("img").state is not JobState.RUNNING)
        argv = json.loads(store.log_tail("img")[0])
    finally:
        store.close()
    at = argv.index("--user")
    extra = [str(g) for g in a.groups if g != a.gid]
    assert argv[at : at + 2 + 2 * len(extra)] == [
        "--user",
        f"{a.uid}:{a.gid}",
        *[arg for g in extra for arg in ("--group-add", g)],
    ]


def test_an_agent_that_is_not_root_runs_jobs_only_as_its_own_user(
    tmp_path: Path, users: dict[str, User]
) -> None:
    a = users["a"]
    own = Account.from_passwd(pwd.getpwnam(a.name))
    rules = RunAs(own)
    assert rules.account_for(None) == own and rules.account_for(a.name) == own
    with pytest.raises(AccountRefused) as caught:
        rules.account_for(users["b"].name)
    assert f"runs jobs only as {a.name!r}, not as {users['b'].name!r}" in caught.value.message
    # ... and over HTTP, as the scheduler would hear it
    agent = start_agent(tmp_path / "state")
    agent.store.run_as = rules
    try:
        with pytest.raises(AccountRefused) as refused:
            agent.client.start_job(
                StartRequest(job_id="x", gpus=[0], argv=["id"], account=users["b"].name)
            )
        assert refused.value.status == 403
    finally:
        shutdown_agent(agent)


def test_each_job_gets_a_cgroup_that_takes_its_stragglers_with_it(
    tmp_path: Path, users: dict[str, User]
) -> None:
    if jobs_cgroup_root(tmp_path) is None:
        pytest.skip("no writable cgroup v2 on this machine")
    a = users["a"]
    agent = start_agent(tmp_path / "state")
    try:
        # A straggler in a session of its own: out of the job's process group.
        script = "cat /proc/self/cgroup > cg; setsid sleep 300 & echo $! > straggler"
        job_id = "cg-1"
        agent.client.start_job(StartRequest(job_id=job_id, gpus=[0], shell=script, account=a.name))
        agent.wait_ended(job_id)
        cgroup = agent.store._jobs[job_id].cgroup
        assert cgroup is not None
        assert (
            (a.home / "cg")
            .read_text()
            .strip()
            .endswith(f"/paika/{Path(cgroup).parent.name}/{job_id}")
        )
        wait_for(lambda: not Path(cgroup).exists(), what="the job's cgroup to go")
        straggler = int((a.home / "straggler").read_text())
        wait_for(lambda: not Path(f"/proc/{straggler}").exists(), what="the straggler to die")
    finally:
        shutdown_agent(agent)


def test_an_older_state_dir_is_tightened_and_still_loads(tmp_path: Path) -> None:
    state = tmp_path / "old"
    (state / "logs").mkdir(parents=True)
    (state / "exits").mkdir()
    record = {
        "job_id": "old-1",
        "gpus": [0],
        "command": ["true"],
        "image": None,
        "cwd": None,
        "pid": None,
        "start_ticks": None,
        "started_at": 1.0,
        "log_path": str(state / "logs" / "old-1.log"),
        "exit_path": str(state / "exits" / "old-1.json"),
        "state": "exited",
        "ended_at": 2.0,
        "exit_code": 0,
    }
    (state / "jobs.json").write_text(json.dumps({"version": 1, "jobs": [record]}))
    (state / "logs" / "old-1.log").write_text("hello\n")
    (state / "exits" / "old-1.json").write_text('{"exit_code": 0}')
    for path in (state, state / "logs", state / "exits"):
        path.chmod(0o755)
    for path in (state / "jobs.json", state / "logs" / "old-1.log", state / "exits" / "old-1.json"):
        path.chmod(0o644)
    with JobStore(state, use_cgroups=False) as store:
        job = store.get("old-1")
        assert (job.state, job.exit_code, job.account) == (JobState.EXITED, 0, None)
        assert store.log_tail("old-1") == ["hello"]
    for path in (state, state / "logs", state / "exits", state / "envs"):
        assert path.stat().st_mode & 0o777 == 0o700, path
    for path in (state / "jobs.json", state / "logs" / "old-1.log", state / "exits" / "old-1.json"):
        assert path.stat().st_mode & 0o777 == 0o600, path
