"""The submit modal offers only the teams the member may submit for (issue 29): their own;
an admin, every team."""

from __future__ import annotations

from bot.services import BotServices
from scheduler.app import Paika


def test_the_modal_offers_a_member_only_their_own_team(paika: Paika) -> None:
    for text in (
        "admin member add <@UALICE> team=vision",
        "admin member add <@UNICK> team=nlp",
        "admin team add speech",
    ):
        reply = paika.run(text, "UADMIN")
        assert reply.ok, reply.text
    services = BotServices(paika)
    assert list(services.submit_choices("UALICE").teams) == ["vision"]
    assert list(services.submit_choices("UNICK").teams) == ["nlp"]
    assert sorted(services.submit_choices("UADMIN").teams) == ["nlp", "speech", "vision"]
