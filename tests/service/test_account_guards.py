"""/gpu admin account set refuses to map a person to an account named as a system account
(root, daemon, www-data, systemd-…, the privileged groups' names) unless force=yes, which
the audit trail records. The hosts' agents refuse such accounts by uid and groups; this says
so when the mapping is made, not when a job is held. Before, any such mapping was taken."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select
from test_jobs_flow import gpu

from scheduler.app import Paika
from scheduler.errors import Problem
from scheduler.service.accounts import system_account_name
from storage.models import AuditEvent


@pytest.mark.parametrize(
    "name", ["root", "daemon", "www-data", "systemd-network", "_apt", "docker", "Sudo"]
)
def test_system_names(name: str) -> None:
    assert system_account_name(name)


@pytest.mark.parametrize("name", ["alice", "root2", "vision-runs", "dockerized", "binh"])
def test_peoples_names(name: str) -> None:
    assert not system_account_name(name)


def test_mapping_to_a_system_account_needs_force_and_is_audited_as_forced(paika: Paika) -> None:
    gpu(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    reply = paika.run("admin account set <@UALICE> account=daemon", "UADMIN")
    assert reply.error is not None and reply.error.problem is Problem.ACCOUNT_SYSTEM
    assert "daemon is the name of a system account" in reply.text
    assert "add force=yes" in reply.text
    assert "No Unix accounts are mapped" in gpu(paika, "UADMIN", "admin account list").text
    gpu(paika, "UADMIN", "admin account set <@UALICE> account=daemon force=yes")
    assert gpu(paika, "UADMIN", "admin account list").text == "<@UALICE> → daemon"
    gpu(paika, "UADMIN", "admin account set team=vision account=visionrun force=yes")
    with Session(paika.engine) as session:
        events = session.exec(
            select(AuditEvent).where(AuditEvent.action == "account.set").order_by(AuditEvent.id)
        ).all()
    assert [(e.target_id, (e.detail or {}).get("forced")) for e in events] == [
        ("UALICE", True),
        ("vision", None),  # force=yes on an ordinary name forces nothing
    ]
