"""`paika up`'s /metrics and /healthz, on the real periodic work: real agents over HTTP, the
real database of each backend, a real HTTP server; then the cycle stops and health says so."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from functools import partial

import httpx
import pytest
from agent_world import Agent, make_cycle, submit
from prometheus_client.parser import text_string_to_metric_families

from scheduler.agent.observe import configure_logging
from scheduler.app import Paika
from scheduler.notices.events import LoggingObserver
from scheduler.notices.outbox import RecordingAnnouncer, backlog
from scheduler.observe.health import check, stale_after
from scheduler.observe.http import ops_app
from scheduler.observe.metrics import ServiceMetrics
from scheduler.observe.watch import CycleWatch
from scheduler.periodic import Periodic
from scheduler.serving import serve_in_thread, stop_server

CYCLE_S, POLL_TIMEOUT_S = 0.3, 1.0
Samples = dict[str, list[tuple[dict[str, str], float]]]


def _wait(check_: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check_():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _scrape(url: str) -> Samples:
    response = httpx.get(f"{url}/metrics", timeout=5)
    assert response.status_code == 200
    found: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def _value(samples: Samples, name: str, **labels: str) -> float:
    return sum(v for got, v in samples.get(name, []) if labels.items() <= got.items())


def _fast(paika: Paika) -> None:
    knobs = paika.policy.scheduler
    hosts = knobs.hosts.model_copy(update={"poll_timeout_seconds": POLL_TIMEOUT_S})
    faster = knobs.model_copy(update={"cycle_seconds": CYCLE_S, "hosts": hosts})
    paika.policy = paika.policy.model_copy(update={"scheduler": faster})


def test_metrics_follow_the_cycles_and_health_turns_503_when_they_stop(
    world: Paika, agents: dict[str, Agent]
) -> None:
    _fast(world)
    for n in range(3):  # one takes both A100s, two wait behind it
        submit(world, f"big-{n}", "sleep 60", gpus=2, extra="type=A100-80GB")
    watch = CycleWatch()
    metrics = ServiceMetrics(watch, lambda: backlog(world.engine, world.clock.now()))
    health = partial(check, watch, stale_after(CYCLE_S, POLL_TIMEOUT_S))
    periodic = Periodic(
        world.engine,
        world.policy,
        world.clock,
        make_cycle(world, LoggingObserver()),
        RecordingAnnouncer(),
        watch=watch,
        after_cycle=metrics.cycle_done,
    )
    server, thread, port = serve_in_thread(ops_app(metrics, health))
    url = f"http://127.0.0.1:{port}"
    logged = io.StringIO()
    configure_logging("json", "INFO", stream=logged)
    periodic.start()
    try:
        _wait(lambda: _value(_scrape(url), "paika_gpus", state="busy") == 2, "a job to start")
        agents["gpu-b"].stop()  # its polls fail from now on
        _wait(
            lambda: _value(_scrape(url), "paika_poll_failures_total", host="gpu-b") >= 2,
            "failed polls of gpu-b to be counted",
        )
        samples = _scrape(url)
        answer = httpx.get(f"{url}/healthz")
        assert answer.status_code == 200, answer.text
        assert answer.json()["leader"] is True and answer.json()["status"] == "ok"

        assert _value(samples, "paika_leader") == 1
        assert abs(_value(samples, "paika_last_cycle_timestamp_seconds") - time.time()) < 30
        assert _value(samples, "paika_cycle_phase_seconds_count", phase="poll") >= 2
        assert _value(samples, "paika_cycle_phase_seconds_count", phase="policy") >= 2
        assert _value(samples, "paika_poll_failures_total", host="gpu-a") == 0
        waiting = [(got, v) for got, v in samples["paika_queue_jobs"] if v]
        assert sum(v for _, v in waiting) == 2
        assert {got["priority"] for got, _ in waiting} == {"normal"}
        assert _value(samples, "paika_gpus", state="busy", gpu_type="A100-80GB") == 2
        assert _value(samples, "paika_gpus", gpu_type="T4-16GB") == 2
        busy = [v for got, v in samples["paika_gpu_utilization_percent"] if got["host"] == "gpu-a"]
        assert len(busy) == 2 and min(busy) > 50  # the job's two GPUs, as the agent reads them
        assert "paika_outbox_backlog" in samples  # the job_started DM, sent or not yet

        periodic.scheduler.pause_job("cycle")  # the cycles stop; the server goes on
        _wait(lambda: httpx.get(f"{url}/healthz").status_code == 503, "health to go stale")
        stale = httpx.get(f"{url}/healthz").json()
        assert stale["status"] == "unhealthy" and stale["leader"] is True
        assert "the last cycle finished" in stale["reason"]
        assert stale["last_cycle_age_s"] > stale["stale_after_s"]
    finally:
        periodic.stop()
        stop_server(server, thread)
        configure_logging("text", "WARNING")
    lines = [json.loads(line) for line in logged.getvalue().splitlines()]
    started = [line for line in lines if line.get("event") == "job_started"]
    assert [line["job_id"] for line in started] == [1]
    silent = [line for line in lines if "did not answer its poll" in line["message"]]
    assert [line["host"] for line in silent] == ["gpu-b"]  # once, not every cycle


@pytest.mark.parametrize(
    ("leading", "ticked", "cycled", "up_for", "ok", "says"),
    [
        (False, None, None, 1.0, True, "starting"),
        (False, None, None, 60.0, False, "no cycle has run"),
        (False, 1.0, None, 60.0, True, "standby"),
        (False, 30.0, None, 60.0, False, "leader lock was last checked"),
        (True, 1.0, None, 2.0, True, "the first cycle is running"),
        (True, 1.0, None, 60.0, False, "no cycle finished"),
        (True, 1.0, 1.0, 60.0, True, "leading"),
        (True, 1.0, 30.0, 60.0, False, "the last cycle finished 30 s ago"),
    ],
)
def test_health_by_case(
    leading: bool,
    ticked: float | None,
    cycled: float | None,
    up_for: float,
    ok: bool,
    says: str,
) -> None:
    from scheduler.observe.watch import CycleSeen

    now = 1000.0
    watch = CycleWatch(started_monotonic=now - up_for, leading=leading)
    watch.last_tick_monotonic = None if ticked is None else now - ticked
    if cycled is not None:
        empty = CycleSeen.__new__(CycleSeen)
        object.__setattr__(empty, "at_wall", time.time() - cycled)
        object.__setattr__(empty, "at_monotonic", now - cycled)
        watch.last_cycle = empty
    health = check(watch, 10.0, now=now)
    assert health.ok is ok and says in health.reason, health.reason
    assert health.leader is leading
