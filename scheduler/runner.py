"""Wiring the running service: the cycle with real agents and dispatch."""

from __future__ import annotations

from scheduler.agent.client import shared_tls
from scheduler.app import Paika
from scheduler.credentials import AgentKeys, read_secret
from scheduler.cycle import Cycle
from scheduler.dispatch import AgentDispatcher
from scheduler.errors import PaikaError
from scheduler.hosts.executor import AgentsExecutor
from scheduler.hosts.poll import Poller
from scheduler.notices.events import Observer
from scheduler.outputs import ReportLimits
from scheduler.pools import Pools


class MissingAgentToken(PaikaError):
    """The scheduler needs the agents' token to talk to them."""

    def __init__(self) -> None:
        super().__init__(
            "set PAIKA_AGENT_SECRET_FILE (each host's own token; paika agent-secret makes it) "
            "or PAIKA_AGENT_TOKEN (the token shared by all agents), or both"
        )


def agent_keys(paika: Paika) -> AgentKeys:
    """Each host's token: from the secret file, else the shared token (AgentSecretError when the
    secret file is unusable; MissingAgentToken when there is neither)."""
    settings = paika.settings
    if not settings.agent_token and settings.agent_secret_file is None:
        raise MissingAgentToken()
    secret = None if settings.agent_secret_file is None else read_secret(settings.agent_secret_file)
    return AgentKeys(settings.agent_token, secret)


def agent_cycle(paika: Paika, observer: Observer) -> Cycle:
    """The cycle polling and dispatching through the hosts' agents, or their pool's Slurm."""
    keys = agent_keys(paika)
    ca_file = paika.settings.agent_ca_file
    tls = shared_tls(str(ca_file) if ca_file else None)
    timeout = paika.policy.scheduler.hosts.poll_timeout_seconds
    poller = Poller(keys.shared_token or "", timeout=timeout, tls=tls)
    agents = AgentDispatcher(
        keys.shared_token,
        timeout=timeout,
        keys=keys,
        tls=tls,
        containers=paika.policy.containers.options(),
    )
    pools = Pools(paika.policy, AgentsExecutor(poller, agents))
    return Cycle(
        paika.engine,
        paika.live,
        paika.clock,
        pools,
        observer,
        pools,
        keys,
        report_url=paika.settings.resolved_report_url(),
        report_limits=ReportLimits.of(paika.settings),
    )
