"""A root agent does not run jobs as system accounts or members of privileged groups.

An admin maps people to accounts by name; only the host knows an account's uid and groups,
so the agent refuses (403, saying what to do) unless its operator allowed it. Before, a
mapping to `daemon` or to an account in `docker` or `sudo` ran the job with those powers.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest
from agent_harness import shutdown_agent, start_agent

from scheduler.agent.errors import AccountRefused
from scheduler.agent.isolation import Account, RunAs
from scheduler.agent.protocol import StartRequest

ROOT = Account("root", 0, 0, (0,), "/root", "/bin/sh")


def person(uid: int = 1234, groups: tuple[int, ...] = ()) -> Account:
    return Account("pat", uid, uid, (uid, *groups), "/home/pat", "/bin/sh")


def test_a_persons_own_account_runs() -> None:
    RunAs(ROOT).check_unprivileged(person())


@pytest.mark.parametrize("uid", [1, 999, 65534])
def test_a_system_account_is_refused_unless_the_agent_allows_it(uid: int) -> None:
    with pytest.raises(AccountRefused) as caught:
        RunAs(ROOT).check_unprivileged(person(uid))
    assert caught.value.status == 403
    assert f"is a system account (uid {uid};" in caught.value.message
    assert "--allow-system-accounts" in caught.value.message
    RunAs(ROOT, allow_system_accounts=True).check_unprivileged(person(uid))


def test_a_member_of_a_privileged_group_is_refused_unless_that_group_is_allowed() -> None:
    # gid 0 is the group root on every Linux host: a privileged group.
    member = person(groups=(0,))
    with pytest.raises(AccountRefused) as caught:
        RunAs(ROOT).check_unprivileged(member)
    message = caught.value.message
    assert "'pat' is in the privileged group(s) root" in message
    assert "--allow-group root" in message and "gpasswd -d pat" in message
    RunAs(ROOT, allowed_groups=frozenset({"root"})).check_unprivileged(member)
    # The list is the agent's: a group it does not list is no matter.
    RunAs(ROOT, privileged_groups=("docker",)).check_unprivileged(member)


def test_root_itself_answers_to_allow_root_jobs_alone() -> None:
    RunAs(ROOT, allow_root_jobs=True).check_unprivileged(ROOT)
    assert RunAs(ROOT, allow_root_jobs=True).account_for(None) == ROOT


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root agent switches accounts")
def test_a_start_as_a_system_account_is_a_403_saying_why(tmp_path: Path) -> None:
    try:
        daemon = pwd.getpwuid(1).pw_name
    except KeyError:
        pytest.skip("this host has no account with uid 1")
    agent = start_agent(tmp_path / "state")
    try:
        with pytest.raises(AccountRefused) as caught:
            agent.client.start_job(StartRequest(job_id="d", gpus=[0], argv=["id"], account=daemon))
        assert caught.value.status == 403
        assert caught.value.message.startswith(f"account: {daemon!r} is a system account")
        assert list(agent.client.jobs()) == []
        agent.store.run_as = RunAs(agent.store.run_as.agent, allow_system_accounts=True)
        assert (
            agent.client.start_job(
                StartRequest(job_id="d2", gpus=[0], argv=["true"], account=daemon, cwd="/tmp")
            ).account
            == daemon
        )
    finally:
        shutdown_agent(agent)
