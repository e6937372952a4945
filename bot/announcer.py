"""The outbox's announcer for Slack: each notice rendered by its kind, DMed to its people
and, when it is for the channel and the policy names one, posted there. A job's owner who
is told of a change to their job also gets a fresh App Home.

`announce` is True only when every post got through; otherwise the outbox tries the alert
again later. Within one process, a retry skips the recipients that already have it, so a
channel outage does not send the owner the same DM twice.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from zoneinfo import ZoneInfo

from bot.blocks.alerts import idle_ask, plain_alert, quota_alert, reclaim_notice
from bot.blocks.common import Message
from bot.blocks.held import held_ask
from bot.blocks.notices import job_event
from bot.blocks.overrun import overrun_ask
from bot.digest.slack import post_digest
from bot.messenger import Messenger
from bot.services import BotServices
from scheduler.door import EVENT_KINDS, Announcement, Digest, NoticeKind, is_event

log = logging.getLogger(__name__)

Renderer = Callable[[Announcement, str, ZoneInfo], Message]


RENDERERS: Mapping[str, Renderer] = {
    NoticeKind.QUOTA_EXPIRY: quota_alert,
    NoticeKind.QUOTA_USED: quota_alert,
    NoticeKind.GPUS_IDLE: idle_ask,
    NoticeKind.GPUS_RECLAIMED: reclaim_notice,
    NoticeKind.JOB_OVERRUN: overrun_ask,
    NoticeKind.JOB_UPSTREAM_FAILED: held_ask,
    NoticeKind.MAINTENANCE_AHEAD: plain_alert,
    NoticeKind.ARRAY_ENDED: plain_alert,
    **{kind: job_event for kind in EVENT_KINDS},
    NoticeKind.STORE_DOWN: plain_alert,
    NoticeKind.STORE_BACK: plain_alert,
}


# Kinds delivered by their own path rather than a renderer of one message per person.
OWN_PATHS = frozenset({NoticeKind.DIGEST, NoticeKind.BUMP_REQUEST, NoticeKind.BUMP_DECIDED})


def delivers(kind: str) -> bool:
    """Whether Slack has a rendering (or a delivery of its own) for notices of `kind`."""
    return kind in RENDERERS or kind in OWN_PATHS


class SlackAnnouncer:
    """Implements scheduler.notices.outbox.Announcer for Slack."""

    def __init__(
        self,
        messenger: Messenger,
        services: BotServices,
        renderers: Mapping[str, Renderer] | None = None,
    ) -> None:
        self.messenger = messenger
        self.services = services
        self.renderers = dict(RENDERERS if renderers is None else renderers)
        self._delivered: set[tuple[str, str]] = set()  # (alert key, user or channel)
        self._digest_steps: dict[str, dict[str, str]] = {}  # alert key → steps already done
        self._lock = threading.Lock()

    def announce(self, announcement: Announcement) -> bool:
        if announcement.kind == NoticeKind.DIGEST:
            return self._post_digest(announcement)
        if announcement.kind == NoticeKind.BUMP_REQUEST:
            return self.messenger.ask_approvers(int(announcement.detail["request_id"]))
        if announcement.kind == NoticeKind.BUMP_DECIDED:
            return self.messenger.announce_decision_of(int(announcement.detail["request_id"]))
        through = True
        for target, direct, message in self._messages(announcement):
            done = (announcement.key, target)
            with self._lock:
                if done in self._delivered:
                    continue
            sent = (
                self.messenger.dm(target, message)
                if direct
                else self.messenger.post(target, message) is not None
            )
            if sent:
                with self._lock:
                    self._delivered.add(done)
            else:
                through = False
        if through:
            with self._lock:
                self._delivered = {d for d in self._delivered if d[0] != announcement.key}
            if is_event(announcement.kind):
                for user in announcement.to_users:  # best effort: the DM is what counts
                    self.messenger.publish_home(user)
        return through

    def _post_digest(self, announcement: Announcement) -> bool:
        """The board and its picture, in the channel; with no channel set there is no one to tell."""
        slack = self.services.paika.policy.slack
        if not slack.channel:
            log.info(
                "no slack.channel in the policy: the digest of %s is not posted", announcement.key
            )
            return True
        with self._lock:
            steps = self._digest_steps.setdefault(announcement.key, {})
        done = post_digest(
            self.messenger.client,
            slack.channel,
            Digest.from_json(announcement.detail),
            slack.default_language,
            self.services.zone,
            progress=steps,
        )
        if done:
            with self._lock:
                self._digest_steps.pop(announcement.key, None)
        return done

    def _messages(self, announcement: Announcement) -> list[tuple[str, bool, Message]]:
        """(user or channel, whether it is a DM, the message in its reader's language)."""
        render = self.renderers.get(announcement.kind, plain_alert)
        zone = self.services.zone
        messages = [
            (user, True, render(announcement, self.services.language(user), zone))
            for user in announcement.to_users
        ]
        slack = self.services.paika.policy.slack
        if announcement.to_channel and slack.channel:
            messages.append(
                (slack.channel, False, render(announcement, slack.default_language, zone))
            )
        return messages
