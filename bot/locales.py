"""Users' languages from their Slack locale (zh-CN → zh), asked of Slack once per user and process."""

from __future__ import annotations

import logging
import threading

from slack_sdk import WebClient
from slack_sdk.errors import SlackClientError

log = logging.getLogger(__name__)


class SlackLocales:
    """What Slack says each user's locale is, remembered; without a client, nothing is known."""

    def __init__(self, client: WebClient | None = None) -> None:
        self.client = client
        self._known: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def known(self, user_id: str) -> str | None:
        """The language already learned for `user_id`; never asks Slack (safe before an ack)."""
        with self._lock:
            return self._known.get(user_id)

    def lookup(self, user_id: str) -> str | None:
        """The user's language, asking Slack (users.info) the first time."""
        with self._lock:
            if user_id in self._known:
                return self._known[user_id]
        if self.client is None:
            return None
        try:
            answer = self.client.users_info(user=user_id, include_locale=True)
            locale = str((answer.get("user") or {}).get("locale") or "")
        except SlackClientError as exc:
            log.info("no locale for %s: %s", user_id, exc)
            return None  # not remembered: asked again next time
        language = "zh" if locale.lower().startswith("zh") else "en" if locale else None
        with self._lock:
            self._known[user_id] = language
        return language
