"""A job's command is its owner's: no other user of the host reads it with `ps`.

The agent hands the command to its wrapper in the launch spec (a pipe), never in argv; a
shell job's text reaches /bin/sh through a descriptor, and a container job's through the
runtime client's environment. Each test here failed while the wrapper was started as
`wrapper.py … -- /bin/sh -c "<text>"`: the text was in the argv of the wrapper and of the
shell, for every user's `ps -eo args` to see, and a command over 128 KiB could not start.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_harness import Agent, shutdown_agent, start_agent, wait_for

from scheduler.agent.errors import BadRequest
from scheduler.agent.isolation import Account, RunAs, capability_name
from scheduler.agent.jobs import CONTAINER_SCRIPT_MAX, JobStore
from scheduler.agent.protocol import JobState, StartRequest


def every_processes_args() -> list[str]:
    """What `ps -eo args` shows: each live process's argv, as any user of the host reads it."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                raw = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            found.append(raw.replace(b"\0", b" ").decode(errors="replace"))
    return found


def processes_in_group(group: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.getpgid(int(name)) == group:
                    found.append(int(name))
            except OSError:
                continue
    return found


def test_no_process_shows_a_shell_jobs_command_in_ps(agent: Agent) -> None:
    secret = "s3cret-" + secrets.token_hex(8)
    agent.client.start_job(
        StartRequest(
            job_id="quiet",
            gpus=[0],
            shell=f"TOKEN={secret}; echo started; sleep 30; echo $TOKEN",
        )
    )
    wait_for(lambda: "started" in agent.client.log("quiet").lines, what="the job to start")
    job = agent.client.job("quiet")
    assert job.pid is not None
    # The wrapper, the shell and what it runs: all of the job's processes are up.
    wait_for(lambda: len(processes_in_group(job.pid or 0)) >= 3, what="the job's processes")
    shown = every_processes_args()
    assert [args for args in shown if secret in args] == []
    own = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in processes_in_group(job.pid)]
    assert any(b"/proc/self/fd/3" in args for args in own)  # the shell reads it from there
    # The agent itself keeps the command (its job table, the API), as before.
    assert job.command == ("/bin/sh", "-c", f"TOKEN={secret}; echo started; sleep 30; echo $TOKEN")


def test_a_shell_job_behaves_as_under_sh_c(agent: Agent) -> None:
    script = (
        'echo "zero=$0 args=$#"\n'
        'printf \'<%s>\\n\' "a  b" \'c"d\' "$PAIKA_JOB_ID"\n'
        "if [ -e /proc/self/fd/3 ]; then echo fd3=open; else echo fd3=closed; fi\n"
        "sh -c 'if [ -e /proc/self/fd/3 ]; then echo child-fd3=open; else echo child-fd3=closed; fi'\n"
        "exit 7"
    )
    agent.client.start_job(StartRequest(job_id="same", gpus=[0], shell=script))
    job = agent.wait_ended("same")
    assert (job.state, job.exit_code) == (JobState.EXITED, 7)
    assert agent.client.log("same").lines == (
        "zero=/bin/sh args=0",
        "<a  b>",
        '<c"d>',
        "<same>",
        "fd3=closed",
        "child-fd3=closed",
    )


def test_a_shell_job_stopped_by_a_signal_is_recorded_as_killed(agent: Agent) -> None:
    agent.client.start_job(StartRequest(job_id="stopped", gpus=[0], shell="echo up; sleep 30"))
    wait_for(lambda: "up" in agent.client.log("stopped").lines, what="the job to start")
    agent.client.stop_job("stopped", grace_s=5)
    job = agent.wait_ended("stopped")
    assert (job.state, job.signal) == (JobState.KILLED, signal.SIGTERM.value)


def test_a_command_of_200_kib_runs(agent: Agent) -> None:
    # One argv string is capped at 128 KiB: in argv this command could not even start.
    script = "x='" + "a" * (200 * 1024) + "'\necho ${#x}"
    agent.client.start_job(StartRequest(job_id="long", gpus=[0], shell=script))
    job = agent.wait_ended("long")
    assert (job.state, job.exit_code) == (JobState.EXITED, 0)
    assert agent.client.log("long").lines == (str(200 * 1024),)


# A runtime that runs the container's command here: its argv after the image, with the
# variables --env names taken from its own environment (as docker and podman do).
FAKE_RUNTIME = """#!{python}
import json, os, sys
args = sys.argv[1:]
if args[0] != "run":
    sys.exit(0)
names = [args[i + 1] for i, a in enumerate(args) if a == "--env"]
image = args.index({image!r})
with open({seen!r}, "w") as out:
    json.dump({{"argv": args, "script_env": {{n: os.environ.get(n) for n in names}}}}, out)
inside = {{"PATH": os.environ["PATH"], **{{n: os.environ[n] for n in names}}}}
os.execve(args[image + 1], args[image + 1 :], inside)
"""


@pytest.fixture
def container_agent(tmp_path: Path) -> Iterator[tuple[Agent, Path]]:
    seen = tmp_path / "seen.json"
    runtime = tmp_path / "fake-docker"
    runtime.write_text(
        FAKE_RUNTIME.format(python=sys.executable, image="ubuntu:24.04", seen=str(seen))
    )
    runtime.chmod(0o755)
    agent = start_agent(tmp_path / "state", container_runtime=str(runtime))
    yield agent, seen
    shutdown_agent(agent)


def test_a_container_jobs_command_is_out_of_argv_and_runs_as_under_sh_c(
    container_agent: tuple[Agent, Path],
) -> None:
    agent, seen = container_agent
    secret = "s3cret-" + secrets.token_hex(8)
    script = (
        f"TOKEN={secret}\n"
        'echo "zero=$0 args=$#"\n'
        "printf '<%s>\\n' \"a  b\" 'c\"d'\n"
        'env | grep -c "^PAIKA_SCRIPT=" || true\n'
        "exit 5"
    )
    agent.client.start_job(
        StartRequest(job_id="img-quiet", gpus=[0], shell=script, image="ubuntu:24.04")
    )
    job = agent.wait_ended("img-quiet")
    assert (job.state, job.exit_code) == (JobState.EXITED, 5)
    assert agent.client.log("img-quiet").lines == ("zero=/bin/sh args=0", "<a  b>", '<c"d>', "0")
    call = json.loads(seen.read_text())
    assert secret not in " ".join(call["argv"])
    assert call["script_env"] == {"PAIKA_SCRIPT": script}  # the client's own environment
    image = call["argv"].index("ubuntu:24.04")
    assert call["argv"][image - 2 : image] == ["--env", "PAIKA_SCRIPT"]
    assert call["argv"][image + 1 : image + 3] == ["/bin/sh", "-c"]


def test_a_container_command_over_the_variable_limit_is_refused_saying_why(
    container_agent: tuple[Agent, Path],
) -> None:
    agent, _ = container_agent
    with pytest.raises(BadRequest) as caught:
        agent.client.start_job(
            StartRequest(
                job_id="img-long",
                gpus=[0],
                shell="#" + "a" * CONTAINER_SCRIPT_MAX,
                image="ubuntu:24.04",
            )
        )
    assert caught.value.message.startswith("shell: the command of a container job is")
    assert "Put the script in a file" in caught.value.message
    assert [j.job_id for j in agent.client.jobs()] == []


def test_a_container_takes_no_new_privileges_and_keeps_only_the_sites_capabilities(
    tmp_path: Path,
) -> None:
    request = StartRequest(job_id="c", gpus=[0], argv=["true"], image="ubuntu")
    for caps, added in (((), []), (("SYS_PTRACE", "cap_ipc_lock"), ["SYS_PTRACE", "CAP_IPC_LOCK"])):
        rules = RunAs.for_this_process(allow_root_jobs=True, container_caps=caps)
        store = JobStore(tmp_path / f"state-{len(caps)}", run_as=rules, use_cgroups=False)
        try:
            argv = store.build_command(request, Account.current())
        finally:
            store.close()
        assert argv[argv.index("--security-opt") + 1] == "no-new-privileges"
        assert argv[argv.index("--cap-drop") + 1] == "ALL"
        assert [argv[i + 1] for i, a in enumerate(argv) if a == "--cap-add"] == added
        assert argv.index("--cap-drop") < argv.index("ubuntu")


@pytest.mark.parametrize("bad", ["ALL", "cap_all", "SYS PTRACE", "--privileged", "", "1ABC"])
def test_a_capability_that_is_not_one_name_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="is not one Linux capability"):
        capability_name(bad)


@pytest.mark.xdist_group("unix-accounts")
@pytest.mark.skipif(
    os.geteuid() != 0, reason="making a Unix account and switching to it needs root"
)
def test_a_job_run_as_its_account_hides_its_command_from_other_accounts(tmp_path: Path) -> None:
    """The way hosts run it: a root agent, the job as its owner's account. Its command is in
    no process's argv, and another account can neither read it from the job's descriptor
    nor from its environment."""
    import shutil
    import subprocess
    import tempfile

    if shutil.which("useradd") is None or shutil.which("su") is None:
        pytest.skip("useradd or su is not installed")
    names = [f"pkc{secrets.token_hex(3)}", f"pkd{secrets.token_hex(3)}"]
    # Folders the accounts can pass through (pytest's own are root's alone).
    base = Path(tempfile.mkdtemp(prefix="paika-privacy-"))
    base.chmod(0o755)
    home = base / "homes"
    home.mkdir()
    home.chmod(0o755)
    for name in names:
        subprocess.run(
            ["useradd", "-m", "-d", str(home / name), "-s", "/bin/sh", "-U", name],
            check=True,
            capture_output=True,
            timeout=60,
        )
    agent = start_agent(base / "state")
    try:
        secret = "s3cret-" + secrets.token_hex(8)
        agent.client.start_job(
            StartRequest(
                job_id="owned",
                gpus=[0],
                shell=f"TOKEN={secret}; echo started; sleep 30; echo $TOKEN",
                account=names[0],
            )
        )
        wait_for(lambda: "started" in agent.client.log("owned").lines, what="the job to start")
        job = agent.client.job("owned")
        assert job.pid is not None
        assert [args for args in every_processes_args() if secret in args] == []
        shell = next(
            pid
            for pid in processes_in_group(job.pid)
            if b"/proc/self/fd/3" in Path(f"/proc/{pid}/cmdline").read_bytes()
        )
        probe = (
            f"cat /proc/{shell}/fd/3; cat /proc/{shell}/environ; "
            f"ps -eo args 2>/dev/null; cat /proc/*/cmdline 2>/dev/null; true"
        )
        seen = subprocess.run(
            ["su", "-s", "/bin/sh", names[1], "-c", probe],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert secret not in seen.stdout + seen.stderr
        assert "Permission denied" in seen.stderr
    finally:
        shutdown_agent(agent)
        for name in names:
            subprocess.run(["userdel", "-f", name], capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)
