"""Starting and stopping jobs on GPU hosts: through their agents, or through Slurm
(`scheduler/slurm/dispatcher.py`) for the hosts of a Slurm pool.

A job's command runs through a shell on its GPU host only; the scheduler never runs it.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from scheduler.agent.errors import AgentError, AnswerLost, BadRequest
from scheduler.agent.protocol import ContainerOptions, ShareSpec, StartRequest
from scheduler.config import PoolOptions
from scheduler.credentials import AgentKeys, HostKey
from scheduler.errors import PaikaError

if TYPE_CHECKING:
    from scheduler.agent.client import AgentClient

log = logging.getLogger(__name__)


class DispatchError(PaikaError):
    """A host refused or could not be asked to start or stop a job.

    `known` is False when the request may have reached the host but no answer came back
    (a timeout, a dropped connection, a server error): the job may be running there, so it
    must not be started anywhere else. `bad_order` is True when the job's own data was
    refused (an invalid field): starting it again would fail the same way. `reached` is
    False when the request surely never got to the host (nothing answered the connection):
    the host has no record of the run. `code`: why, as a code the faces have words for
    (the Slurm executor's; None: `problem` says it). `refusal`: the host refuses the job for
    good (its agent's 403), and why.
    """

    def __init__(
        self,
        host: str,
        job_id: int,
        problem: str,
        *,
        known: bool = True,
        bad_order: bool = False,
        reached: bool = True,
        code: str | None = None,
        refusal: RefusalCode | None = None,
    ) -> None:
        self.host, self.job_id, self.problem = host, job_id, problem
        self.known, self.bad_order, self.reached = known, bad_order, reached
        self.code, self.refusal = code, refusal
        super().__init__(f"{host}: job #{job_id}: {problem}")


class RefusalCode(StrEnum):
    """Why a host refuses to start a job for good (its agent's 403): nothing changes it by
    itself, so the job is held off that host until something does (see scheduler/holds.py)."""

    ACCOUNT_UNMAPPED = "account_unmapped"  # no account named, and the agent runs none as root
    ACCOUNT_UNKNOWN = "account_unknown"  # no such Unix account on the host
    ROOT_REFUSED = "root_refused"  # the account is root, which the agent does not run jobs as
    AGENT_NOT_ROOT = "agent_not_root"  # the agent is not root: it runs jobs only as itself
    REPORT_ONLY = "report_only"  # the agent only reports its GPUs (beside a batch system)
    OTHER = "other"  # another 403: the agent's own words say why


# How each refusal is known in the agent's words (scheduler/agent/isolation.py, app.py).
_REFUSALS = (
    ("report-only", RefusalCode.REPORT_ONLY),
    ("account: missing", RefusalCode.ACCOUNT_UNMAPPED),
    ("there is no unix account", RefusalCode.ACCOUNT_UNKNOWN),
    ("is root (uid 0)", RefusalCode.ROOT_REFUSED),
    ("not root, so it runs jobs only as", RefusalCode.AGENT_NOT_ROOT),
)


def refusal_of(message: str) -> RefusalCode:
    """The code of an agent's 403, from its words."""
    said = message.lower()
    return next((code for words, code in _REFUSALS if words in said), RefusalCode.OTHER)


def _share_spec(share: CardShare | None) -> ShareSpec | None:
    if share is None:
        return None
    return ShareSpec(
        mode=share.mode, memory_mib=share.memory_mib, active_thread_pct=share.active_thread_pct
    )


def agent_job_id(job_id: int, attempt: int) -> str:
    """The id a host's agent knows one run of a job by: a job started again (after it was
    preempted, or its host failed) is a new run, not the old one the agent still remembers."""
    return f"{job_id}.{attempt}"


@dataclass(frozen=True)
class CardShare:
    """A run on a shared card: how its host keeps it apart ("mps", "advisory"), the
    memory it declared (MiB), and with MPS its share of the card's SMs (percent)."""

    mode: str
    memory_mib: int
    active_thread_pct: int | None = None


@dataclass(frozen=True)
class StartOrder:
    """Everything a host needs to start one run of a job."""

    job_id: int
    attempt: int
    host: str
    url: str
    gpu_indices: tuple[int, ...]
    command: str
    image: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    account: str | None = None  # the Unix account it runs as (None: the agent's own user)
    # A job that checkpoints and resumes with no place of its own: the folder its host's
    # agent keeps for it (PAIKA_CHECKPOINT_DIR), the same for each of its runs there.
    checkpoints: str | None = None
    # What a batch system needs besides: the GPUs' catalog type, and the run's estimated
    # wall time (its GPU-hours over its GPUs) for the time limit.
    gpu_type: str | None = None
    wall_hours: float | None = None
    share: CardShare | None = None  # on a shared card (None: its GPUs whole)


@dataclass(frozen=True)
class LogRequest:
    """One run's output, asked for by a person (`/gpu logs`): where it ran and how much."""

    job_id: int
    attempt: int
    name: str  # the job's name
    account: str | None  # the Unix account it ran as
    host: str  # rank 0's host
    url: str  # that host's address as registered
    lines: int
    timeout: float  # seconds the executor has to answer: a person is waiting
    options: PoolOptions | None  # the host's pool's section (None: the agents')
    token: str | None = None  # the host's agent token (None: why in `key_problem`)
    key_problem: str | None = None
    tls: ssl.SSLContext | None = None  # whom an https:// agent must prove it is

    @property
    def run(self) -> str:
        """The run's id where it ran ("<job>.<attempt>")."""
        return agent_job_id(self.job_id, self.attempt)


class Dispatcher(Protocol):
    """Starts and stops jobs on hosts; both are idempotent."""

    def start(self, order: StartOrder) -> None: ...

    def stop(self, host: str, url: str, agent_job: str, grace_s: float) -> None: ...

    def revoke(self, host: str, url: str, token: str) -> bool: ...


class AgentDispatcher:
    """Dispatch through each host's paika agent over HTTP, with that host's token (from
    `keys` when given, else the shared `token`); `tls` is whom https:// agents must prove
    they are; `containers`: the site's options for every container job (the policy file's
    `containers:`)."""

    def __init__(
        self,
        token: str | None,
        *,
        timeout: float = 5.0,
        keys: AgentKeys | None = None,
        tls: ssl.SSLContext | None = None,
        containers: ContainerOptions | None = None,
    ) -> None:
        self.token, self.timeout, self.keys, self.tls = token, timeout, keys, tls
        self.containers = containers

    def _client(self, host: str, job_id: int, url: str) -> AgentClient:
        key = self.keys.key(host) if self.keys is not None else HostKey(self.token)
        if key.token is None:  # revoked, or no usable token: the host is not asked at all
            raise DispatchError(host, job_id, key.problem or "no agent token", reached=False)
        # The HTTP client loads only where hosts are asked: the console's commands reach
        # this module (job changes) without ever dispatching.
        from scheduler.agent.client import AgentClient

        return AgentClient(url, key.token, timeout=self.timeout, tls=self.tls)

    def start(self, order: StartOrder) -> None:
        try:
            request = StartRequest(
                job_id=agent_job_id(order.job_id, order.attempt),
                gpus=order.gpu_indices,
                shell=order.command,
                env={
                    **order.env,
                    "PAIKA_JOB_ID": str(order.job_id),
                    "PAIKA_ATTEMPT": str(order.attempt),
                },
                image=order.image,
                container=self.containers if order.image is not None else None,
                account=order.account,
                checkpoints=order.checkpoints,
                share=_share_spec(order.share),
            )
        except BadRequest as exc:  # the job's own data: no host would take it
            raise DispatchError(
                order.host, order.job_id, exc.message, bad_order=True, reached=False
            ) from exc
        client = self._client(order.host, order.job_id, order.url)
        try:
            with client:
                client.start_job(request)
        except AgentError as exc:
            raise _start_error(order, exc) from exc

    def stop(self, host: str, url: str, agent_job: str, grace_s: float) -> None:
        client = self._client(host, int(agent_job.split(".")[0]), url)
        try:
            with client:
                client.stop_job(agent_job, grace_s)
        except AgentError as exc:
            raise DispatchError(host, int(agent_job.split(".")[0]), str(exc)) from exc

    def revoke(self, host: str, url: str, token: str) -> bool:
        """Tell a host's agent to refuse `token` (its revoked one) from now on; True once it
        does, or already did not take it (401). False: not reached; try again later."""
        from scheduler.agent.client import AgentClient

        try:
            with AgentClient(url, token, timeout=self.timeout, tls=self.tls) as client:
                client.revoke_token()
        except AgentError as exc:
            if exc.status == 401:
                return True
            log.warning("could not tell %s to refuse its revoked token: %s", host, exc)
            return False
        return True


# An agent whose disk is low answers a start 507 before it launches anything: surely not
# started, so the job is queued again (the host's status says disk_low: no start there).
DISK_LOW = 507


def _start_error(order: StartOrder, exc: AgentError) -> DispatchError:
    """Whether a failed start surely did not start the run, and whose fault it was. A host
    that will not run the job (403: not as its account, or no job at all) refuses for a
    reason that does not change by itself: the job is held off that host (`refusal`), the
    agent's reason in its history, until something changes."""
    unknown = isinstance(exc, AnswerLost) or (
        exc.status is not None and exc.status >= 500 and exc.status != DISK_LOW
    )
    return DispatchError(
        order.host,
        order.job_id,
        str(exc),
        known=not unknown,
        bad_order=exc.status == 400,
        reached=unknown or exc.status is not None,
        refusal=refusal_of(exc.message) if exc.status == 403 else None,
    )
