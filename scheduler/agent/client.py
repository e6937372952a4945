"""Talking to an agent: AgentClient (sync) and AsyncAgentClient (async), same methods.

    with AgentClient("http://gpu-a:8470", token) as agent:
        agent.health(); agent.gpus(); agent.jobs(); agent.job("42")
        agent.start_job(StartRequest(job_id="42", gpus=[0, 1], argv=["python", "train.py"]))
        agent.stop_job("42", grace_s=30); agent.log("42", lines=100)

Errors are converted here (see errors.py): nothing sent (refused, connect timeout, bad
address) → HostUnreachable(url); sent but no answer (read/write timeout, reset, cut short) →
AnswerLost(url), a HostUnreachable whose request the agent may have acted on;
401 → AgentAuthError; 413 → BodyTooLarge; 400 → BadRequest; 404 → JobNotFound; 409 → JobConflict;
503 → GpuReadError; anything else ≥ 400, or a response that does not parse → AgentError.
"""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from scheduler.agent.errors import (
    AgentError,
    AnswerLost,
    BadRequest,
    HostUnreachable,
    error_for_status,
)
from scheduler.agent.protocol import (
    GpuInfo,
    Health,
    JobInfo,
    LogTail,
    StartRequest,
    StopRequest,
    is_job_id,
)

T = TypeVar("T")


@functools.cache
def shared_tls() -> ssl.SSLContext:
    """One TLS context for every client: building one loads the CA bundle (~30 ms of CPU),
    which per request would serialise polling hundreds of hosts."""
    return httpx.create_ssl_context()


class _Urls(dict[str, httpx.URL]):
    """Absolute URLs by path, parsed once: httpx would parse and merge each path with the
    base URL on every request, which was a third of a poll's CPU across 256 hosts."""

    def __init__(self, base_url: str) -> None:
        super().__init__()
        self.base_url = base_url

    # Paths with job ids are many; only the first few distinct paths (the fixed ones) stay.
    KEEP = 32

    def __missing__(self, path: str) -> httpx.URL:
        url = httpx.URL(self.base_url + path)
        if len(self) < self.KEEP:
            self[path] = url
        return url


# Transport failures before any byte of the request left this side: the agent cannot have
# acted on it. Every other transport failure may come after the agent got the request.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


def transport_failure(base_url: str, exc: httpx.TransportError) -> HostUnreachable:
    """The AgentError for a transport failure: HostUnreachable when nothing reached the agent,
    AnswerLost when the request may have reached it but no answer came back."""
    cls = HostUnreachable if isinstance(exc, _NOT_SENT) else AnswerLost
    return cls(base_url, f"{type(exc).__name__}: {exc}")


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Accept": "application/json"}


def _decode(response: httpx.Response) -> Any:
    """The JSON body of a response, or the AgentError it stands for."""
    try:
        data = response.json()
    except (ValueError, json.JSONDecodeError, RecursionError):
        # (RecursionError: a broken agent's deeply nested answer must not escape as such)
        data = None
    if response.status_code >= 400:
        message = data.get("error") if isinstance(data, dict) else None
        if not isinstance(message, str):
            message = response.text.strip()[:200] or response.reason_phrase
        raise error_for_status(response.status_code, message)
    if data is None:
        raise AgentError(
            response.status_code,
            f"the agent at {response.request.url} sent a response that is not JSON",
        )
    return data


def _parse(response: httpx.Response, parse: Callable[[Any], T]) -> T:
    data = _decode(response)
    try:
        return parse(data)
    except AgentError as exc:  # BadRequest from protocol.from_dict: the agent's fault, not ours
        raise AgentError(
            response.status_code,
            f"the agent at {response.request.url} sent an unexpected response: {exc.message}",
        ) from exc


def _gpus(data: Any) -> list[GpuInfo]:
    return [GpuInfo.from_dict(g) for g in _list_field(data, "gpus")]


def _jobs(data: Any) -> list[JobInfo]:
    return [JobInfo.from_dict(j) for j in _list_field(data, "jobs")]


@dataclass(frozen=True)
class Status:
    """One poll's worth: the agent's health, its GPUs and its jobs."""

    health: Health
    gpus: list[GpuInfo]
    jobs: list[JobInfo]


def _status(data: Any) -> Status:
    if not isinstance(data, dict) or not isinstance(data.get("health"), dict):
        raise AgentError(None, "health: expected an object")
    return Status(Health.from_dict(data["health"]), _gpus(data), _jobs(data))


def _list_field(data: Any, key: str) -> list[Any]:
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, list):
        raise AgentError(None, f"{key}: expected a list")
    return value


def _job_path(job_id: str, suffix: str = "") -> str:
    if not is_job_id(job_id):
        raise BadRequest(f"job_id: {job_id!r} is not a job id")
    return f"/v1/jobs/{job_id}{suffix}"


def _log_params(lines: int) -> dict[str, int]:
    return {"lines": lines}


class AgentClient:
    """A synchronous client for one agent. `transport` replaces the network (tests)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 5.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        transport = transport or httpx.HTTPTransport(verify=shared_tls())
        self._http = httpx.Client(
            base_url=self.base_url, headers=_headers(token), transport=transport, timeout=timeout
        )
        self._urls = _Urls(self.base_url)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> AgentClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._http.request(method, self._urls[path], **kwargs)
        except httpx.TransportError as exc:
            raise transport_failure(self.base_url, exc) from exc

    def health(self) -> Health:
        return _parse(self._request("GET", "/v1/health"), Health.from_dict)

    def gpus(self) -> list[GpuInfo]:
        return _parse(self._request("GET", "/v1/gpus"), _gpus)

    def status(self) -> Status:
        """Health, GPUs and jobs in one request (what the scheduler polls)."""
        return _parse(self._request("GET", "/v1/status"), _status)

    def jobs(self) -> list[JobInfo]:
        return _parse(self._request("GET", "/v1/jobs"), _jobs)

    def job(self, job_id: str) -> JobInfo:
        return _parse(self._request("GET", _job_path(job_id)), JobInfo.from_dict)

    def start_job(self, request: StartRequest) -> JobInfo:
        """Start a job (201), or get the job already known by this id (200: a repeat never
        launches twice, so after AnswerLost send the same request again). JobConflict when
        its GPUs are held, or when a stop for this id came first."""
        return _parse(self._request("POST", "/v1/jobs", json=request.to_dict()), JobInfo.from_dict)

    def stop_job(self, job_id: str, grace_s: float | None = None) -> JobInfo:
        """SIGTERM now, SIGKILL after grace_s (None: the agent's default). Returns at once.
        For an id the agent does not know it records a tombstone, so a start still in
        flight is refused (409) rather than launched."""
        body = StopRequest(grace_s).to_dict()
        return _parse(
            self._request("POST", _job_path(job_id, "/stop"), json=body), JobInfo.from_dict
        )

    def log(self, job_id: str, lines: int = 100) -> LogTail:
        response = self._request("GET", _job_path(job_id, "/log"), params=_log_params(lines))
        return _parse(response, LogTail.from_dict)


class AsyncAgentClient:
    """The same client for asyncio code (httpx.AsyncClient)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 5.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        transport = transport or httpx.AsyncHTTPTransport(verify=shared_tls())
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=_headers(token), transport=transport, timeout=timeout
        )
        self._urls = _Urls(self.base_url)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncAgentClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self._http.request(method, self._urls[path], **kwargs)
        except httpx.TransportError as exc:
            raise transport_failure(self.base_url, exc) from exc

    async def health(self) -> Health:
        return _parse(await self._request("GET", "/v1/health"), Health.from_dict)

    async def gpus(self) -> list[GpuInfo]:
        return _parse(await self._request("GET", "/v1/gpus"), _gpus)

    async def status(self) -> Status:
        """Health, GPUs and jobs in one request (what the scheduler polls)."""
        return _parse(await self._request("GET", "/v1/status"), _status)

    async def jobs(self) -> list[JobInfo]:
        return _parse(await self._request("GET", "/v1/jobs"), _jobs)

    async def job(self, job_id: str) -> JobInfo:
        return _parse(await self._request("GET", _job_path(job_id)), JobInfo.from_dict)

    async def start_job(self, request: StartRequest) -> JobInfo:
        response = await self._request("POST", "/v1/jobs", json=request.to_dict())
        return _parse(response, JobInfo.from_dict)

    async def stop_job(self, job_id: str, grace_s: float | None = None) -> JobInfo:
        body = StopRequest(grace_s).to_dict()
        response = await self._request("POST", _job_path(job_id, "/stop"), json=body)
        return _parse(response, JobInfo.from_dict)

    async def log(self, job_id: str, lines: int = 100) -> LogTail:
        response = await self._request("GET", _job_path(job_id, "/log"), params=_log_params(lines))
        return _parse(response, LogTail.from_dict)
