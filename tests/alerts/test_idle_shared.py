"""Idle reclaim on a shared card: the card is idle only as a whole, every job on an idle
shared card is asked (and told who else is), and a job whose neighbour works is never
holding a card idle. The samples name one of a shared card's jobs, as the poll writes them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlmodel import Session, select

from bot.blocks.alerts import idle_ask
from bot.notice_words import sentence
from scheduler import lifecycle
from scheduler.alerts.idle import check_idle, idle_runs
from scheduler.app import Paika
from storage.db import session_scope
from storage.models import Gpu, GpuSample, Host, Job, JobState
from storage.queries import cluster as cluster_queries

WINDOW = 60  # the bundled policy's reclaim.idle_minutes
IDLE = [1.0] * (WINDOW + 5)
BUSY = [80.0] * (WINDOW + 5)


def ok(paika: Paika, user: str, text: str) -> None:
    reply = paika.run(text, user)
    assert reply.ok, reply.text


@pytest.fixture
def vision(paika: Paika) -> Paika:
    for user in ("UALICE", "UBOB"):
        ok(paika, "UADMIN", f"admin member add <@{user}> team=vision")
    return paika


def shared_card(paika: Paika, readings: Sequence[float], *, labelled: str = "eval") -> list[int]:
    """eval (alice) and debug (bob) share one card for two hours, a quarter each; reading i
    was taken i minutes ago and names one of them (`labelled`), as the poll does."""
    for user, name in (("UALICE", "eval"), ("UBOB", "debug")):
        ok(
            paika,
            user,
            f"submit name={name} gpus=1 mem=20 share=yes hours=8 priority=normal data=ready cmd=x",
        )
    now = paika.clock.now()
    since = now - timedelta(hours=2)
    with session_scope(paika.engine) as session:
        host = Host(name="gpu-s", url="http://127.0.0.1:1", state="up", added_at=now)
        session.add(host)
        session.flush()
        gpu = Gpu(host_id=host.id or 0, index=0, gpu_type="A100-80GB", memory_gib=80)
        session.add(gpu)
        session.flush()
        ids = {}
        for name in ("eval", "debug"):
            job = session.exec(select(Job).where(Job.name == name)).one()
            cluster_queries.open_allocation(
                session=session, job_id=job.id or 0, gpu_id=gpu.id or 0, at=since, share_milli=250
            )
            lifecycle.move(session, job, JobState.RUNNING, at=now, actor="scheduler")
            job.attempts = 1
            session.add(job)
            ids[name] = job.id or 0
        session.add_all(
            GpuSample(
                gpu_id=gpu.id or 0,
                at=now - timedelta(minutes=minutes_ago),
                utilization_pct=pct,
                job_id=ids[labelled],
            )
            for minutes_ago, pct in enumerate(readings)
        )
    return [ids["eval"], ids["debug"]]


def idle_now(paika: Paika) -> set[int]:
    with Session(paika.engine) as session:
        return set(idle_runs(session, paika.policy, paika.clock.now()))


def test_an_idle_shared_card_makes_each_job_on_it_idle(vision: Paika) -> None:
    evaluation, debug = shared_card(vision, IDLE)
    # The samples name eval only; debug is on the same idle card all the same.
    assert idle_now(vision) == {evaluation, debug}


def test_a_job_whose_neighbour_works_is_not_holding_the_card_idle(vision: Paika) -> None:
    shared_card(vision, BUSY, labelled="debug")
    assert idle_now(vision) == set()


def test_each_job_on_an_idle_shared_card_is_asked_and_told_who_else_is(vision: Paika) -> None:
    evaluation, debug = shared_card(vision, IDLE, labelled="debug")
    asks = sorted(
        check_idle(vision.engine, vision.policy, vision.clock.now()),
        key=lambda ask: ask.key,
    )
    assert [ask.key for ask in asks] == [f"idle:{evaluation}:1:1", f"idle:{debug}:1:1"]
    assert [ask.to_users for ask in asks] == [("UALICE",), ("UBOB",)]
    assert asks[0].detail["shared_with"] == [{"job_id": debug, "owner": "UBOB"}]
    assert asks[1].detail["shared_with"] == [{"job_id": evaluation, "owner": "UALICE"}]
    assert f"The card is shared with #{debug} <@UBOB>; each job on it is asked." in sentence(
        "en", asks[0]
    )
    assert f"这张卡与 #{evaluation} <@UALICE> 共享" in sentence("zh", asks[1])
    blocks = idle_ask(asks[0], "en", ZoneInfo("UTC")).blocks
    said = str(blocks)
    assert f"The card is shared with *#{debug}* <@UBOB>: it reads idle as a whole" in said
