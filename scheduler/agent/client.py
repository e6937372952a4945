"""Talking to an agent: AgentClient (sync) and AsyncAgentClient (async), same methods.

    with AgentClient("http://gpu-a:8470", token) as agent:
        agent.health(); agent.gpus(); agent.status(); agent.jobs(); agent.job("42")
        agent.start_job(StartRequest(job_id="42", gpus=[0, 1], argv=["python", "train.py"]))
        agent.stop_job("42", grace_s=30); agent.log("42", lines=100)

Each request of the API is described once, in `Endpoints`: its method and path, the model it
sends and the one its answer is read as. Both clients inherit those methods and differ only
in how they send a request (`_send`: httpx.Client or httpx.AsyncClient), so an endpoint added
there is in both.

Errors are converted here, the same for every request (see errors.py): nothing sent (refused,
connect timeout, bad address) → HostUnreachable(url); sent but no answer (read/write timeout,
reset, cut short) → AnswerLost(url), a HostUnreachable whose request the agent may have acted
on; 401 → AgentAuthError; 413 → BodyTooLarge; 400 → BadRequest; 404 → JobNotFound;
409 → JobConflict; 503 → GpuReadError; anything else ≥ 400, or an answer that does not parse
→ AgentError.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar, overload

import httpx

from scheduler.agent.errors import (
    AgentError,
    AgentNotTrusted,
    AnswerLost,
    BadRequest,
    HostUnreachable,
    error_for_status,
)
from scheduler.agent.protocol import (
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
    is_job_id,
)

T = TypeVar("T")
P = ParamSpec("P")

JSON_HEADERS = {"Content-Type": "application/json"}


@functools.cache
def shared_tls(ca_file: str | None = None) -> ssl.SSLContext:
    """One TLS context for every client trusting `ca_file` (None: the system's CAs), with
    host names checked: building one loads the CA bundle (~30 ms of CPU), which per request
    would serialise polling hundreds of hosts."""
    if ca_file:
        return ssl.create_default_context(cafile=ca_file)
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
    """The AgentError for a transport failure: AgentNotTrusted when the agent's certificate
    did not verify, HostUnreachable when nothing else reached the agent, AnswerLost when the
    request may have reached it but no answer came back."""
    refused = _certificate_refusal(exc)
    if refused is not None:
        return AgentNotTrusted(base_url, refused.verify_message or str(refused))
    cls = HostUnreachable if isinstance(exc, _NOT_SENT) else AnswerLost
    return cls(base_url, f"{type(exc).__name__}: {exc}")


def _certificate_refusal(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate check that failed under `exc` (in its causes), if that is what it was."""
    seen: BaseException | None = exc
    for _ in range(8):  # causes are a short chain: httpx over httpcore over ssl
        if seen is None or isinstance(seen, ssl.SSLCertVerificationError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


# ---------------------------------------------------------------- one request


@dataclass(frozen=True)
class Request(Generic[T]):
    """One request to an agent: where it goes, what it carries, how its answer is read."""

    method: str
    path: str
    read: Callable[[bytes], T]
    body: WireModel | None = None
    params: Mapping[str, int | str] | None = None

    def content(self) -> bytes | None:
        return None if self.body is None else self.body.to_json()

    def headers(self) -> Mapping[str, str] | None:
        return None if self.body is None else JSON_HEADERS

    def answer(self, response: httpx.Response) -> T:
        """The answer's value, or the AgentError an error status or a malformed answer is."""
        if response.status_code >= 400:
            raise _error(response)
        try:
            return self.read(response.content)
        except BadRequest as exc:  # the agent's fault here, not ours
            raise AgentError(
                response.status_code,
                f"the agent at {response.request.url} sent an unexpected response: {exc.message}",
            ) from exc


def _error(response: httpx.Response) -> AgentError:
    try:
        data = response.json()
    except (ValueError, RecursionError):
        # (RecursionError: a broken agent's deeply nested answer must not escape as such)
        data = None
    message = data.get("error") if isinstance(data, dict) else None
    if not isinstance(message, str):
        message = response.text.strip()[:200] or response.reason_phrase
    return error_for_status(response.status_code, message)


def _job_path(job_id: str, suffix: str = "") -> str:
    if not is_job_id(job_id):
        raise BadRequest(f"job_id: {job_id!r} is not a job id")
    return f"/v1/jobs/{job_id}{suffix}"


def _gpus(text: bytes) -> list[GpuInfo]:
    return GpuList.from_json(text).gpus


def _jobs(text: bytes) -> list[JobInfo]:
    return JobList.from_json(text).jobs


# ---------------------------------------------------------------- the endpoints


class endpoint(Generic[P, T]):  # noqa: N801 (used as a decorator, like property)
    """An API method made from a function that describes its Request: on an AgentClient it
    returns the answer, on an AsyncAgentClient an awaitable of it. The description runs
    inside the send, so a bad argument raises where the answer would (for the async client:
    when awaited)."""

    def __init__(self, describe: Callable[P, Request[T]]) -> None:
        self.describe = describe
        self.__doc__ = describe.__doc__

    @overload
    def __get__(self, client: None, owner: type | None = None) -> endpoint[P, T]: ...

    @overload
    def __get__(self, client: AgentClient, owner: type | None = None) -> Callable[P, T]: ...

    @overload
    def __get__(
        self, client: AsyncAgentClient, owner: type | None = None
    ) -> Callable[P, Awaitable[T]]: ...

    def __get__(self, client: Any, owner: type | None = None) -> Any:
        if client is None:
            return self
        describe, send = self.describe, client._send

        def call(*args: P.args, **kwargs: P.kwargs) -> Any:
            return send(functools.partial(describe, *args, **kwargs))

        return call


class Endpoints:
    """The agent's API, one method per request (see protocol.py for the wire format)."""

    @endpoint
    def health() -> Request[Health]:
        return Request("GET", "/v1/health", Health.from_json)

    @endpoint
    def gpus() -> Request[list[GpuInfo]]:
        return Request("GET", "/v1/gpus", _gpus)

    @endpoint
    def status(since: str | None = None) -> Request[Status]:
        """Health, GPUs and jobs in one request (what the scheduler polls). With `since`
        (the last answer's cursor, "0" at first): the running jobs and the ended ones that
        changed since, a bounded page of them (`more`: ask again with the new cursor)."""
        params = None if since is None else {"since": since}
        return Request("GET", "/v1/status", Status.from_json, params=params)

    @endpoint
    def ack(job_ids: Sequence[str]) -> Request[Acked]:
        """The scheduler has recorded how these runs ended: the agent may forget them."""
        return Request("POST", "/v1/jobs/ack", Acked.from_json, body=JobAck(job_ids=tuple(job_ids)))

    @endpoint
    def jobs() -> Request[list[JobInfo]]:
        return Request("GET", "/v1/jobs", _jobs)

    @endpoint
    def job(job_id: str) -> Request[JobInfo]:
        return Request("GET", _job_path(job_id), JobInfo.from_json)

    @endpoint
    def start_job(request: StartRequest) -> Request[JobInfo]:
        """Start a job (201), or get the job already known by this id (200: a repeat never
        launches twice, so after AnswerLost send the same request again). JobConflict when
        its GPUs are held, or when a stop for this id came first."""
        return Request("POST", "/v1/jobs", JobInfo.from_json, body=request)

    @endpoint
    def stop_job(job_id: str, grace_s: float | None = None) -> Request[JobInfo]:
        """SIGTERM now, SIGKILL after grace_s (None: the agent's default). Returns at once.
        For an id the agent does not know it records a tombstone, so a start still in
        flight is refused (409) rather than launched."""
        body = StopRequest(grace_s=grace_s)
        return Request("POST", _job_path(job_id, "/stop"), JobInfo.from_json, body=body)

    @endpoint
    def revoke_token() -> Request[TokenRevoked]:
        """The token this client holds is refused by the agent from now on."""
        return Request("POST", "/v1/token/revoke", TokenRevoked.from_json)

    @endpoint
    def log(job_id: str, lines: int = 100) -> Request[LogTail]:
        return Request("GET", _job_path(job_id, "/log"), LogTail.from_json, params={"lines": lines})


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Accept": "application/json"}


class AgentClient(Endpoints):
    """A synchronous client for one agent. `transport` replaces the network (tests)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 5.0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        transport = transport or httpx.HTTPTransport(verify=tls or shared_tls())
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

    def _send(self, describe: Callable[[], Request[T]]) -> T:
        request = describe()
        try:
            response = self._http.request(
                request.method,
                self._urls[request.path],
                content=request.content(),
                headers=request.headers(),
                params=request.params,
            )
        except httpx.TransportError as exc:
            raise transport_failure(self.base_url, exc) from exc
        return request.answer(response)


class AsyncAgentClient(Endpoints):
    """The same client for asyncio code (httpx.AsyncClient)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 5.0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        transport = transport or httpx.AsyncHTTPTransport(verify=tls or shared_tls())
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

    async def _send(self, describe: Callable[[], Request[T]]) -> T:
        request = describe()
        try:
            response = await self._http.request(
                request.method,
                self._urls[request.path],
                content=request.content(),
                headers=request.headers(),
                params=request.params,
            )
        except httpx.TransportError as exc:
            raise transport_failure(self.base_url, exc) from exc
        return request.answer(response)
