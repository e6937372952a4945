"""GET /metrics and GET /healthz: routes for Slack's HTTP server, or a server of their own
on PAIKA_HTTP_HOST:PAIKA_HTTP_PORT when there is none (Socket Mode, or Slack off).

Beside them, `POST /v1/jobs/{id}/report`: where a running job reports its outputs (`paika
report` inside it), with `Authorization: Bearer <PAIKA_JOB_TOKEN>`, its run's own secret.
Answers: 200 {"job_id", "attempt", "stored"}; 401 no token, or not the current run's token
of that job (another job's, an earlier run's, a forged one); 409 the run has ended; 400 a
body that is not a report; 413 a body over 64 KiB; 429 the run reported its limit in the last
minute (PAIKA_REPORT_RATE_PER_MINUTE), with Retry-After in seconds. Past the run's limit of
rows (PAIKA_REPORT_ROWS_PER_RUN), 200 also says how many were not kept ("dropped", "limit"). An error is {"error": sentence,
"problem": code}, and nothing was stored."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scheduler.clock import Clock
from scheduler.errors import Problem, UserError
from scheduler.observe.health import Health
from scheduler.observe.metrics import CONTENT_TYPE, ServiceMetrics
from scheduler.outputs import BODY_LIMIT, ReportLimits, take_from_job

METRICS_PATH = "/metrics"
HEALTH_PATH = "/healthz"
REPORT_PATH = "/v1/jobs/{job_id:int}/report"
# The HTTP status of each refusal of a report; any other problem is the body's (400).
REFUSALS: dict[object, int] = {
    Problem.JOB_REPORT_TOKEN_REFUSED: 401,
    Problem.JOB_REPORT_RUN_ENDED: 409,
    Problem.JOB_REPORT_TOO_LARGE: 413,
    Problem.JOB_REPORT_RATE_LIMITED: 429,
}


@dataclass(frozen=True)
class ReportDesk:
    """What the report route needs: the database, the clock, and the faces' words for a
    refusal (bot/ says it; the scheduler names only its code)."""

    engine: Engine
    clock: Clock
    words: Callable[[UserError], str]
    limits: ReportLimits = field(default_factory=ReportLimits)


def report_route(desk: ReportDesk) -> Route:
    """POST /v1/jobs/{id}/report (see the module's docstring)."""

    def refused(error: UserError) -> JSONResponse:
        status = REFUSALS.get(error.problem, 400)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        if status == 429:
            headers = {"Retry-After": str(error.values.get("retry_after", 60))}
        body = {"error": desk.words(error), "problem": error.problem.value}
        return JSONResponse(body, status_code=status, headers=headers)

    async def post_report(request: Request) -> Response:
        job_id: int = request.path_params["job_id"]
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return refused(UserError(Problem.JOB_REPORT_TOKEN_REFUSED, id=job_id))
        raw = await _body(request, BODY_LIMIT)
        try:
            stored = await run_in_threadpool(
                take_from_job,
                desk.engine,
                desk.clock.now(),
                job_id,
                token.strip(),
                raw,
                desk.limits,
            )
        except UserError as error:
            return refused(error)
        said = {"job_id": stored.job_id, "attempt": stored.attempt, "stored": stored.rows}
        if stored.dropped:  # past the run's limit of rows: these were not kept
            said.update(dropped=stored.dropped, limit=stored.limit)
        return JSONResponse(said)

    return Route(REPORT_PATH, post_report, methods=["POST"])


async def _body(request: Request, limit: int) -> bytes:
    """The request's body, read no further than one byte past `limit` (from_body refuses it)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return b"\0" * (limit + 1)
    chunks, size = [], 0
    async for chunk in request.stream():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            break
    return b"".join(chunks)


def ops_routes(
    metrics: ServiceMetrics, health: Callable[[], Health], reports: ReportDesk | None = None
) -> list[Route]:
    """The routes, to add to another Starlette app (the report route when `reports` is given)."""

    async def get_metrics(request: Request) -> Response:
        # Off the event loop: the backlog count is a database query.
        body = await run_in_threadpool(metrics.exposition)
        return Response(body, media_type=CONTENT_TYPE)

    async def get_health(request: Request) -> Response:
        now = health()
        return JSONResponse(now.as_json(), status_code=200 if now.ok else 503)

    routes = [
        Route(METRICS_PATH, get_metrics, methods=["GET"]),
        Route(HEALTH_PATH, get_health, methods=["GET"]),
    ]
    return routes if reports is None else [*routes, report_route(reports)]


def ops_app(
    metrics: ServiceMetrics, health: Callable[[], Health], reports: ReportDesk | None = None
) -> Starlette:
    """An app serving only these routes."""
    return Starlette(routes=ops_routes(metrics, health, reports))
