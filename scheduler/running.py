"""The running service's parts, owned in one place: every loop and thread of `paika up` is a
named part here, or belongs to one. The owner starts the parts in order and stops them in
reverse order, each within its bound; a part that does not stop in time is named in the log
and the others still stop, and the whole stop is bounded (`Running.stop_within_s`, under the
unit's TimeoutStopSec=60, so systemd never has to kill a stopping `paika up`).

`paika up` (bot/up.py, the program's entry) declares these parts, in this start order:

| part | its threads and pools | where they wait | what bounds their queue | stop (bound) |
|---|---|---|---|---|
| doctor | `paika-doctor`; `paika doctor`'s checks, each round on `paika-doctor-hosts` (at most 16 threads) | on the agents' and Slack's answers (3 s each), then on an event for an hour | one round at a time, on its own thread | the event is set, the thread joined (5 s) |
| cycle | `paika-poller` (an asyncio loop); `paika-node-agents` (1 thread, Slurm nodes' agents); `paika-dispatch` (up to 32 threads, one admission's starts, joined before the cycle goes on) | on the agents' answers, each within `hosts.poll_timeout_seconds` | one request per host per round; one cycle at a time (scheduling's `max_instances=1`) | `Cycle.close()`: connections closed, the loop stopped (10 s) |
| slack | HTTP mode: `paika-http:<port>` (uvicorn's loop) and its `AnyIO worker thread`s (at most 40: modal submissions, /metrics, reports); Socket Mode: slack_sdk's session, monitor and message threads and its 10 message workers. Either: the answers after acks (`paika-slack`, 1 thread, bot.pacing), `paika-slack-modal` (2), `paika-slack-post` (4), `paika-slack-auth` (once) | the loop on sockets; the pools on their queues; the answers also on a quiet moment (50 ms without a request, 0.5 s at most) | `PAIKA_HTTP_MAX_CONNECTIONS`, head and body timeouts, bodies over 1 MiB refused unread; each pool's thread count | the server or socket first, then the pools, their queued work done (15 s) |
| ops | `paika-http:<port>`: /metrics, /healthz, the jobs' reports (when Slack's HTTP mode does not serve them), and its `AnyIO worker thread`s (at most 40) for /metrics and reports | the loop on sockets | `PAIKA_HTTP_MAX_CONNECTIONS`, head and body timeouts | the server told to exit, its thread joined (10 s) |
| archive | `paika-object-shipper` | on the object store's answer, else on an event (1 s doubling to 60 s when the store is down, 5 s when idle) | the spool on disk, `PAIKA_SPOOL_MAX_MB` (snapshots and digests dropped first) | the thread ended, one last flush, the spool let go (15 s) |
| courier | `paika-courier` | on an event: woken by a cycle or a command, else every 5 s | the outbox table (each notice leased, retried with backoff, given up after a day) | the thread ended after its round (15 s) |
| scheduling | APScheduler's thread (`APScheduler`) and its pool (`paika-scheduling`, 10 threads): the cycle, alerts and the digest, pruning | on its timer; its jobs on the database, the poller and the dispatch | each job `max_instances=1, coalesce=True`: at most one of each runs, missed runs collapse | its current jobs finish, the leader lock is let go (30 s) |
| console | `paika-console-socket` (accepts) and a `paika-console-command` thread per command | on `accept()`; each command on its socket (10 s) | a listen backlog of 16; only its own user or root connects | the socket closed and removed, the accept thread joined (5 s) |

Stopping runs in reverse: console, scheduling, courier, archive, ops, slack, cycle, doctor.
The scheduling stops once the cycle in progress ends; the courier after it, so the cycle's last
notices are still tried; Slack's server and pools after the courier, which posts through them;
the cycle's connections once no cycle can run. The whole stop is
bounded by the sum of the parts' bounds and by `stop_within_s` (45 s), whichever is shorter.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

# A part's bound when it gives none.
STOP_WITHIN_S = 10.0
# The whole stop: within the systemd unit's TimeoutStopSec (60 s), with room to exit.
ALL_STOPPED_WITHIN_S = 45.0


@dataclass(frozen=True)
class Part:
    """One running part: how it starts, how it stops, and where its threads wait."""

    name: str
    start: Callable[[], object]
    stop: Callable[[], object]
    waits: str  # one line: where its threads wait (the module docstring has the full table)
    stop_within_s: float = STOP_WITHIN_S


class Running:
    """Starts its parts in order and stops those started in reverse, each within its bound."""

    def __init__(self, parts: list[Part], *, stop_within_s: float = ALL_STOPPED_WITHIN_S) -> None:
        names = [part.name for part in parts]
        if len(set(names)) != len(names):
            raise ValueError(f"two parts have the same name: {names}")
        self.parts = list(parts)
        self.stop_within_s = min(stop_within_s, sum(part.stop_within_s for part in parts))
        self._started: list[Part] = []

    @property
    def started(self) -> list[str]:
        """The parts running now, in the order they started."""
        return [part.name for part in self._started]

    def start(self) -> None:
        """Start every part in order. When one fails to start, those already started are
        stopped (in reverse, within their bounds) and its error is raised."""
        for part in self.parts:
            try:
                part.start()
            except BaseException:
                log.error(
                    "%s did not start; stopping what did (%s)",
                    part.name,
                    ", ".join(reversed(self.started)) or "nothing",
                )
                self.stop()
                raise
            log.debug("%s started (it waits %s)", part.name, part.waits)
            self._started.append(part)

    def stop(self) -> list[str]:
        """Stop the started parts in reverse order; the names of those that did not stop
        within their bound (or failed stopping), each logged. Returns within `stop_within_s`."""
        deadline = time.monotonic() + self.stop_within_s
        late: list[str] = []
        while self._started:
            part = self._started.pop()
            within = max(0.0, min(part.stop_within_s, deadline - time.monotonic()))
            if not _stop_within(part, within):
                late.append(part.name)
        return late


def _stop_within(part: Part, within: float) -> bool:
    """Run the part's stop on a thread of its own and wait for it at most `within` seconds:
    a stop that hangs costs its own bound, never the other parts' stops."""
    failed: list[BaseException] = []

    def stop() -> None:
        try:
            part.stop()
        except BaseException as exc:  # said below, on the stopping thread
            failed.append(exc)

    began = time.monotonic()
    stopping = threading.Thread(target=stop, name=f"paika-stopping:{part.name}", daemon=True)
    stopping.start()
    stopping.join(within)
    took = time.monotonic() - began
    if stopping.is_alive():
        log.warning(
            "%s did not stop within %.1f s; its threads are left to end with the process",
            part.name,
            within,
        )
        return False
    if failed:
        log.error("%s failed stopping", part.name, exc_info=failed[0])
        return False
    log.info("%s stopped (%.2f s)", part.name, took)
    return True
