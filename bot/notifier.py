"""The scheduler's notifier, carried to Slack: a DM to the job's owner and a fresh App Home.

The cycle must never wait on Slack, so events go into a queue that one worker thread
drains; a Slack outage delays DMs, it never delays scheduling.
"""

from __future__ import annotations

import logging
import queue
import threading

from bot.blocks.notices import job_event
from bot.messenger import Messenger
from scheduler.notify import Event, EventKind

log = logging.getLogger(__name__)

_STOP = object()


class SlackNotifier:
    """Implements scheduler.notify.Notifier for Slack."""

    def __init__(self, messenger: Messenger) -> None:
        self.messenger = messenger
        self._queue: queue.Queue[object] = queue.Queue()
        self._worker = threading.Thread(
            target=self._drain, name="paika-slack-notifier", daemon=True
        )
        self._worker.start()

    def notify(self, event: Event) -> None:
        self._queue.put(event)

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every queued event has been delivered (tests, shutdown)."""
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def close(self) -> None:
        self._queue.put(_STOP)
        self._worker.join(timeout=10)

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if isinstance(item, threading.Event):
                item.set()
                continue
            assert isinstance(item, Event)
            try:
                self._deliver(item)
            except Exception:  # one bad event must not stop the DMs that follow it
                log.exception("could not deliver %s", item.kind)

    def _deliver(self, event: Event) -> None:
        services = self.messenger.services
        if event.owner is None:
            # Host down/up: once per change (the cycle reports changes, not polls), to the channel.
            channel = services.paika.policy.slack.channel
            if channel and event.kind in (EventKind.HOST_DOWN, EventKind.HOST_UP):
                self.messenger.post(
                    channel,
                    job_event(event, services.paika.policy.slack.default_language, services.zone),
                )
            return
        lang = services.language(event.owner)
        self.messenger.dm(event.owner, job_event(event, lang, services.zone))
        self.messenger.publish_home(event.owner)
