"""Need to know: a job's command (where people put secrets) is shown to its team, its
approvers and admins only; host addresses and the member list to admins only."""

from __future__ import annotations

from test_jobs_flow import (
    gpu,
    jobs,
    refused,
    team,  # noqa: F401 (the fixture)
)

from scheduler.app import Paika
from scheduler.errors import Action, PermissionDenied, Problem
from scheduler.service.jobs import StatusResult

SECRET_RUN = 'submit name=secret gpus=1 hours=2 priority=normal data=ready cmd="python train.py --token hf_SECRET"'


def _status(paika: Paika, user: str, job_id: int) -> StatusResult:
    reply = gpu(paika, user, f"status #{job_id}")
    assert isinstance(reply.result, StatusResult)
    return reply.result


def test_only_the_team_its_approvers_and_admins_see_a_jobs_command(team: Paika) -> None:  # noqa: F811
    gpu(team, "UALICE", SECRET_RUN)
    job_id = jobs(team)["secret"].id or 0
    for reader in ("UALICE", "UBOB", "UVERA", "UADMIN"):  # owner, teammate, approver, admin
        seen = _status(team, reader, job_id)
        assert seen.shows_command and "hf_SECRET" in seen.view.job.command, reader
    for stranger in ("UNICK", "USTRANGER"):  # another team's member, someone in no team
        seen = _status(team, stranger, job_id)
        assert not seen.shows_command and seen.view.job.command == "", stranger
        text = team.run(f"status #{job_id}", stranger).text
        assert "hf_SECRET" not in text and "python train.py" not in text, stranger
        assert "(hidden: only the job's team, its approvers and admins see it)" in text


def test_host_addresses_and_the_member_list_are_for_admins(team: Paika) -> None:  # noqa: F811
    gpu(team, "UADMIN", "admin host add gpu-07 url=http://10.0.0.7:8470")
    assert "10.0.0.7" in gpu(team, "UADMIN", "admin host list").text
    assert "UALICE" in gpu(team, "UADMIN", "admin member list").text
    for user in ("UALICE", "UVERA", "USTRANGER"):
        for text, action in (
            ("admin host list", Action.LIST_HOSTS),
            ("admin member list", Action.LIST_MEMBERS),
        ):
            reply = team.run(text, user)
            assert not reply.ok and isinstance(reply.error, PermissionDenied), (user, text)
            assert reply.error.problem is Problem.ADMINS_ONLY
            assert reply.error.values == {"action": action}
            assert "10.0.0.7" not in reply.text and "UALICE" not in reply.text
    assert "Only admins can list hosts." in refused(team, "UALICE", "admin host list")


def test_slack_shows_a_stranger_no_command_either(team: Paika) -> None:  # noqa: F811
    import json
    from datetime import UTC, datetime

    from bot.replying import message_for

    gpu(team, "UALICE", SECRET_RUN)
    job_id = jobs(team)["secret"].id or 0
    now = datetime.now(UTC)
    for lang in ("en", "zh"):
        stranger = message_for(team.run(f"status #{job_id}", "UNICK"), lang, team.policy.zone, now)
        shown = json.dumps(stranger.blocks, ensure_ascii=False) + stranger.text
        assert "hf_SECRET" not in shown and "python train.py" not in shown
        owner = message_for(team.run(f"status #{job_id}", "UALICE"), lang, team.policy.zone, now)
        assert "hf_SECRET" in json.dumps(owner.blocks)
