"""Errors of the host agent and of its client.

    AgentError            `status` is the HTTP status that goes with it (None: no response)
     ├── AgentAuthError   401: the bearer token is missing or wrong
     ├── HostUnreachable  nothing reached the agent at `url` (refused, no route, bad address)
     │    ├── AnswerLost  the request may have reached it, but no answer came back
     │    │               (timed out or reset after sending): it may have acted on it
     │    └── AgentNotTrusted  its TLS certificate does not verify (another CA, self-signed,
     │                    a name that is not the host's, expired): nothing was sent
     ├── BadRequest       400: a field of a request is invalid; the message names it
     ├── AccountRefused   403: this host will not run the job as that account (unknown
     │                    here, root, or not the agent's own user); the message says why
     ├── JobNotFound      404: the agent has no job with that id
     ├── JobConflict      409: the GPUs are held by another live job, or the run was
     │                    stopped before it started
     ├── BodyTooLarge     413: the request body is over the agent's limit
     ├── GpuReadError     503: NVML failed or is not available on this host
     └── SpecError        the --simulate spec does not parse

AgentError derives from Exception, not from paika's PaikaError: the agent package imports
nothing from the rest of paika (it runs alone on every GPU host). The scheduler catches
AgentError where it talks to agents (hosts/poll.py) or converts it there (dispatch.py).

Catch HostUnreachable for "no answer" of either kind. Catch AnswerLost first where it matters
whether the agent acted: after a lost answer to a start, the run may be running; ask the agent
(GET /v1/jobs/{id}) or send the same start again (starts are idempotent), never a new run id.

The server turns these into `{"error": message}` with `status`; the client turns that back
into the same classes, so a caller catches one family whichever side the problem was on.
"""

from __future__ import annotations


class AgentError(Exception):
    """An error from the agent or from talking to it."""

    default_status: int | None = 500

    def __init__(self, status: int | None, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(message if status is None else f"{message} (HTTP {status})")


class AgentAuthError(AgentError):
    """The agent refused the bearer token (HTTP 401)."""

    default_status = 401

    def __init__(self, message: str = "missing or wrong agent token") -> None:
        super().__init__(401, message)


class HostUnreachable(AgentError):
    """Nothing reached the agent at `url`: connection refused or timed out, bad address.
    (Its subclass AnswerLost: the request may have reached it.)"""

    default_status = None
    summary = "is unreachable"

    def __init__(self, url: str, reason: str = "") -> None:
        self.url = url
        self.reason = reason
        text = f"agent at {url} {self.summary}" + (f": {reason}" if reason else "")
        super().__init__(None, text)


class AnswerLost(HostUnreachable):
    """The request may have reached the agent at `url`, but no answer came back (read or
    write timeout, connection reset or closed mid-answer): the agent may have acted on it."""

    summary = "sent no answer (the request may have reached it)"


class AgentNotTrusted(HostUnreachable):
    """The agent's TLS certificate did not verify against the CA bundle: the connection was
    dropped before any request (or token) was sent."""

    summary = "is not trusted: its TLS certificate does not verify"


class _WithStatus(AgentError):
    """An AgentError whose status is fixed by its class."""

    def __init__(self, message: str) -> None:
        super().__init__(self.default_status, message)


class BadRequest(_WithStatus):
    """A request field is invalid (HTTP 400); the message names the field."""

    default_status = 400


class AccountRefused(_WithStatus):
    """This host will not run the job as the account asked for (HTTP 403): no such user
    here, root without --allow-root-jobs, or another user than a non-root agent's own."""

    default_status = 403


class StartsRefused(_WithStatus):
    """This agent only reports its GPUs (`--report-only`, beside a batch system that runs
    the jobs): it starts nothing (HTTP 403)."""

    default_status = 403


class JobNotFound(_WithStatus):
    """The agent knows no job with this id (HTTP 404)."""

    default_status = 404


class JobConflict(_WithStatus):
    """The GPUs asked for are held by another live job, or the run was stopped before it
    started (HTTP 409)."""

    default_status = 409


class BodyTooLarge(_WithStatus):
    """The request body is larger than the agent takes (HTTP 413); the message names the limit."""

    default_status = 413


class GpuReadError(_WithStatus):
    """The GPUs could not be read: NVML missing, driver not loaded, GPU lost (HTTP 503)."""

    default_status = 503


class SpecError(_WithStatus):
    """The --simulate spec does not parse; the message names the bad part and shows an example."""

    default_status = 400


def error_for_status(status: int, message: str) -> AgentError:
    """The AgentError class that goes with an HTTP status from the agent."""
    if status == 401:
        return AgentAuthError(message)
    for cls in (BadRequest, AccountRefused, JobNotFound, JobConflict, BodyTooLarge, GpuReadError):
        if cls.default_status == status:
            return cls(message)
    return AgentError(status, message)
