"""The whole `/gpu` experience on a Slurm pool, through Slack: signed slash commands into the
real Bolt app, the real cycle starting the job on the real one-node Slurm, and the owner's
DMs as the fake Slack received them from the outbox's courier (as in `paika up`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import LiveSlurm, wait_for
from fake_slack.slack_server import FakeSlack
from paika_test_slack import Bot, running_bot, text_of
from test_slurm_cycle import NODE, SlurmSite, open_site, slurm_jobs, slurm_policy

from scheduler.app import Paika
from storage.models import HostState, JobState

OWNER = "UALICE"  # open_site maps her to the Unix account `nobody`


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """slack_sdk sends even loopback traffic through a proxy named in the environment."""
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    yield from FakeSlack.serve()


@pytest.fixture
def site(
    paika: Paika, live_slurm: LiveSlurm, slurm_prefix: str, shared_dir: Path
) -> Iterator[SlurmSite]:
    """paika whose only host is the Slurm node, its t4 cards mapped."""
    policy = slurm_policy(paika, live_slurm, slurm_prefix, shared_dir, {"T4-16GB": "t4"})
    site = open_site(paika, policy)
    yield site
    site.cycle.close()


@pytest.fixture
def bot(site: SlurmSite, slack: FakeSlack) -> Iterator[Bot]:
    """The bot on that paika, every notice delivered at once, as `paika up` does."""
    with running_bot(site.paika, slack) as bot:
        yield bot


def dms(bot: Bot) -> list[str]:
    """What the owner read in her DMs, in order."""
    calls = bot.slack.calls("chat.postMessage")
    return [text_of(c.args) for c in calls if c.args.get("channel") == "D" + OWNER and c.ok]


@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_a_job_submitted_in_slack_runs_on_slurm_and_its_owner_is_told_by_dm(
    site: SlurmSite, bot: Bot, live_slurm: LiveSlurm, slurm_prefix: str
) -> None:
    submitted = text_of(
        bot.answer(
            "submit name=from-slack gpus=1 hours=1 priority=normal type=T4-16GB "
            'data=pending cmd="sleep 1"',
            OWNER,
            name="submit",
        )
    )
    found = re.search(r"#(\d+)", submitted)
    assert found is not None, submitted
    job_id = int(found[1])
    site.until(lambda: site.host().state == HostState.UP, what="the node to be read")
    assert site.job("from-slack").state == JobState.WAITING_DATA
    assert slurm_jobs(live_slurm, slurm_prefix) == []  # no data, no card

    bot.answer("ready from-slack", OWNER, name="ready")
    site.until(lambda: site.job("from-slack").state == JobState.SUCCEEDED, what="its end")
    ((_, slurm_name, state),) = slurm_jobs(live_slurm, slurm_prefix)
    assert (slurm_name, state) == (f"{slurm_prefix}{job_id}.1.{NODE}", "COMPLETED")

    def told() -> list[str]:
        said = dms(bot)
        started = [t for t in said if f"#{job_id} from-slack started on {NODE}" in t]
        finished = [t for t in said if f"#{job_id} from-slack finished" in t]
        return said if started and finished else []

    said = wait_for(told, timeout=30, what="the DMs that it started and finished")
    started_at = next(i for i, t in enumerate(said) if "started on" in t)
    finished_at = next(i for i, t in enumerate(said) if "finished" in t)
    assert started_at < finished_at

    status = text_of(bot.answer(f"status {job_id}", OWNER, name="status"))
    assert f"Job #{job_id} from-slack" in status and f"*Ran on*\n{NODE}" in status, status
    assert f"ran on: {NODE}" in site.ok(f"status {job_id}")  # `paika cmd` says it too
    bot.slack.assert_nothing_invalid()
