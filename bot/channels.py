"""Slack channels by id: a channel configured or stored by name is looked up once, so
posting goes to its id.

Teams added from Slack keep their channel's id (the grammar reads it out of the mention
`<#C…|name>`), which survives a rename. A `#name` (typed, or in the policy file) is looked up
with `conversations.list` the first time it is needed and then remembered, and `paika up`
looks up every configured channel at start and logs what each resolved to, or why it did
not (no such channel, or the bot is not in it: invite it with `/invite @paika`).
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass

from slack_sdk import WebClient
from slack_sdk.errors import SlackClientError

log = logging.getLogger(__name__)

# Any Slack id (C… channel, G… private, D… DM, U…/W… user): names are lowercase.
CHANNEL_ID = re.compile(r"[CGDUW][A-Z0-9]{8,}")
_MENTION = re.compile(r"<#([CG][A-Z0-9]{2,})(?:\|[^>]*)?>")
_PAGE = 200  # channels per conversations.list call (Slack's advice: no more than 200)
_MAX_PAGES = 50


@dataclass(frozen=True)
class Found:
    """A channel's id, and whether the bot is in it (it can post only where it is)."""

    id: str
    member: bool


class ChannelDirectory:
    """Channel names to ids, read from Slack once and remembered."""

    def __init__(self, client: WebClient) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._by_name: dict[str, Found] | None = None

    def id_of(self, channel: str) -> str:
        """Where to post for `channel`: its id when it has one or can be found, else the
        channel as given (Slack may still take it; the failure is logged where it posts)."""
        if CHANNEL_ID.fullmatch(channel):
            return channel
        if mention := _MENTION.fullmatch(channel):
            return mention[1]
        found = self.find(channel)
        return found.id if found is not None else channel

    def find(self, channel: str) -> Found | None:
        """The channel called `channel` (with or without its #), if the bot can see it."""
        name = channel.removeprefix("#").lower()
        with self._lock:
            if self._by_name is None:
                self._by_name = self._read()  # None again when Slack did not answer
            return (self._by_name or {}).get(name)

    def check(self, channels: list[str]) -> None:
        """Look up each configured channel now and log what it resolved to, or why not."""
        for channel in dict.fromkeys(channels):
            if CHANNEL_ID.fullmatch(channel) or _MENTION.fullmatch(channel):
                continue
            found = self.find(channel)
            if found is None:
                log.error(
                    "Slack channel %s: no channel of that name is visible to the bot; "
                    "invite the bot (/invite @paika in it) or configure the channel's id",
                    channel,
                )
            elif not found.member:
                log.error(
                    "Slack channel %s is %s but the bot is not in it, so posts there will "
                    "fail; invite it with /invite @paika",
                    channel,
                    found.id,
                )
            else:
                log.info(
                    "Slack channel %s is %s (posting by id: a rename breaks nothing)",
                    channel,
                    found.id,
                )

    def _read(self) -> dict[str, Found] | None:
        found: dict[str, Found] = {}
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            try:
                page = self.client.conversations_list(
                    types="public_channel,private_channel",
                    exclude_archived=True,
                    limit=_PAGE,
                    cursor=cursor,
                )
            except SlackClientError as exc:
                # Nothing remembered: the next lookup asks again.
                log.warning("could not list Slack channels: %s", exc)
                return None
            for item in page.get("channels") or []:
                found[str(item.get("name", "")).lower()] = Found(
                    str(item["id"]), bool(item.get("is_member"))
                )
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                break
        return found
