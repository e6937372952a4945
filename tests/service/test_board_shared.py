"""A shared card on every face of the board: `/gpu board` (console and Block Kit), the App
Home and a snapshot read back (`paika state show | diff`) show it as shared, with each job on
it, its owner and its memory of the card's, and count it once, as in use."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlmodel import Session, select

from bot.blocks.board import board_blocks
from bot.blocks.home import home_view
from bot.console import render
from bot.console_state import exact_moment  # noqa: F401  (registers the snapshot faces)
from scheduler.app import Paika
from scheduler.archive import state
from scheduler.archive.state_diff import DiffField, diff
from scheduler.archive.state_view import snapshot_view
from scheduler.demo import AcceleratedClock, render_board
from scheduler.service import jobs
from scheduler.service.board import BoardResult, CardJob, CardState, TypeSummary
from storage.models import Gpu, Host, Job, JobState, Team
from storage.queries import cluster as cluster_queries

UTC = ZoneInfo("UTC")


def ok(paika: Paika, user: str, text: str) -> object:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply.result


def _job(session: Session, name: str, owner: str, started: datetime, **fields: object) -> Job:
    team = session.exec(select(Team).where(Team.name == "vision")).one()
    job = Job(
        name=name,
        owner=owner,
        team_id=team.id or 0,
        est_gpu_hours=4,
        command="python eval.py",
        state=JobState.RUNNING,
        submitted_at=started,
        started_at=started,
        **fields,  # type: ignore[arg-type]
    )
    session.add(job)
    session.flush()
    return job


@pytest.fixture
def shared(paika: Paika) -> Paika:
    """gpu-01: card 0 shared by eval (20 GiB) and debug (30 GiB), card 1 held whole by
    train, cards 2-3 free; card 0's utilization as the test says."""
    for user in ("UALICE", "UBOB"):
        ok(paika, "UADMIN", f"admin member add <@{user}> team=vision")
    now = paika.clock.now()
    with Session(paika.engine) as session:
        host = Host(name="gpu-01", url="https://gpu-01:8470", state="up", added_at=now)
        session.add(host)
        session.flush()
        cards = [
            Gpu(host_id=host.id or 0, index=i, gpu_type="A100-80GB", memory_gib=80,
                utilization_pct=90.0)
            for i in range(4)
        ]  # fmt: skip
        session.add_all(cards)
        session.flush()
        since = now - timedelta(hours=1)
        share = {"share": True}
        evaluation = _job(session, "eval", "UALICE", since, min_memory_gib=20, **share)
        debug = _job(session, "debug", "UBOB", since, min_memory_gib=30, **share)
        train = _job(session, "train", "UALICE", since)
        for job, card, part in ((evaluation, 0, 250), (debug, 0, 250), (train, 1, 1000)):
            cluster_queries.open_allocation(
                session=session,
                job_id=job.id or 0,
                gpu_id=cards[card].id or 0,
                at=since,
                share_milli=part,
            )
        session.commit()
    return paika


def _board(paika: Paika) -> tuple[BoardResult, str]:
    reply = paika.run("board", "UALICE")
    assert reply.ok and isinstance(reply.result, BoardResult), reply.text
    return reply.result, reply.text


def _slack_text(blocks: list[dict[str, object]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


def test_the_board_names_every_job_on_a_shared_card_and_counts_the_card_once(
    shared: Paika,
) -> None:
    board, text = _board(shared)
    card = board.hosts[0].cards[0]
    assert card.state is CardState.BUSY and card.shared
    since = shared.clock.now() - timedelta(hours=1)
    assert card.jobs == (
        CardJob(1, "eval", "UALICE", "normal", since, 250, 20.0),
        CardJob(2, "debug", "UBOB", "normal", since, 250, 30.0),
    )
    whole = board.hosts[0].cards[1]
    assert not whole.shared and [job.job_id for job in whole.jobs] == [3]
    assert whole.jobs[0].memory_gib == 80
    # Two jobs on one card: one card in use, and it is said to be shared.
    assert board.types == (
        TypeSummary("A100-80GB", total=4, free=2, busy=2, idle_held=0, down=0, shared=1),
    )
    assert "A100-80GB: 4 GPUs · 2 free · 2 busy · 1 shared" in text
    assert (
        "gpu-01: gpu0 ▣ shared: #1 eval (<@UALICE>) 20 of 80 GiB"
        " + #2 debug (<@UBOB>) 30 of 80 GiB · gpu1 ▣ #3 train (<@UALICE>) · gpu2-3 □ free"
    ) in text
    slack = _slack_text(board_blocks(board, "en", UTC, shared.clock.now()))
    assert (
        "gpu0 shared: *#1* eval <@UALICE> 20 of 80 GiB + *#2* debug <@UBOB> 30 of 80 GiB" in slack
    )
    assert "gpu1 *#3* train <@UALICE>" in slack
    assert "🟦 2 busy · 🟨 0 idle · ⬛ 0 unavailable · ⇄ 1 shared" in slack


def test_the_board_says_a_shared_card_in_chinese_and_on_the_app_home(shared: Paika) -> None:
    board, _ = _board(shared)
    text = render(board, UTC, "zh")
    assert (
        "gpu0 ▣ 共享：#1 eval (<@UALICE>) 显存 20/80 GiB + #2 debug (<@UBOB>) 显存 30/80 GiB"
        in text
    )
    assert "共享 1" in text
    now = shared.clock.now()
    slack = _slack_text(board_blocks(board, "zh", UTC, now))
    assert (
        "gpu0 共享：*#1* eval <@UALICE> 显存 20/80 GiB + *#2* debug <@UBOB> 显存 30/80 GiB" in slack
    )
    assert "⇄ 共享 1" in slack
    home = _slack_text(home_view("UALICE", [], board, [], "en", UTC, now)["blocks"])
    assert "gpu0 shared: *#1* eval <@UALICE> 20 of 80 GiB + *#2* debug <@UBOB> 30 of 80 GiB" in home


def test_an_idle_shared_card_marks_its_jobs_idle_once_as_one_card(shared: Paika) -> None:
    with Session(shared.engine) as session:
        card = session.exec(select(Gpu).where(Gpu.index == 0)).one()
        card.utilization_pct = 1.0
        session.add(card)
        session.commit()
    board, text = _board(shared)
    assert board.hosts[0].cards[0].state is CardState.IDLE_HELD
    assert board.types[0].idle_held == 1 and board.types[0].busy == 1
    assert board.types[0].shared == 1
    assert (
        "gpu0 ◌ shared: #1 eval (<@UALICE>) 20 of 80 GiB + #2 debug (<@UBOB>) 30 of 80 GiB idle but held"
        in text
    )
    slack = _slack_text(board_blocks(board, "en", UTC, shared.clock.now()))
    assert "30 of 80 GiB (idle)" in slack


def _document(paika: Paika) -> dict[str, object]:
    with paika.context("UADMIN") as ctx:
        waits = jobs.current_waits(ctx)
    with Session(paika.engine) as session:
        return state.build_document(session, paika.policy, waits, paika.clock.now(), None)


def test_a_snapshot_shows_a_shared_card_with_each_job_and_its_part(shared: Paika) -> None:
    doc = _document(shared)
    view = snapshot_view(doc, shared.policy)
    card = view.board.hosts[0].cards[0]
    assert card.shared and [(job.job_id, job.memory_gib) for job in card.jobs] == [
        (1, 20.0),
        (2, 30.0),
    ]
    assert view.board.types[0].shared == 1 and view.board.types[0].busy == 2
    text = render(view, UTC, "en")
    assert "shared: #1 eval (<@UALICE>) 20 of 80 GiB + #2 debug (<@UBOB>) 30 of 80 GiB" in text
    # The part each job holds is compared too: a job that moved onto a shared card says so.
    before = json.loads(json.dumps(doc))
    allocations = before["allocations"]
    assert isinstance(allocations, dict)
    at = allocations["columns"].index("share_milli")
    for row in allocations["rows"]:
        row[at] = 1000
    found = {(c.subject, c.field): c for c in diff(before, doc).changed}
    assert (found[("#1 eval", DiffField.SHARE)].old, found[("#1 eval", DiffField.SHARE)].new) == (
        None,
        0.25,
    )
    assert ("#3 train", DiffField.SHARE) not in found
    diff_text = render(diff(before, doc), UTC, "en")
    assert "part of a shared card" in diff_text


def test_the_demo_grid_names_each_job_on_a_shared_card(shared: Paika) -> None:
    grid = render_board(shared, AcceleratedClock(shared.clock.now(), 1.0))
    assert "#1+#2   #3   ··   ··" in grid
