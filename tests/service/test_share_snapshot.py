"""The snapshot tells the policy which waiting jobs accept a shared card (share=yes): what
the submit stored reaches the plan, not only the job's record."""

from __future__ import annotations

from sqlmodel import Session

from scheduler.app import Paika
from scheduler.snapshots import build_snapshot


def test_a_job_that_accepts_a_shared_card_reaches_the_policy_as_one(paika: Paika) -> None:
    assert paika.run("admin member add <@UALICE> team=vision", "UADMIN").ok
    for text in (
        'submit name=eval gpus=1 hours=1 priority=normal data=ready cmd="true" mem=20 share=yes',
        'submit name=train gpus=1 hours=1 priority=normal data=ready cmd="true" mem=20',
    ):
        assert paika.run(text, "UALICE").ok
    with Session(paika.engine) as session:
        snap = build_snapshot(session, paika.policy, paika.clock.now())
    by_name = dict(zip(("eval", "train"), sorted(snap.pending, key=lambda p: p.id), strict=True))
    assert by_name["eval"].share and by_name["eval"].shares
    assert not by_name["train"].share and not by_name["train"].shares
