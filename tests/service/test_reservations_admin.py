"""`/gpu admin reserve add | list | cancel` as an admin uses it, every refusal naming the fix;
the team's members see their booking in /gpu queue, others' jobs say why the cards are not
theirs (issue 32)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import Session, select
from test_jobs_flow import gpu, refused

from scheduler.app import Paika
from scheduler.clock import ManualClock
from storage.models import Gpu, Host, TeamReservation


@pytest.fixture
def cluster(paika: Paika) -> Paika:
    """Host gpu-01 with 4 free A100-80GB cards; alice in vision, nick in nlp."""
    now = paika.clock.now()
    with Session(paika.engine) as session:
        host = Host(name="gpu-01", url="http://127.0.0.1:8470", state="up", added_at=now)
        session.add(host)
        session.flush()
        session.add_all(
            Gpu(host_id=host.id or 0, index=i, gpu_type="A100-80GB", memory_gib=80)
            for i in range(4)
        )
        session.commit()
    gpu(paika, "UADMIN", "admin member add <@UALICE> team=vision role=member")
    gpu(paika, "UADMIN", "admin member add <@UNICK> team=nlp role=member")
    return paika


def _at(paika: Paika, delta: timedelta) -> str:
    return (paika.clock.now() + delta).astimezone(paika.policy.zone).strftime("%Y-%m-%dT%H:%M")


def _book(paika: Paika, gpus: int, starts_in: timedelta, lasts: timedelta) -> str:
    return (
        f"admin reserve add gpus={gpus} type=A100-80GB from={_at(paika, starts_in)} "
        f'until={_at(paika, starts_in + lasts)} team=nlp reason="paper deadline"'
    )


def test_an_admin_books_lists_and_cancels_cards_for_a_team(cluster: Paika) -> None:
    added = gpu(cluster, "UADMIN", _book(cluster, 2, timedelta(hours=5), timedelta(hours=8))).text
    assert "Booking 1: 2 × A100-80GB for nlp" in added and "(paper deadline)" in added
    assert "2 × A100-80GB for nlp" in gpu(cluster, "UADMIN", "admin reserve list").text
    # The team sees it in its queue; others do not.
    assert "Booked for nlp: 2 × A100-80GB" in gpu(cluster, "UNICK", "queue").text
    assert "Booked for" not in gpu(cluster, "UALICE", "queue").text
    assert "Cancelled booking 1" in gpu(cluster, "UADMIN", "admin reserve cancel 1").text
    assert gpu(cluster, "UADMIN", "admin reserve list").text == "No cards are booked."
    assert "There is no booking 1" in refused(cluster, "UADMIN", "admin reserve cancel 1")


def test_a_booking_the_cards_cannot_hold_is_refused_with_the_fix(cluster: Paika) -> None:
    gpu(cluster, "UADMIN", _book(cluster, 3, timedelta(hours=5), timedelta(hours=8)))
    text = refused(cluster, "UADMIN", _book(cluster, 2, timedelta(hours=6), timedelta(hours=1)))
    assert "have 4 healthy A100-80GB cards and 3 are booked" in text
    unknown = refused(
        cluster,
        "UADMIN",
        "admin reserve add gpus=1 type=H999 from=2030-01-01T10:00 until=2030-01-01T12:00 "
        'team=nlp reason="x"',
    )
    assert "no GPU type H999" in unknown
    assert "admin" in refused(
        cluster, "UNICK", _book(cluster, 1, timedelta(days=1), timedelta(hours=1))
    )
    with Session(cluster.engine) as session:
        assert len(session.exec(select(TeamReservation)).all()) == 1


def test_another_teams_long_job_says_the_cards_are_booked(
    cluster: Paika, clock: ManualClock
) -> None:
    gpu(cluster, "UADMIN", _book(cluster, 4, timedelta(hours=2), timedelta(hours=8)))
    gpu(
        cluster,
        "UALICE",
        'submit name=long gpus=1 hours=10 priority=normal data=ready cmd="true"',
    )
    status = gpu(cluster, "UALICE", "status long").text
    assert "are booked for nlp" in status
    gpu(
        cluster,
        "UNICK",
        'submit name=theirs gpus=1 hours=10 priority=normal data=ready cmd="true"',
    )
    assert "booked for" not in gpu(cluster, "UNICK", "status theirs").text


def test_the_board_names_the_bookings(cluster: Paika) -> None:
    gpu(cluster, "UADMIN", _book(cluster, 2, timedelta(hours=5), timedelta(hours=8)))
    board = gpu(cluster, "UALICE", "board").text
    assert "Cards booked for teams" in board and "2 × A100-80GB for nlp" in board


def test_the_boards_blocks_with_bookings_are_valid_at_the_least_budget(cluster: Paika) -> None:
    from fake_slack.slack_server import validate_blocks

    from bot.blocks.board import LEAST_BUDGET, board_blocks

    gpu(cluster, "UADMIN", _book(cluster, 2, timedelta(hours=5), timedelta(hours=8)))
    result = gpu(cluster, "UALICE", "board").result
    for budget in (LEAST_BUDGET, 50):
        blocks = board_blocks(result, "zh", cluster.policy.zone, cluster.clock.now(), budget=budget)  # type: ignore[arg-type]
        assert validate_blocks(blocks) == [] and len(blocks) <= budget
