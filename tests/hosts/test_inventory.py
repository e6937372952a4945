"""Poll reports applied to the database: host health, GPU readings, samples, and a steady
round that writes only what changed."""

from __future__ import annotations

from datetime import timedelta

from sqlmodel import Session, select

from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.hosts.inventory import apply_reports
from scheduler.hosts.report import GpuReading, HostReport
from scheduler.notices.events import EventKind
from storage.models import Gpu, GpuSample, Host, HostState


def card(index: int, *, util: float = 0.0, foreign: dict[int, float] | None = None) -> GpuReading:
    return GpuReading(
        index, f"GPU-{index}", "NVIDIA A100-SXM4-80GB", 80.0, 1.5, util, foreign or {}
    )


def answered(*gpus: GpuReading, version: str = "1.0") -> dict[str, HostReport]:
    return {"gpu-a": HostReport("gpu-a", True, gpus=gpus, agent_version=version)}


def silent() -> dict[str, HostReport]:
    return {"gpu-a": HostReport("gpu-a", False, error="connection refused")}


def apply(paika: Paika, reports: dict[str, HostReport], *, sample: bool = True) -> list[EventKind]:
    with Session(paika.engine) as session:
        events = apply_reports(session, paika.policy, reports, paika.clock.now(), sample=sample)
        session.commit()
    return [event.kind for event in events]


def host(paika: Paika) -> Host:
    with Session(paika.engine) as session:
        return session.exec(select(Host).where(Host.name == "gpu-a")).one()


def gpus(paika: Paika) -> list[Gpu]:
    with Session(paika.engine) as session:
        return list(session.exec(select(Gpu).order_by(Gpu.index)).all())


def samples(paika: Paika) -> int:
    with Session(paika.engine) as session:
        return len(session.exec(select(GpuSample)).all())


def test_reports_keep_hosts_and_cards_true_and_write_only_what_changed(
    paika: Paika, clock: ManualClock
) -> None:
    assert paika.run("admin host add gpu-a url=http://127.0.0.1:9", "UADMIN").ok
    first = clock.now()
    assert apply(paika, answered(card(0), card(1))) == []
    assert host(paika).state == HostState.UP and host(paika).agent_version == "1.0"
    cards = gpus(paika)
    assert [(g.index, g.gpu_type, g.memory_gib, g.healthy) for g in cards] == [
        (0, "A100-80GB", 80.0, True),
        (1, "A100-80GB", 80.0, True),
    ]
    assert samples(paika) == 2

    # Between samples a steady round moves no timestamps and keeps no samples...
    clock.advance(timedelta(seconds=5))
    assert apply(paika, answered(card(0), card(1)), sample=False) == []
    assert host(paika).last_seen_at == first and gpus(paika)[0].last_seen_at == first
    assert samples(paika) == 2
    # ...but a reading that changed is written at once: utilization, and a process paika did
    # not start, which makes the card busy for the policy.
    assert (
        apply(paika, answered(card(0, util=97.0), card(1, foreign={4242: 6.0})), sample=False) == []
    )
    cards = gpus(paika)
    assert cards[0].utilization_pct == 97.0 and cards[1].foreign_memory_gib == 6.0
    # A sampling round moves last-seen and keeps a sample per card.
    clock.advance(timedelta(seconds=60))
    apply(paika, answered(card(0), card(1), version="1.1"))
    assert host(paika).last_seen_at == clock.now() and host(paika).agent_version == "1.1"
    assert samples(paika) == 4

    # A card the agent stops reporting is unhealthy (it fell off the bus).
    apply(paika, answered(card(0)), sample=False)
    assert [g.healthy for g in gpus(paika)] == [True, False]


def test_a_silent_host_degrades_goes_down_once_and_comes_back(
    paika: Paika, clock: ManualClock
) -> None:
    assert paika.run("admin host add gpu-a url=http://127.0.0.1:9", "UADMIN").ok
    apply(paika, answered(card(0)))
    limit = paika.policy.scheduler.hosts.down_after_failed_polls
    kinds = []
    for _ in range(limit - 1):
        kinds += apply(paika, silent(), sample=False)
    assert host(paika).state == HostState.DEGRADED and kinds == []
    clock.advance(timedelta(seconds=5))
    assert apply(paika, silent(), sample=False) == [EventKind.HOST_DOWN]
    down = host(paika)
    assert down.state == HostState.DOWN and down.state_since == clock.now()
    assert down.failed_polls == limit
    assert apply(paika, silent(), sample=False) == []  # one event, not one per poll
    clock.advance(timedelta(seconds=5))
    assert apply(paika, answered(card(0)), sample=False) == [EventKind.HOST_UP]
    back = host(paika)
    assert (back.state, back.failed_polls, back.state_since) == (HostState.UP, 0, clock.now())
