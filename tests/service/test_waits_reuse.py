"""The Home tab's reads share one policy run; outside such a block every read runs it afresh."""

from __future__ import annotations

import pytest

from scheduler.app import Paika
from scheduler.service import jobs
from scheduler.service.board import board
from scheduler.service.context import Context, resolve_actor
from storage.db import session_scope


def test_reads_in_a_reusing_block_run_the_policy_once(
    paika: Paika, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert paika.run("admin member add <@UALICE> team=vision", "UADMIN").ok
    for name in ("a", "b"):
        assert paika.run(
            f'submit name={name} gpus=1 hours=2 priority=normal data=ready cmd="x"', "UALICE"
        ).ok
    runs: list[int] = []
    compute = jobs._compute_waits

    def counted(ctx: Context) -> dict[int, jobs.Wait]:
        runs.append(1)
        return compute(ctx)

    monkeypatch.setattr(jobs, "_compute_waits", counted)
    with session_scope(paika.engine) as session:
        ctx = Context(
            session, paika.clock.now(), paika.policy, resolve_actor(session, "UALICE", paika.admins)
        )
        with jobs.reusing_waits(ctx):
            mine = jobs.queue(ctx, "mine")
            drawn = board(ctx)
        assert len(runs) == 1
        assert [v.job.name for v in mine.waiting] == ["a", "b"]
        # No host is registered: the board counts both waiting, and none is next up (no host
        # can take them).
        assert drawn.waiting_by_class["normal"] == 2 and drawn.next_up == ()
        jobs.queue(ctx, "mine")  # outside the block: a fresh run
        assert len(runs) == 2
