"""/gpu admin account: who runs as which Unix account, set by admins, looked up at submit."""

from __future__ import annotations

from test_jobs_flow import gpu, jobs, refused

from scheduler.app import Paika
from scheduler.config import Accounts
from scheduler.errors import PermissionDenied, Problem
from scheduler.grammar.errors import Mistake


def _with_policy_accounts(paika: Paika, **accounts: object) -> None:
    paika.policy = paika.policy.model_copy(update={"accounts": Accounts(**accounts)})


def test_a_persons_own_account_wins_over_their_teams_and_the_policy_files(paika: Paika) -> None:
    gpu(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    gpu(paika, "UADMIN", "admin member add <@UBOB> team=vision")
    gpu(paika, "UADMIN", "admin member add <@UNICK> team=nlp")
    _with_policy_accounts(paika, users={"UALICE": "alice-policy"}, teams={"nlp": "nlprun"})
    gpu(paika, "UADMIN", "admin account set team=vision account=visionrun")
    gpu(paika, "UADMIN", "admin account set <@UALICE> account=alice")
    run = 'submit name={} gpus=1 hours=1 priority=normal data=ready cmd="true"'
    for user, name in (("UALICE", "a"), ("UBOB", "b"), ("UNICK", "n")):
        gpu(paika, user, run.format(name))
    found = jobs(paika)
    assert (found["a"].account, found["b"].account, found["n"].account) == (
        "alice",
        "visionrun",
        "nlprun",
    )
    gpu(paika, "UADMIN", "admin account remove <@UALICE>")
    gpu(paika, "UALICE", run.format("a2"))
    assert jobs(paika)["a2"].account == "alice-policy"  # the policy file's, now
    listed = gpu(paika, "UADMIN", "admin account list").text.splitlines()
    assert listed == [
        "team vision → visionrun",
        "<@UALICE> → alice-policy (policy file)",
        "team nlp → nlprun (policy file)",
    ]


def test_only_admins_map_accounts_and_bad_requests_say_what_to_do(paika: Paika) -> None:
    gpu(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    for text in (
        "admin account set <@UALICE> account=root2",
        "admin account list",
        "admin account remove <@UALICE>",
    ):
        reply = paika.run(text, "UALICE")
        assert isinstance(reply.error, PermissionDenied), text
    for text, problem in (
        ("admin account set account=alice", Problem.ACCOUNT_FOR_WHOM),
        ("admin account set <@UALICE> team=vision account=alice", Problem.ACCOUNT_FOR_WHOM),
        ("admin account set <@UALICE> account=-rf", Mistake.BAD_VALUE),  # at the door
        ("admin account set <@UALICE> account=12345", Problem.BAD_ACCOUNT_NAME),
        ("admin account remove <@UALICE>", Problem.NO_ACCOUNT_MAPPING),
        ("admin account set team=nowhere account=x", Problem.TEAM_NOT_FOUND),
    ):
        reply = paika.run(text, "UADMIN")
        assert reply.error is not None and reply.error.problem is problem, (text, reply.text)
    assert "not a Unix user name" in refused(
        paika, "UADMIN", "admin account set <@UALICE> account=12345"
    )
    assert "No Unix accounts are mapped" in gpu(paika, "UADMIN", "admin account list").text
