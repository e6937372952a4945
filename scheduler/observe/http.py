"""GET /metrics and GET /healthz: routes for Slack's HTTP server, or a server of their own
on PAIKA_HTTP_HOST:PAIKA_HTTP_PORT when there is none (Socket Mode, or Slack off)."""

from __future__ import annotations

from collections.abc import Callable

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scheduler.observe.health import Health
from scheduler.observe.metrics import CONTENT_TYPE, ServiceMetrics

METRICS_PATH = "/metrics"
HEALTH_PATH = "/healthz"


def ops_routes(metrics: ServiceMetrics, health: Callable[[], Health]) -> list[Route]:
    """The two routes, to add to another Starlette app."""

    async def get_metrics(request: Request) -> Response:
        # Off the event loop: the backlog count is a database query.
        body = await run_in_threadpool(metrics.exposition)
        return Response(body, media_type=CONTENT_TYPE)

    async def get_health(request: Request) -> Response:
        now = health()
        return JSONResponse(now.as_json(), status_code=200 if now.ok else 503)

    return [
        Route(METRICS_PATH, get_metrics, methods=["GET"]),
        Route(HEALTH_PATH, get_health, methods=["GET"]),
    ]


def ops_app(metrics: ServiceMetrics, health: Callable[[], Health]) -> Starlette:
    """An app serving only the two routes."""
    return Starlette(routes=ops_routes(metrics, health))
