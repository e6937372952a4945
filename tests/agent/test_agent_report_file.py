"""Each run's report file: private to its account, read as it grows and when the run ends,
kept (bounded) in the job table across an agent restart, and passed up unread in JobInfo."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from agent_harness import PY, Agent, shutdown_agent, start_agent, wait_for

from scheduler.agent.jobs import REPORT_LINES_KEPT
from scheduler.agent.protocol import JobInfo, JobState, StartRequest


def _report_file(agent: Agent, job_id: str) -> Path:
    """The file the agent named to the job (the job prints its variable first)."""
    wait_for(lambda: bool(agent.client.log(job_id).lines), what="the job's first line")
    return Path(agent.client.log(job_id).lines[0])


def test_a_job_reports_lines_that_come_up_in_order_with_its_last_unterminated_one(
    agent: Agent,
) -> None:
    script = (
        'echo "$PAIKA_REPORT_FILE"; '
        'echo "metric=loss:0.5" >> "$PAIKA_REPORT_FILE"; '
        'echo \'{"metrics": {"top1": 76.2}}\' >> "$PAIKA_REPORT_FILE"; '
        'printf "output=s3://ckpt/x status=succeeded" >> "$PAIKA_REPORT_FILE"'
    )
    agent.client.start_job(StartRequest(job_id="r1", gpus=[0], shell=script))
    ended = agent.wait_ended("r1")
    assert (ended.state, ended.exit_code) == (JobState.EXITED, 0)
    assert ended.report_lines == (
        "metric=loss:0.5",
        '{"metrics": {"top1": 76.2}}',
        "output=s3://ckpt/x status=succeeded",
    )
    assert ended.report_first == 1
    path = Path(agent.client.log("r1").lines[0])
    assert not path.exists()  # read to its end, then removed
    folder = path.parent
    assert folder == agent.state_dir.with_name(f"{agent.state_dir.name}-reports")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o711  # passable, not listable
    assert len(path.name) >= 24  # a name nobody can guess


def test_the_report_file_is_the_runs_alone_and_read_while_it_runs(
    agent: Agent, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    script = (
        "import os, time\n"
        "path = os.environ['PAIKA_REPORT_FILE']\n"
        "print(path, flush=True)\n"
        "with open(path, 'a') as out:\n"
        "    out.write('metric=loss:0.9\\n')\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.02)\n"
    )
    agent.client.start_job(StartRequest(job_id="r2", gpus=[1], argv=[PY, "-c", script]))
    path = _report_file(agent, "r2")
    wait_for(lambda: agent.client.job("r2").report_lines == ("metric=loss:0.9",), what="the line")
    info = path.stat()
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert agent.client.job("r2").state is JobState.RUNNING
    go.touch()
    agent.wait_ended("r2")


def test_only_the_last_lines_are_kept_and_the_dropped_ones_are_counted(agent: Agent) -> None:
    script = 'for i in $(seq 1 250); do echo "metric=step:$i" >> "$PAIKA_REPORT_FILE"; done'
    agent.client.start_job(StartRequest(job_id="r3", gpus=[2], shell=script))
    ended = agent.wait_ended("r3")
    assert len(ended.report_lines) == REPORT_LINES_KEPT
    assert ended.report_first == 250 - REPORT_LINES_KEPT + 1
    assert ended.report_lines[0] == f"metric=step:{ended.report_first}"
    assert ended.report_lines[-1] == "metric=step:250"


def test_report_lines_survive_an_agent_restart_and_later_ones_follow(tmp_path: Path) -> None:
    state, go = tmp_path / "state", tmp_path / "go"
    script = (
        "import os, time\n"
        "path = os.environ['PAIKA_REPORT_FILE']\n"
        "with open(path, 'a') as out:\n"
        "    out.write('metric=loss:0.9\\n')\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.02)\n"
        "with open(path, 'a') as out:\n"
        "    out.write('metric=loss:0.3 status=succeeded\\n')\n"
    )
    first = start_agent(state)
    first.client.start_job(StartRequest(job_id="r4", gpus=[0], argv=[PY, "-c", script]))
    wait_for(lambda: first.client.job("r4").report_lines == ("metric=loss:0.9",), what="line 1")
    shutdown_agent(first, kill_jobs=False)
    go.touch()  # it writes its last line and ends while no agent runs
    second = start_agent(state)
    try:
        ended: JobInfo = second.wait_ended("r4")
        assert ended.report_lines == ("metric=loss:0.9", "metric=loss:0.3 status=succeeded")
        assert ended.report_first == 1
    finally:
        shutdown_agent(second)


def test_a_job_that_replaces_its_report_file_with_a_link_is_not_followed(agent: Agent) -> None:
    # As root (tests) the job could write the agent's folder; the agent still never reads
    # through a link, so a job cannot make it pass up a file it may not read itself.
    script = 'ln -sf /etc/passwd "$PAIKA_REPORT_FILE.x" && mv -f "$PAIKA_REPORT_FILE.x" "$PAIKA_REPORT_FILE"'
    agent.client.start_job(StartRequest(job_id="r5", gpus=[3], shell=script))
    ended = agent.wait_ended("r5")
    assert ended.report_lines == ()
    assert os.path.exists("/etc/passwd")
