"""People mapped to one Unix account share everything on the hosts: an admin who maps a
second person (or team) to an account already in use is warned, and the listing marks
shared accounts. Before, the mapping was confirmed as if it kept them apart."""

from __future__ import annotations

from test_jobs_flow import gpu

from bot.said import listed
from scheduler.app import Paika
from scheduler.config import Accounts
from scheduler.results import Listing, Said, SaidCode


def test_mapping_a_second_person_to_an_account_warns_that_they_share_everything(
    paika: Paika,
) -> None:
    gpu(paika, "UADMIN", "admin member add <@UALICE> team=vision")
    gpu(paika, "UADMIN", "admin member add <@UBOB> team=vision")
    first = gpu(paika, "UADMIN", "admin account set <@UALICE> account=labrun")
    assert "Warning" not in first.text
    second = gpu(paika, "UADMIN", "admin account set <@UBOB> account=labrun")
    assert isinstance(second.result, Said)
    assert second.result.code is SaidCode.ACCOUNT_SET_USER_SHARED
    assert second.result.values["others"] == 1
    lines = second.text.splitlines()
    assert lines[0] == "<@UBOB>'s jobs now run as Unix account labrun on the GPU hosts."
    assert "share everything on the hosts: files, processes, tokens" in lines[1]
    assert "/gpu admin account set @someone account=<their own Unix user>" in lines[1]
    # Setting the same mapping again is not a second person.
    again = gpu(paika, "UADMIN", "admin account set <@UALICE> account=labrun")
    assert isinstance(again.result, Said) and again.result.values["others"] == 1
    # A team, and the policy file's mappings, count too.
    paika.policy = paika.policy.model_copy(
        update={"accounts": Accounts(users={"UCAROL": "labrun"}, teams={"nlp": "nlprun"})}
    )
    team = gpu(paika, "UADMIN", "admin account set team=vision account=labrun")
    assert isinstance(team.result, Said)
    assert (team.result.code, team.result.values["others"]) == (
        SaidCode.ACCOUNT_SET_TEAM_SHARED,
        3,
    )
    alone = gpu(paika, "UADMIN", "admin account set <@UDAVE> account=dave")
    assert isinstance(alone.result, Said) and alone.result.code is SaidCode.ACCOUNT_SET_USER


def test_the_listing_marks_accounts_that_more_than_one_person_or_team_runs_as(
    paika: Paika,
) -> None:
    gpu(paika, "UADMIN", "admin account set <@UALICE> account=labrun")
    gpu(paika, "UADMIN", "admin account set <@UBOB> account=bob")
    paika.policy = paika.policy.model_copy(
        update={
            "accounts": Accounts(
                users={"UCAROL": "labrun", "UBOB": "labrun"}, teams={"nlp": "nlprun"}
            )
        }
    )
    rows = gpu(paika, "UADMIN", "admin account list").text.splitlines()
    # Bob's own mapping wins over the policy file's: labrun is Alice's and Carol's.
    assert rows == [
        "<@UALICE> → labrun (shared)",
        "<@UBOB> → bob",
        "<@UBOB> → labrun (policy file, shared)",
        "<@UCAROL> → labrun (policy file, shared)",
        "team nlp → nlprun (policy file)",
    ]
    reply = gpu(paika, "UADMIN", "admin account list")
    assert isinstance(reply.result, Listing)
    assert listed("zh", reply.result)[0] == "<@UALICE> → labrun（共用）"
