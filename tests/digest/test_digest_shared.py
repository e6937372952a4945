"""A shared card in the digest: counted once as in use and said to be shared (text, Block
Kit and the picture's summary), drawn as one stripe per job on it in the timeline, and its
idle hours counted once for its type and for each job by its part."""

from __future__ import annotations

import json
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from matplotlib.patches import Rectangle
from sqlalchemy import insert
from sqlmodel import Session, select
from world import SAMPLE, at, people

from bot.blocks.digest import digest_blocks
from bot.digest import picture
from bot.digest.picture import JOB_LABEL, TIMELINE
from bot.digest.text import render_text
from scheduler.app import Paika
from scheduler.digest import Digest, digest_now
from scheduler.digest.model import SegmentKind, TypeCount
from storage.models import Gpu, GpuSample, Host, Job, JobState, Team
from storage.queries import cluster as cluster_queries

UTC = ZoneInfo("UTC")
# T0 is 2026-11-02 09:00 UTC (17:00 in the policy's zone): yesterday is -41 h to -17 h.
IDLE = (-31.0, -28.0)  # yesterday, the shared card read 1%: three hours idle
TODAY_IDLE = (-5.0, -4.0)  # and an hour today, in the picture's last 24 hours


@pytest.fixture
def shared(paika: Paika) -> tuple[Paika, dict[str, int]]:
    """gpu-01: card 0 shared by eval (alice, 20 GiB) and debug (bob, 30 GiB) since -40 h, a
    quarter each; card 1 held whole by train since -40 h; cards 2-3 free. Card 0 idle
    during IDLE, busy otherwise; its samples name eval, as the poll names one of its jobs."""
    people(paika)
    now = paika.clock.now()
    since = at(now, -40)
    ids: dict[str, int] = {}
    with Session(paika.engine) as session:
        vision = session.exec(select(Team).where(Team.name == "vision")).one()
        host = Host(name="gpu-01", url="http://gpu-01:8470", state="up", added_at=at(now, -72))
        session.add(host)
        session.flush()
        cards = [
            Gpu(host_id=host.id or 0, index=i, gpu_type="A100-80GB", memory_gib=80)
            for i in range(4)
        ]
        session.add_all(cards)
        session.flush()
        for name, owner, memory, place, part in (
            ("eval", "UALICE", 20.0, 0, 250),
            ("debug", "UBOB", 30.0, 0, 250),
            ("train", "UALICE", None, 1, 1000),
        ):
            job = Job(
                name=name,
                owner=owner,
                team_id=vision.id or 0,
                est_gpu_hours=60,
                command="python x.py",
                state=JobState.RUNNING,
                submitted_at=since,
                started_at=since,
                attempts=1,
                share=part < 1000,
                min_memory_gib=memory,
            )
            session.add(job)
            session.flush()
            ids[name] = job.id or 0
            cluster_queries.open_allocation(
                session=session,
                job_id=job.id or 0,
                gpu_id=cards[place].id or 0,
                at=since,
                share_milli=part,
            )
        rows = []
        moment = at(now, -41)
        while moment < now:
            hours = (moment - now).total_seconds() / 3600
            held = moment >= since
            idle = any(a <= hours < b for a, b in (IDLE, TODAY_IDLE))
            for index, holder in ((0, ids["eval"]), (1, ids["train"])):
                util = (1.0 if idle and index == 0 else 85.0) if held else 0.0
                rows.append(
                    {
                        "gpu_id": cards[index].id,
                        "at": moment,
                        "utilization_pct": util,
                        "memory_used_gib": 50.0 if held else 0.0,
                        "job_id": holder if held else None,
                    }
                )
            moment += SAMPLE
        session.execute(insert(GpuSample), rows)
        for card in cards:
            card.utilization_pct, card.last_seen_at = 85.0, now - SAMPLE
            session.add(card)
        session.commit()
    return paika, ids


def test_a_shared_card_counts_once_as_in_use_and_is_said_to_be_shared(
    shared: tuple[Paika, dict[str, int]],
) -> None:
    paika, _ = shared
    digest = digest_now(paika)
    assert digest.types == (
        TypeCount("A100-80GB", total=4, free=2, busy=2, idle_held=0, down=0, shared=1),
    )
    assert (digest.total_gpus, digest.free_gpus, digest.shared_gpus) == (4, 2, 1)
    # Stored and read back, as the digest travels.
    assert Digest.from_json(json.loads(json.dumps(digest.to_json()))) == digest
    text = render_text(digest, UTC, "en")
    assert (
        "GPUs: 4 on 1 host · 2 free · 2 busy · 0 idle but held · 0 unavailable · 1 shared" in text
    )
    assert "2 free · 2 busy · 0 idle · 0 unavailable · 1 shared" in text
    assert "共享 1" in render_text(digest, UTC, "zh")
    blocks = json.dumps(digest_blocks(digest, "en", UTC).blocks, ensure_ascii=False)
    assert "⬛ 0 unavailable · ⇄ 1 shared" in blocks
    assert "⇄ 共享 1" in json.dumps(digest_blocks(digest, "zh", UTC).blocks, ensure_ascii=False)


def test_the_timeline_draws_each_job_of_a_shared_card(
    shared: tuple[Paika, dict[str, int]],
) -> None:
    paika, ids = shared
    digest = digest_now(paika)
    row = digest.timeline.rows[0]
    assert (row.job_id, row.also) == (ids["eval"], (ids["debug"],))
    held = [s for s in row.segments if s.kind != SegmentKind.FREE]
    assert held and all((s.job_id, s.also) == (ids["eval"], (ids["debug"],)) for s in held)
    assert any(s.kind == SegmentKind.IDLE for s in held)
    whole = digest.timeline.rows[1]
    assert whole.also == () and all(s.also == () for s in whole.segments)
    figure = picture.draw(digest, "en")
    (axes,) = [a for a in figure.axes if a.get_gid() == TIMELINE]
    # Row 0's held stretches are two stripes, one per job; row 1's are whole bars.
    stripes = {
        round(p.get_height(), 3)
        for p in axes.patches
        if isinstance(p, Rectangle) and 0 <= p.get_y() < 1 and p.get_alpha() in (None, 1.0)
    }
    assert 0.4 in stripes
    labels = [t.get_text() for t in axes.texts if t.get_gid() == JOB_LABEL]
    assert f"#{ids['eval']}+#{ids['debug']}" in labels
    said = [t.get_text() for t in figure.legends[0].get_texts()]
    assert "shared: a stripe per job" in said
    summary = [t.get_text() for t in figure.texts if "GPUs free" in t.get_text()]
    assert summary and summary[0].endswith("· shared cards: 1")


def test_idle_hours_count_a_shared_card_once_and_each_job_by_its_part(
    shared: tuple[Paika, dict[str, int]],
) -> None:
    paika, ids = shared
    idle = digest_now(paika).idle
    # The card was idle three hours: three GPU-hours of its type, not one per job on it.
    assert idle.gpu_hours == pytest.approx(3.0)
    assert idle.by_type == {"A100-80GB": pytest.approx(3.0)}
    # Each job held its quarter of the card idle for those hours.
    found = sorted(idle.jobs, key=lambda job: job.job_id)
    assert [(job.job_id, job.owner, job.gpu_type) for job in found] == [
        (ids["eval"], "UALICE", "A100-80GB"),
        (ids["debug"], "UBOB", "A100-80GB"),
    ]
    assert [job.gpu_hours for job in found] == [pytest.approx(0.75), pytest.approx(0.75)]
    assert idle.job_count == 2


def test_a_whole_card_digest_keeps_its_look(paika: Paika) -> None:
    people(paika)
    digest = digest_now(paika)
    figure = picture.draw(digest, "en")
    said = [t.get_text() for t in figure.legends[0].get_texts()]
    assert "shared: a stripe per job" not in said
    assert "shared" not in render_text(digest, UTC, "en")
    assert timedelta(0) <= paika.clock.now() - digest.at
