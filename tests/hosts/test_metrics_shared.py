"""/metrics counts a shared card once, as busy, and says how many cards are shared: those
the snapshot shows with jobs sharing them, and those this cycle's plan starts a share on."""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client.parser import text_string_to_metric_families

from scheduler.cycle import CycleResult
from scheduler.observe.metrics import ServiceMetrics
from scheduler.observe.watch import CycleWatch
from scheduler.policy.plan import Plan, Start
from scheduler.policy.snapshot import Gpu, Host, Snapshot

T0 = datetime(2026, 11, 2, 9, tzinfo=UTC)


def _samples(watch: CycleWatch) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = ServiceMetrics(watch, lambda: 0).exposition().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_a_shared_card_is_one_busy_gpu_and_counted_as_shared() -> None:
    a100 = "A100-80GB"
    host = Host(
        "gpu-01",
        (
            # Two jobs share card 1; card 2 is held whole; card 3 gets a share this cycle.
            Gpu(1, "gpu-01", a100, 80, job_id=11, tenants=(11, 12)),
            Gpu(2, "gpu-01", a100, 80, job_id=13),
            Gpu(3, "gpu-01", a100, 80),
            Gpu(4, "gpu-01", a100, 80),
        ),
        sharing="mps",
    )
    snapshot = Snapshot(now=T0.timestamp(), hosts=(host,), running=(), pending=(), catalog=())
    starts = [Start(14, (3,), ("gpu-01",), a100, None, 0.0, share_milli=250)]  # type: ignore[arg-type]
    watch = CycleWatch()
    watch.cycle_done(CycleResult(at=T0, plan=Plan(tuple(starts), (), {}), snapshot=snapshot))
    found = _samples(watch)
    busy = ("paika_gpus", (("gpu_type", a100), ("state", "busy")))
    free = ("paika_gpus", (("gpu_type", a100), ("state", "free")))
    assert (found[busy], found[free]) == (3.0, 1.0)
    assert found[("paika_gpus_shared", (("gpu_type", a100),))] == 2.0


def test_no_shared_card_no_shared_gauge_sample() -> None:
    host = Host("gpu-01", (Gpu(1, "gpu-01", "T4-16GB", 16, job_id=3),))
    snapshot = Snapshot(now=T0.timestamp(), hosts=(host,), running=(), pending=(), catalog=())
    watch = CycleWatch()
    watch.cycle_done(CycleResult(at=T0, snapshot=snapshot))
    assert not [key for key in _samples(watch) if key[0] == "paika_gpus_shared"]
