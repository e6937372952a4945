"""What the agent tells its operators: its logs, as text or JSON lines, and GET /metrics.

Both live in one module: the agent starts light on every GPU host (tests/agent counts the
modules it loads), and `paika up` uses the same logging code, so the scheduler and the
agents write one format.

Logs. `PAIKA_LOG_FORMAT=json` writes one JSON object a line, at `PAIKA_LOG_LEVEL`. A line
holds `time` (UTC, ISO 8601), `level`, `logger` and `message`, then every field a log call
passes with `extra=` (the scheduler's are `job_id`, paika's job number, and `host`; the
agent's are `run_id`, its id of a job's run, and `host` on every line), and `exception` with
the traceback when there is one. A value JSON cannot hold is written as its `str()`.

Metrics. This host's GPUs and jobs in Prometheus' text format, read at scrape time through
the same reader and job table as /v1/status, so a scrape shows what a poll would. Behind
the agent's bearer token like every route but /v1/health: the series name the jobs and the
host, and Prometheus sends the token (`authorization:` with `credentials_file:` in its
scrape config). prometheus_client is imported at the first scrape, not when the agent
starts: it adds some thirty modules. A GPU read that fails answers the job series and
`paika_agent_gpu_read_ok 0` rather than an error, so the failure itself is recorded.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from scheduler.agent.errors import AgentError
from scheduler.agent.gpus import GpuReader
from scheduler.agent.jobs import JobStore
from scheduler.agent.protocol import DiskState, GpuInfo, JobInfo, JobState

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

log = logging.getLogger(__name__)

FORMATS = ("text", "json")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Every attribute a LogRecord has of its own; anything else on a record came from `extra=`.
_RECORD_ATTRIBUTES = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}


class LogSettingError(ValueError):
    """PAIKA_LOG_FORMAT or PAIKA_LOG_LEVEL holds a value paika does not know."""


class JsonLines(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRIBUTES and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def checked(log_format: str, level: str) -> tuple[str, int]:
    """The format and the numeric level, or LogSettingError naming the variable and its choices."""
    fmt = log_format.strip().lower() or "text"
    if fmt not in FORMATS:
        raise LogSettingError(
            f"PAIKA_LOG_FORMAT={log_format!r} is not known: use {' or '.join(FORMATS)}"
        )
    name = level.strip().upper() or "INFO"
    if name not in LEVELS:
        raise LogSettingError(
            f"PAIKA_LOG_LEVEL={level!r} is not known: use one of {', '.join(LEVELS)}"
        )
    return fmt, logging.getLevelNamesMapping()[name]


class Fields(logging.Filter):
    """Puts the same fields on every record that does not carry them (the agent's host)."""

    def __init__(self, fields: Mapping[str, object]) -> None:
        super().__init__()
        self.fields = dict(fields)

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in self.fields.items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


def configure_logging(
    log_format: str = "text",
    level: str = "INFO",
    *,
    fields: Mapping[str, object] | None = None,
    stream: TextIO | None = None,
) -> None:
    """Send the root logger's records to `stream` (standard error) in the chosen format,
    with `fields` on every JSON line, replacing the handlers it had; raises
    LogSettingError on an unknown format or level."""
    fmt, number = checked(log_format, level)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLines() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    if fields:
        handler.addFilter(Fields(fields))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(number)


# ---------------------------------------------------------------- metrics

METRICS_PATH = "/metrics"
MIB = 1024 * 1024
GPU_LABELS = ("host", "gpu", "uuid", "name")


class AgentCollector:
    """Reads the GPUs and the job table at each scrape (a prometheus_client collector)."""

    def __init__(self, reader: GpuReader, jobs_store: JobStore, host: str) -> None:
        self.reader, self.jobs_store, self.host = reader, jobs_store, host

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        jobs = self.jobs_store.all_jobs()
        try:
            gpus, read_ok = self.reader.read(), 1.0
        except AgentError as exc:
            log.warning("a scrape could not read the GPUs: %s", exc.message)
            gpus, read_ok = [], 0.0
        ok = GaugeMetricFamily(
            "paika_agent_gpu_read_ok", "1 when the GPUs were read for this scrape", labels=["host"]
        )
        ok.add_metric([self.host], read_ok)
        yield ok
        yield from _gpu_families(GaugeMetricFamily, self.host, gpus, _held(jobs))
        counts = GaugeMetricFamily(
            "paika_agent_jobs", "Jobs in the agent's table by state", labels=["host", "state"]
        )
        for state in JobState:
            counts.add_metric([self.host, state.value], sum(j.state is state for j in jobs))
        yield counts
        yield from _disk_families(GaugeMetricFamily, self.host, self.jobs_store.disk())


def _disk_families(family: Any, host: str, disk: DiskState) -> Iterator[Any]:
    """The state dir's filesystem: free bytes, the agent's reserve, and whether it is low."""
    for suffix, documentation, value in (
        ("free_bytes", "Free bytes of the filesystem of the agent's state dir", disk.free_bytes),
        (
            "reserve_bytes",
            "Free bytes job logs never take (--disk-reserve-mib)",
            disk.reserve_bytes,
        ),
        ("low", "1 when the disk is low: the agent takes no new job", float(disk.low)),
    ):
        metric = family(f"paika_agent_disk_{suffix}", documentation, labels=["host"])
        metric.add_metric([host], float(value))
        yield metric


def _held(jobs: list[JobInfo]) -> set[int]:
    return {gpu for job in jobs if job.state is JobState.RUNNING for gpu in job.gpus}


def _gpu_families(family: Any, host: str, gpus: list[GpuInfo], held: set[int]) -> Iterator[Any]:
    """One gauge family per measurement, one series per GPU that reports it."""
    mib = float(MIB)
    measures: tuple[tuple[str, str, Any], ...] = (
        ("utilization_percent", "GPU utilization (NVML), percent", lambda g: g.utilization_pct),
        (
            "memory_used_bytes",
            "GPU memory in use",
            lambda g: None if g.memory_used_mib is None else g.memory_used_mib * mib,
        ),
        (
            "memory_total_bytes",
            "GPU memory in all",
            lambda g: None if g.memory_total_mib is None else g.memory_total_mib * mib,
        ),
        ("temperature_celsius", "GPU temperature", lambda g: g.temperature_c),
        ("power_watts", "GPU power draw", lambda g: g.power_w),
        ("held", "1 when a job this agent runs holds the GPU", lambda g: float(g.index in held)),
    )
    for suffix, documentation, value_of in measures:
        metric = family(f"paika_agent_gpu_{suffix}", documentation, labels=list(GPU_LABELS))
        for gpu in gpus:
            value = value_of(gpu)
            if value is not None:
                metric.add_metric([host, str(gpu.index), gpu.uuid, gpu.name], float(value))
        yield metric


def metrics_route(reader: GpuReader, jobs_store: JobStore, host: str) -> Route:
    """The route serving GET /metrics for this agent."""
    registry: list[CollectorRegistry] = []  # made at the first scrape

    def exposition() -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

        if not registry:
            own = CollectorRegistry(auto_describe=False)
            own.register(AgentCollector(reader, jobs_store, host))
            registry.append(own)
        return generate_latest(registry[0]), CONTENT_TYPE_LATEST

    async def get_metrics(request: Request) -> Response:
        body, content_type = await run_in_threadpool(exposition)
        return Response(body, media_type=content_type)

    return Route(METRICS_PATH, get_metrics, methods=["GET"])
