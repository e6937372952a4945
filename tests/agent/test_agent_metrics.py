"""GET /metrics on the agent: per-GPU series a Prometheus parser reads, behind the token,
and the agent still starts without prometheus_client."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
from agent_harness import TOKEN, Agent, run_paika_counting_modules, wait_for
from prometheus_client.parser import text_string_to_metric_families

from scheduler.agent.app import build_app
from scheduler.agent.errors import GpuReadError
from scheduler.agent.jobs import JobStore
from scheduler.agent.protocol import GpuInfo, StartRequest
from scheduler.serving import serve_in_thread, stop_server

GPU_SERIES = (
    "paika_agent_gpu_utilization_percent",
    "paika_agent_gpu_memory_used_bytes",
    "paika_agent_gpu_memory_total_bytes",
    "paika_agent_gpu_temperature_celsius",
    "paika_agent_gpu_power_watts",
    "paika_agent_gpu_held",
)


def _scrape(url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    response = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.items()))
            found.setdefault(sample.name, {})[labels] = sample.value
    return found


def _of_gpu(series: dict[tuple[tuple[str, str], ...], float], index: int) -> float:
    [value] = [v for labels, v in series.items() if dict(labels)["gpu"] == str(index)]
    return value


def test_metrics_report_each_gpu_and_follow_a_running_job(agent: Agent) -> None:
    before = _scrape(agent.url)
    for name in GPU_SERIES:
        assert len(before[name]) == 6, name  # 4× A100 and 2× T4, one series each
    assert _of_gpu(before["paika_agent_gpu_memory_total_bytes"], 0) == 81920 * 1024 * 1024
    assert _of_gpu(before["paika_agent_gpu_held"], 0) == 0
    labels = dict(next(iter(before["paika_agent_gpu_power_watts"])))
    assert labels["host"] == "test-host" and labels["name"].startswith("NVIDIA")

    agent.client.start_job(StartRequest(job_id="metrics.1", gpus=[0], argv=["sleep", "30"]))
    wait_for(
        lambda: _of_gpu(_scrape(agent.url)["paika_agent_gpu_utilization_percent"], 0) > 50,
        10,
        "GPU 0 to look busy",
    )
    during = _scrape(agent.url)
    assert _of_gpu(during["paika_agent_gpu_held"], 0) == 1
    assert _of_gpu(during["paika_agent_gpu_held"], 1) == 0
    assert _of_gpu(during["paika_agent_gpu_power_watts"], 0) > _of_gpu(
        during["paika_agent_gpu_power_watts"], 1
    )
    jobs = {dict(labels)["state"]: value for labels, value in during["paika_agent_jobs"].items()}
    assert jobs["running"] == 1 and jobs["exited"] == 0
    assert during["paika_agent_gpu_read_ok"] == {(("host", "test-host"),): 1.0}


def test_metrics_need_the_token(agent: Agent) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong-token"}):
        response = httpx.get(f"{agent.url}/metrics", headers=headers)
        assert response.status_code == 401
        assert "paika_agent" not in response.text


class BrokenNvml:
    """A reader whose GPUs cannot be read (a driver that went away)."""

    host = "broken-host"

    def read(self) -> list[GpuInfo]:
        raise GpuReadError("cannot read GPUs: NVML error: GPU is lost")


def test_a_failed_gpu_read_is_a_series_not_an_error(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "state", poll_interval_s=0.05)
    server, thread, port = serve_in_thread(build_app(BrokenNvml(), store, TOKEN))
    try:
        found = _scrape(f"http://127.0.0.1:{port}")
    finally:
        stop_server(server, thread)
        store.close()
    assert found["paika_agent_gpu_read_ok"] == {(("host", "broken-host"),): 0.0}
    assert "paika_agent_gpu_utilization_percent" not in found


def test_the_agent_starts_without_prometheus_client(tmp_path: Path) -> None:
    args = ("agent", "--simulate", "2xT4", "--state-dir", str(tmp_path / "agent"))
    modules = run_paika_counting_modules(sys.executable, *args)["modules"]
    assert isinstance(modules, list)
    assert "scheduler.agent.observe" in modules  # the route is there …
    assert not [m for m in modules if m.startswith("prometheus_client")]  # … its library not yet
