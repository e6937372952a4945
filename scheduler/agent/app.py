"""The agent's HTTP API: a Starlette application under /v1/ (see protocol.py for the shapes).

`build_app(reader, jobs_store, token)` builds it; nothing happens at import time. Every route
but GET /v1/health needs `Authorization: Bearer <token>`: the one token of this host (a
string, or a TokenFile read again when it changes: below). The check runs before routing, so a
refused request (401) never reaches a handler and changes nothing. Errors are JSON
`{"error": message}` with the status of the AgentError behind them. Request bodies are
bounded in size (413) and JSON nesting (400) before they are parsed: see body.py.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import socket
import stat
import threading
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from scheduler.agent.body import json_text
from scheduler.agent.errors import AgentError, BadRequest, BodyTooLarge, StartsRefused
from scheduler.agent.gpus import GpuReader
from scheduler.agent.jobs import JobStore
from scheduler.agent.observe import metrics_route
from scheduler.agent.protocol import (
    API_VERSION,
    Acked,
    GpuInfo,
    GpuList,
    Health,
    JobAck,
    JobInfo,
    JobList,
    LogTail,
    StartRequest,
    Status,
    StopRequest,
    TokenRevoked,
    WireModel,
)
from scheduler.agent.sampling import Sampler

log = logging.getLogger(__name__)

# --- The one token this agent accepts ----------------------------------------------------
# The one token this agent accepts, from its environment or from a file it watches.
#
# A token file (`PAIKA_AGENT_TOKEN_FILE`) is read again whenever it changes (its size, time or
# inode) and at least once a second anyway (a rewrite within one tick of the file system's
# clock keeps all three), so installing a rotated token on the host takes effect within a
# second, with no restart. A file that goes missing or empty locks the agent: every request needing the token
# is refused until a token is installed again.

REREAD_S = 1.0


class TokenUnavailable(Exception):
    """The token file cannot be read or holds no token; `reason` says what to do."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class FixedToken:
    """A token given once (the environment variable): it never changes."""

    def __init__(self, token: str) -> None:
        if not token.strip():
            raise ValueError("the agent token must not be empty")
        self._token = token.strip().encode()

    def current(self) -> bytes:
        return self._token


class TokenFile:
    """The token in a file, read again when the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._token = b""
        self._read_at = 0.0

    def check(self) -> None:
        """Raise TokenUnavailable when the file is unusable now (missing, empty, or readable
        by others than its owner): for the agent's start, where a bad file is a setup error."""
        self.current()
        mode = os.stat(self.path).st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise TokenUnavailable(
                f"{self.path} can be read by others (mode {stat.S_IMODE(mode):o}); "
                f"run: chmod 600 {self.path}"
            )

    def current(self) -> bytes:
        """The token now in the file; TokenUnavailable when there is none."""
        try:
            info = os.stat(self.path)
        except OSError as exc:
            raise TokenUnavailable(
                f"the agent's token file {self.path} is missing: {exc.strerror}"
            ) from exc
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        now = time.monotonic()
        with self._lock:
            if stamp != self._stamp or now - self._read_at >= REREAD_S:
                self._token = self._read()
                self._stamp, self._read_at = stamp, now
            token = self._token
        if not token:
            raise TokenUnavailable(f"the agent's token file {self.path} is empty")
        return token

    def _read(self) -> bytes:
        try:
            return self.path.read_bytes().strip()
        except OSError as exc:
            raise TokenUnavailable(
                f"the agent's token file {self.path} cannot be read: {exc.strerror}"
            ) from exc


TokenSource = FixedToken | TokenFile


# --- The HTTP API ------------------------------------------------------------------------

HEALTH_PATH = "/v1/health"
REVOKE_PATH = "/v1/token/revoke"


def answer(model: WireModel, status_code: int = 200) -> Response:
    """A model as the JSON answer (pydantic writes it: no dict in between)."""
    return Response(model.to_json(), status_code=status_code, media_type="application/json")


def agent_version() -> str:
    try:
        return version("paika")
    except PackageNotFoundError:
        return "0+unknown"


class RevokedTokens:
    """Tokens the scheduler revoked, by SHA-256, kept in the agent's private state dir: the
    agent refuses them even while its token file still holds one (an admin revoked a leaked
    token before a new one is installed)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            self._hashes = set(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            self._hashes = set()
        except (OSError, ValueError) as exc:
            raise AgentError(None, f"cannot read the revoked tokens {path}: {exc}") from exc

    @staticmethod
    def digest(token: bytes) -> str:
        return hashlib.sha256(token).hexdigest()

    def __contains__(self, token: bytes) -> bool:
        return self.digest(token) in self._hashes

    def add(self, token: bytes) -> None:
        """Refuse `token` from now on, across restarts (on disk before this returns)."""
        with self._lock:
            self._hashes.add(self.digest(token))
            partial = self.path.with_suffix(".partial")
            partial.write_text(json.dumps(sorted(self._hashes)), encoding="utf-8")
            os.chmod(partial, 0o600)
            os.replace(partial, self.path)


class BearerAuth:
    """ASGI middleware: 401 for any request but GET /v1/health without the right token."""

    def __init__(
        self, app: ASGIApp, token: str | TokenSource, revoked: RevokedTokens | None = None
    ) -> None:
        self.app = app
        self._token = FixedToken(token) if isinstance(token, str) else token
        self._revoked = revoked

    def _refusal(self, header: str | None) -> str | None:
        if not header:
            return "missing Authorization header: send 'Authorization: Bearer <agent token>'"
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return "the Authorization header must be 'Bearer <agent token>'"
        try:
            expected = self._token.current()
        except TokenUnavailable as exc:
            log.warning("refused a request: %s", exc.reason)
            return "this agent has no token installed; install this host's token on it"
        if not hmac.compare_digest(given.strip().encode(), expected):
            return "wrong agent token (not this host's current token)"
        if self._revoked is not None and expected in self._revoked:
            return "this token was revoked; install the host's new token (/gpu admin host rotate)"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] != HEALTH_PATH:
            refusal = self._refusal(Headers(scope=scope).get("authorization"))
            if refusal is not None:
                response = JSONResponse(
                    {"error": refusal}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def build_app(
    reader: GpuReader,
    jobs_store: JobStore,
    token: str | TokenSource | None,
    *,
    host: str | None = None,
    simulated: bool | None = None,
    tls: bool = False,
    report_only: bool = False,
) -> Starlette:
    """The agent's ASGI app. `token` None switches authentication off (only for
    `--insecure-no-token` on loopback); an empty token is refused. `tls` is what health
    reports: whether the server in front of it speaks TLS. `report_only`: it serves its
    readings but refuses every start (on a Slurm node, where Slurm alone runs jobs)."""
    if isinstance(token, str) and not token:
        raise ValueError("the agent token must not be empty (None switches auth off)")
    host_name = host or str(getattr(reader, "host", "") or socket.gethostname())
    is_simulated = bool(getattr(reader, "simulated", False)) if simulated is None else simulated
    health = Health(
        status="ok",
        agent_version=agent_version(),
        api_version=API_VERSION,
        host=host_name,
        simulated=is_simulated,
        tls=tls,
        report_only=report_only,
        root=jobs_store.run_as.privileged,
    )

    def read_gpus() -> list[GpuInfo]:
        gpus = reader.read()
        holders = jobs_store.gpu_holders()
        return [g.model_copy(update={"job_id": holders.get(g.index)}) for g in gpus]

    def start(req: StartRequest) -> tuple[JobInfo, bool]:
        if report_only:
            # Before anything else: a job run here would share the cards with Slurm's.
            log.warning("refused to start job %s: this agent is report-only", req.job_id)
            raise StartsRefused(
                f"this agent is report-only (--report-only): it reports {host_name}'s GPUs "
                f"and starts no job; job {req.job_id} was not started"
            )
        # A repeat returns the known job before the GPU check, which may have changed since;
        # a tombstoned id is JobConflict here (and again in start(), under the store's lock).
        known = jobs_store.known(req.job_id)
        if known is not None:
            return known, False
        cards = reader.read()
        indices = {g.index for g in cards}
        missing = [g for g in req.gpus if g not in indices]
        if missing:
            have = ", ".join(str(i) for i in sorted(indices)) or "none"
            raise BadRequest(
                f"gpus: this host has no GPU {', '.join(map(str, missing))} (it has: {have})"
            )
        # A run on MIG instances is bound to them by their UUIDs (see jobs.cuda_devices).
        mig = {g.index: g.mig_uuid for g in cards if g.mig_uuid and g.index in req.gpus}
        return jobs_store.start(req, mig_uuids=mig) if mig else jobs_store.start(req)

    async def get_health(request: Request) -> Response:
        return answer(health)

    async def get_gpus(request: Request) -> Response:
        gpus = await run_in_threadpool(read_gpus)
        return answer(GpuList(host=host_name, gpus=gpus))

    async def get_jobs(request: Request) -> Response:
        jobs = await run_in_threadpool(jobs_store.all_jobs)
        return answer(JobList(jobs=jobs))

    told_whole: list[bool] = []  # whether the log said so once already
    sampler = Sampler()  # each run's peak memory, between status answers

    def read_status(since: str | None) -> Status:
        gpus = read_gpus()
        if since is None:  # a scheduler before cursors: every job, as it always had
            if not told_whole:
                told_whole.append(True)
                log.warning(
                    "polled without a cursor (a scheduler older than this agent?): every "
                    "answer carries every run kept, and runs are forgotten only once a "
                    "scheduler acknowledges them; upgrade the scheduler"
                )
            jobs, cursor, more = jobs_store.all_jobs(), jobs_store.cursor(), False
        else:
            jobs, cursor, more = jobs_store.changes(since)
        samples = sampler.samples(gpus, jobs_store.running_processes())
        if jobs_store.police_shares(samples, gpus):  # those runs' stops are in the next answer
            jobs, cursor, more = (
                (jobs_store.all_jobs(), jobs_store.cursor(), False)
                if since is None
                else jobs_store.changes(since)
            )
        return Status(
            health=health,
            host=host_name,
            gpus=gpus,
            jobs=jobs,
            cursor=cursor,
            more=more,
            disk=jobs_store.disk(),
            samples=samples,
        )

    async def get_status(request: Request) -> Response:
        # Everything one poll needs in one round trip: health, GPUs and jobs (read in one
        # trip to a worker thread: NVML calls block, and each trip costs CPU of its own).
        since = request.query_params.get("since")
        if since is not None and len(since) > 64:
            raise BadRequest(f"since: {since[:70]!r}… is not a cursor this agent gave")
        return answer(await run_in_threadpool(read_status, since))

    async def post_ack(request: Request) -> Response:
        ack = JobAck.from_json(await json_text(request, empty_ok=False))
        acked = await run_in_threadpool(jobs_store.acknowledge, ack.job_ids)
        return answer(Acked(acked=acked))

    async def get_job(request: Request) -> Response:
        job = await run_in_threadpool(jobs_store.get, request.path_params["job_id"])
        return answer(job)

    async def post_job(request: Request) -> Response:
        req = StartRequest.from_json(await json_text(request, empty_ok=False))
        job, created = await run_in_threadpool(start, req)
        return answer(job, 201 if created else 200)

    async def post_stop(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        stop = StopRequest.from_json(await json_text(request, empty_ok=True))
        job = await run_in_threadpool(jobs_store.stop, job_id, stop.grace_s)
        return answer(job, 202)

    async def post_revoke(request: Request) -> Response:
        # Only a caller holding the token reaches here (BearerAuth): it revokes that token.
        given = request.headers["authorization"].partition(" ")[2].strip().encode()
        await run_in_threadpool(revoked.add, given)
        log.warning("the scheduler revoked this agent's token: it is refused from now on")
        return answer(TokenRevoked(revoked=True))

    async def get_log(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        raw = request.query_params.get("lines", "100")
        try:
            lines = int(raw)
        except ValueError:
            raise BadRequest(f"lines: {raw!r} is not a whole number") from None
        tail = await run_in_threadpool(jobs_store.log_tail, job_id, lines)
        return answer(LogTail(job_id=job_id, lines=tuple(tail)))

    async def on_agent_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, AgentError)
        status = exc.status or 500
        if status >= 500:
            log.error("%s %s: %s", request.method, request.url.path, exc.message)
        # After a body refused unread, close the connection: left open, the server would
        # read (and drop) the rest of a body of any size to reach the next request.
        headers = {"Connection": "close"} if isinstance(exc, BodyTooLarge) else None
        return JSONResponse({"error": exc.message}, status_code=status, headers=headers)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = exc.detail or "error"
        if exc.status_code == 404:
            message = f"no such route: {request.method} {request.url.path}"
        elif exc.status_code == 405:
            message = f"method {request.method} not allowed on {request.url.path}"
        return JSONResponse({"error": message}, status_code=exc.status_code, headers=exc.headers)

    routes = [
        Route(HEALTH_PATH, get_health, methods=["GET"]),
        Route("/v1/gpus", get_gpus, methods=["GET"]),
        Route("/v1/status", get_status, methods=["GET"]),
        Route("/v1/jobs", get_jobs, methods=["GET"]),
        Route("/v1/jobs", post_job, methods=["POST"]),
        Route("/v1/jobs/ack", post_ack, methods=["POST"]),
        Route("/v1/jobs/{job_id}", get_job, methods=["GET"]),
        Route("/v1/jobs/{job_id}/stop", post_stop, methods=["POST"]),
        Route("/v1/jobs/{job_id}/log", get_log, methods=["GET"]),
        metrics_route(reader, jobs_store, host_name),
    ]
    revoked = RevokedTokens(jobs_store.state_dir / "revoked-tokens.json")
    if token is not None:
        routes.append(Route(REVOKE_PATH, post_revoke, methods=["POST"]))
    middleware = [] if token is None else [Middleware(BearerAuth, token=token, revoked=revoked)]
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={AgentError: on_agent_error, HTTPException: on_http_error},
    )
