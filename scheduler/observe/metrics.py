"""The Prometheus metrics of `paika up`, in a registry the process owns (not the library's
global one, so two services in one test process, or a test and its service, stay apart).

Events are counted as they happen (cycle step durations, poll failures, Slack ack
latency); the rest is read at scrape time from the watch's last frozen values (queue,
GPUs, utilization, leadership, last cycle), plus one COUNT query for the outbox's backlog.
A scrape never takes the scheduler's lock and never runs a query per job or per GPU
(bench/metrics_scrape.py measures one at 2,000 jobs and 256 GPUs).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from scheduler.cycle import CycleResult
from scheduler.observe.watch import CycleWatch

log = logging.getLogger(__name__)

CONTENT_TYPE = CONTENT_TYPE_LATEST
# Cycle steps take from a millisecond (the policy on a small queue) to the poll timeout.
STEP_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# Slack wants an ack within 3 s; what matters is how far below that.
ACK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5)


class ServiceMetrics:
    """Everything /metrics shows for one `paika up` process."""

    def __init__(self, watch: CycleWatch, backlog: Callable[[], int]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.cycle_steps = Histogram(
            "paika_cycle_phase_seconds",
            "Duration of each step of the scheduling cycle",
            ["phase"],
            buckets=STEP_BUCKETS,
            registry=self.registry,
        )
        self.poll_failures = Counter(
            "paika_poll_failures",
            "Polls of a host's agent that got no usable answer",
            ["host"],
            registry=self.registry,
        )
        self.slack_acks = Histogram(
            "paika_slack_ack_seconds",
            "Time from a Slack request's arrival to its ack",
            ["kind"],
            buckets=ACK_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_Current(watch, backlog))

    def cycle_done(self, result: CycleResult) -> None:
        """Count what one cycle did (called by the periodic work after each cycle)."""
        for phase, seconds in result.timings.items():
            self.cycle_steps.labels(phase).observe(seconds)
        for host, report in result.reports.items():
            if not report.ok:
                self.poll_failures.labels(host).inc()

    def slack_acked(self, kind: str, seconds: float) -> None:
        """One Slack request acked after `seconds` (kind: command, action, view, event …)."""
        self.slack_acks.labels(kind).observe(seconds)

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)


class _Current(Collector):
    """The gauges, read at scrape time from the watch's frozen values."""

    def __init__(self, watch: CycleWatch, backlog: Callable[[], int]) -> None:
        self.watch, self.backlog = watch, backlog

    def collect(self) -> Iterator[GaugeMetricFamily]:
        watch = self.watch
        yield GaugeMetricFamily(
            "paika_leader", "1 when this process holds the leader lock", value=float(watch.leading)
        )
        seen = watch.last_cycle
        queue = GaugeMetricFamily(
            "paika_queue_jobs",
            "Waiting jobs by priority class and reason",
            labels=["priority", "reason"],
        )
        gpus = GaugeMetricFamily(
            "paika_gpus", "GPUs by state and type", labels=["state", "gpu_type"]
        )
        shared = GaugeMetricFamily(
            "paika_gpus_shared",
            "Busy GPUs held in parts by jobs that share a card, by type (each card once)",
            labels=["gpu_type"],
        )
        utilization = GaugeMetricFamily(
            "paika_gpu_utilization_percent",
            "GPU utilization as its agent last reported it",
            labels=["host", "gpu", "name"],
        )
        if seen is not None:
            yield GaugeMetricFamily(
                "paika_last_cycle_timestamp_seconds",
                "When the last cycle finished (POSIX time)",
                value=seen.at_wall,
            )
            yield GaugeMetricFamily(
                "paika_last_cycle_errors",
                "Steps of the last cycle that failed",
                value=float(seen.errors),
            )
            for (priority, reason), count in sorted(seen.queue.items()):
                queue.add_metric([priority, reason], float(count))
            for (state, gpu_type), count in sorted(seen.gpus.items()):
                gpus.add_metric([state, gpu_type], float(count))
            for key, percent in sorted(seen.utilization.items()):
                utilization.add_metric(list(key), percent)
            for gpu_type, count in sorted(seen.shared.items()):
                shared.add_metric([gpu_type], float(count))
        yield queue
        yield gpus
        yield shared
        yield utilization
        try:
            pending = float(self.backlog())
        except Exception:  # the database away: the scrape still answers, without this gauge
            log.warning("the outbox backlog could not be counted for /metrics", exc_info=True)
        else:
            yield GaugeMetricFamily(
                "paika_outbox_backlog", "Notices raised and not yet delivered", value=pending
            )
