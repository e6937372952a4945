"""Jobs run as their owners: an admin maps a person (or a team) to a Unix account, the job
keeps the account it was submitted with, and a root agent starts it as that account. A job
of someone mapped to nobody is refused by the agent, or at submit when the policy says so."""

from __future__ import annotations

import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_world import Agent, job, make_cycle, ok, submit, until
from paika_test_accounts import throwaway_account
from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.errors import Problem
from scheduler.notices.events import RecordingObserver
from storage.models import JobEvent

# Unix accounts are made and removed here: one worker at a time edits /etc/passwd.
pytestmark = pytest.mark.xdist_group("unix-accounts")


@pytest.fixture(scope="module")
def account() -> Iterator[pwd.struct_passwd]:
    """A throw-away Unix account with a home of its own."""
    with throwaway_account("pkj") as made:
        yield made


@pytest.fixture
def strict_host(tmp_path: Path) -> Iterator[Agent]:
    """A host whose agent (as root here) never runs a job as root."""
    agent = Agent("gpu-s", "2xA100-80GB", tmp_path / "gpu-s", allow_root_jobs=False)
    agent.start()
    yield agent
    agent.stop_all_jobs()
    agent.stop()


@pytest.fixture
def site(paika: Paika, strict_host: Agent, account: pwd.struct_passwd) -> Paika:
    ok(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    ok(paika, "UADMIN", "admin member add <@UVERA> team=vision")
    ok(paika, "UADMIN", f"admin host add {strict_host.name} url={strict_host.url}")
    said = ok(paika, "UADMIN", f"admin account set <@UALICE> account={account.pw_name}")
    assert f"run as Unix account {account.pw_name}" in said
    return paika


def test_a_mapped_owners_job_runs_as_their_account(
    site: Paika, clock: ManualClock, account: pwd.struct_passwd
) -> None:
    submit(site, "whoami", "id -u > ran-as.txt; id -g >> ran-as.txt")
    assert job(site, "whoami").account == account.pw_name
    # Changing the mapping later does not change whom a submitted job runs as.
    ok(site, "UADMIN", "admin account set <@UALICE> account=someone-else")
    cycle = make_cycle(site, RecordingObserver())
    until(cycle, clock, lambda: job(site, "whoami").state == "succeeded")
    ran_as = (Path(account.pw_dir) / "ran-as.txt").read_text().split()
    assert ran_as == [str(account.pw_uid), str(account.pw_gid)]
    assert (Path(account.pw_dir) / "ran-as.txt").stat().st_uid == account.pw_uid


def test_an_unmapped_owners_job_is_refused_by_a_root_agent_and_says_why(
    site: Paika, clock: ManualClock
) -> None:
    submit(site, "nobody", "true", user="UVERA")
    assert job(site, "nobody").account is None
    cycle = make_cycle(site, RecordingObserver())

    def refused_with_a_reason() -> bool:
        with Session(site.engine) as session:
            reasons = session.exec(
                select(JobEvent.reason).where(JobEvent.job_id == job(site, "nobody").id)
            ).all()
        return any("account" in (reason or "") for reason in reasons)

    until(cycle, clock, refused_with_a_reason)
    assert job(site, "nobody").state in ("queued", "waiting_data")


def test_when_the_policy_requires_an_account_an_unmapped_job_is_refused_at_submit(
    site: Paika,
) -> None:
    site.policy = site.policy.model_copy(
        update={"accounts": site.policy.accounts.model_copy(update={"required": True})}
    )
    reply = site.run('submit name=x gpus=1 hours=1 priority=normal data=ready cmd="true"', "UVERA")
    assert not reply.ok and reply.error is not None
    assert reply.error.problem is Problem.NO_ACCOUNT
    assert "/gpu admin account set <@UVERA> account=" in reply.text
    # A team's shared account covers its members who have none of their own.
    ok(site, "UADMIN", "admin account set team=vision account=visionrun")
    submit(site, "shared", "true", user="UVERA")
    assert job(site, "shared").account == "visionrun"
