"""/gpu logs through Slack: a job's output read from a real simulated agent over HTTP; a short
tail comes back as an escaped code block, a long one as a text file in the asker's DM."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import MEMBER, OTHER, Bot, settled, text_of
from sqlmodel import Session, select

from scheduler.agent.app import build_app
from scheduler.agent.jobs import JobStore
from scheduler.agent.simulated import SimulatedReader
from scheduler.clock import ManualClock
from scheduler.cycle import Cycle
from scheduler.dispatch import AgentDispatcher
from scheduler.hosts.poll import Target, poll_all_sync
from scheduler.hosts.report import HostReport
from scheduler.notices.events import RecordingObserver
from scheduler.serving import serve_in_thread, stop_server
from storage.models import Job, JobState

TOKEN = "test-token-0123456789"
# Every line names the whole channel: in Slack it must stay text, never a ping.
PRINTS = "seq -f 'line-%g &lt;!channel&gt;' 1 300"  # Slack's escapes, as a command's text


@pytest.fixture
def host(team_bot: Bot, tmp_path: Path) -> Iterator[str]:
    """One simulated T4 host served over HTTP, registered, its token known to the commands."""
    store = JobStore(tmp_path / "gpu-b", allow_root_jobs=True)
    reader = SimulatedReader("2xT4-16GB", host="gpu-b", loads=store)
    server, thread, port = serve_in_thread(build_app(reader, store, TOKEN, host="gpu-b"), port=0)
    paika = team_bot.paika
    paika.settings = paika.settings.model_copy(update={"agent_token": TOKEN})
    assert paika.run(f"admin host add gpu-b url=http://127.0.0.1:{port}", "UADMIN").ok
    yield "gpu-b"
    for run in store.all_jobs():
        if run.state == "running":
            store.stop(run.job_id, 0.1)
    stop_server(server, thread)
    store.close()


def _ran(bot: Bot) -> int:
    """A job of MEMBER's that printed 300 lines and finished, through the real cycle."""
    paika = bot.paika
    reply = paika.run(
        f'submit name=printer gpus=1 hours=1 priority=normal data=ready cmd="{PRINTS}"', MEMBER
    )
    assert reply.ok, reply.text

    def poll(targets: Sequence[Target]) -> Mapping[str, HostReport]:
        return poll_all_sync(targets, TOKEN, timeout=2.0)

    cycle = Cycle(
        paika.engine,
        paika.policy,
        paika.clock,
        AgentDispatcher(TOKEN, timeout=2.0),
        RecordingObserver(),
        poll,  # type: ignore[arg-type]
    )
    clock = paika.clock
    assert isinstance(clock, ManualClock)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        clock.advance(timedelta(seconds=5))
        cycle.run_once()
        with Session(paika.engine) as session:
            job = session.exec(select(Job).where(Job.name == "printer")).one()
        if job.state == JobState.SUCCEEDED:
            return job.id or 0
        time.sleep(0.1)
    raise AssertionError("the job did not finish")


def test_a_short_tail_is_an_escaped_code_block_in_the_reply(bot: Bot, host: str) -> None:
    job_id = _ran(bot)
    answer = bot.answer(f"logs {job_id} lines=5")
    shown = text_of(answer)
    assert f"Output of job #{job_id} printer on gpu-b (run 1), last 5 lines" in shown
    assert "```" in shown and "line-300 &lt;!channel&gt;" in shown
    assert "<!channel>" not in shown
    assert "line-295" not in shown and "line-296" in shown
    assert bot.slack.uploads() == []


def test_a_long_tail_arrives_as_a_file_in_the_askers_dm(bot: Bot, host: str) -> None:
    job_id = _ran(bot)
    answer = bot.answer(f"logs {job_id} lines=300")
    assert "attached as a file" in text_of(answer)
    assert settled(lambda: any(upload.completed for upload in bot.slack.uploads()))
    (upload,) = bot.slack.uploads()
    assert upload.filename == f"job-{job_id}-run-1.log"
    assert upload.title == f"Job #{job_id} printer: output on gpu-b"
    assert upload.content is not None
    lines = upload.content.decode().splitlines()
    assert lines[0] == "line-1 <!channel>" and lines[-1] == "line-300 <!channel>"


def test_someone_of_another_team_is_refused_in_slack(bot: Bot, host: str) -> None:
    job_id = _ran(bot)
    refused = text_of(bot.answer(f"logs {job_id}", OTHER))
    assert "can read its output" in refused
    bot.answer("lang zh", OTHER, name="lang")
    assert "查看其输出" in text_of(bot.answer(f"logs {job_id}", OTHER, name="zh"))
