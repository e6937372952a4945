"""paika's own agents as an executor: every agent host polled in one concurrent round
(scheduler/hosts/poll.py), runs started and stopped over each agent's HTTP API
(scheduler/dispatch.py's AgentDispatcher). One such executor serves every host no pool
gives to another executor, and every `executor: agents` pool."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from scheduler.agent.errors import AgentAuthError, AgentError, JobNotFound
from scheduler.config import PolicyConfig
from scheduler.dispatch import AgentDispatcher, Dispatcher, LogRequest, StartOrder
from scheduler.errors import NotFound, Problem, UserError
from scheduler.hosts.poll import Target
from scheduler.hosts.report import HostReport

# A round's poll of some agent hosts (scheduler.hosts.poll.Poller: one concurrent round).
AgentPoll = Callable[[Sequence[Target]], Mapping[str, HostReport]]


class AgentsExecutor:
    """The agents' poller and dispatcher, as one executor."""

    def __init__(self, poll: AgentPoll, dispatch: Dispatcher) -> None:
        self.poller, self.dispatcher = poll, dispatch

    def poll(self, targets: Sequence[Target]) -> Mapping[str, HostReport]:
        return self.poller(targets) if targets else {}

    def start(self, order: StartOrder) -> None:
        self.dispatcher.start(order)

    def stop(self, host: str, url: str, agent_job: str, grace_s: float) -> None:
        self.dispatcher.stop(host, url, agent_job, grace_s)

    def revoke(self, host: str, url: str, token: str) -> bool:
        return self.dispatcher.revoke(host, url, token)

    def acknowledge(self, acks: Mapping[str, Sequence[str]]) -> None:
        """Told to the agents that reported the runs (a poll that keeps no cursor has
        nothing to tell)."""
        acknowledge = getattr(self.poller, "acknowledge", None)
        if callable(acknowledge) and acks:
            acknowledge(acks)

    def follow(self, policy: PolicyConfig) -> None:
        """What every start carries (the site's container options) and the agents' timeout."""
        timeout = policy.scheduler.hosts.poll_timeout_seconds
        if isinstance(self.dispatcher, AgentDispatcher):
            self.dispatcher.containers = policy.containers.options()
            self.dispatcher.timeout = timeout
        if hasattr(self.poller, "timeout"):
            self.poller.timeout = timeout

    def close(self) -> None:
        close = getattr(self.poller, "close", None)
        if callable(close):
            close()


def read_agent_log(request: LogRequest) -> tuple[str, ...]:
    """The run's last lines, as its host's agent keeps them (GET /v1/jobs/<run>/log)."""
    from scheduler.agent.client import AgentClient, shared_tls

    if request.token is None:
        raise UserError(
            Problem.LOGS_HOST_NO_KEY,
            job_id=request.job_id,
            host=request.host,
            problem=request.key_problem or "",
        )
    tls = request.tls or shared_tls()
    try:
        with AgentClient(request.url, request.token, timeout=request.timeout, tls=tls) as agent:
            return tuple(agent.log(request.run, request.lines).lines)
    except JobNotFound as exc:
        raise NotFound(
            Problem.LOGS_NOT_KEPT, job_id=request.job_id, host=request.host, run=request.run
        ) from exc
    except AgentAuthError as exc:
        raise UserError(
            Problem.LOGS_HOST_REFUSED, job_id=request.job_id, host=request.host
        ) from exc
    except AgentError as exc:  # no answer in time, or any other failure the host names
        raise UserError(
            Problem.LOGS_HOST_UNREACHABLE,
            job_id=request.job_id,
            host=request.host,
            seconds=request.timeout,
            problem=exc.message,
        ) from exc
