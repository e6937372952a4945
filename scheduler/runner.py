"""Wiring the running service: the cycle with real agents and dispatch."""

from __future__ import annotations

from scheduler.app import Paika
from scheduler.cycle import Cycle
from scheduler.dispatch import AgentDispatcher
from scheduler.errors import PaikaError
from scheduler.hosts.poll import Poller
from scheduler.notices.events import Observer


class MissingAgentToken(PaikaError):
    """The scheduler needs the agents' token to talk to them."""

    def __init__(self) -> None:
        super().__init__("set PAIKA_AGENT_TOKEN to the token the GPU host agents were started with")


def agent_cycle(paika: Paika, observer: Observer) -> Cycle:
    """The cycle polling and dispatching through the hosts' agents."""
    token = paika.settings.agent_token
    if not token:
        raise MissingAgentToken()
    timeout = paika.policy.scheduler.hosts.poll_timeout_seconds
    poller = Poller(token, timeout=timeout)
    return Cycle(
        paika.engine,
        paika.policy,
        paika.clock,
        AgentDispatcher(token, timeout=timeout, containers=paika.policy.containers.options()),
        observer,
        poller,
    )
