"""Buttons on alerts: Acknowledge on quota warnings; Still using / Release on idle-GPU asks.

Each click is acknowledged at once; the answer is recorded after (first answer wins). The
clicked message is redrawn with the answer that holds, so a copy elsewhere that still shows
buttons is brought up to date by its first click. Whoever may not answer, or answers too
late, hears so alone (ephemeral); nothing changes for them.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from slack_bolt import App, Respond

from bot.blocks import ids
from bot.blocks.alerts import idle_answered, quota_acknowledged
from bot.blocks.common import Message, mention, section
from bot.blocks.replies import error
from bot.failures import reported
from bot.i18n import t, when
from bot.listeners.commands import acknowledge
from bot.messenger import Messenger
from bot.replays import once
from bot.services import BotServices
from scheduler.door import RELEASE, STILL_USING

# What an alert key looks like (quota-expiry:3:2026-11-20:7d, idle:42:1:1); anything else
# is a forged or mangled payload.
_KEY = re.compile(r"[a-z-]{1,20}(:[A-Za-z0-9._-]{1,40}){1,4}")


def register(app: App, services: BotServices, messenger: Messenger) -> None:
    def acknowledge_quota(body: dict[str, Any], respond: Respond) -> None:
        with reported(services, body, respond):
            user, key = clicked_alert(body)
            lang = services.language(user)
            result = services.paika.acknowledge_quota_alert(key, user)
            if not result.known or result.alert is None:
                tell_answer(respond, error(t(lang, "alert.bad_button"), lang, None))
                return
            owner = mention(result.alert.detail.get("owner"))
            if not result.allowed:
                tell_answer(respond, alert_words(t(lang, "alert.quota.refused", owner=owner)))
                return
            shown_in = message_lang(body, services, lang)
            redrawn = quota_acknowledged(
                result.alert, result.answered_by, result.answered_at, shown_in, services.zone
            )
            redraw(body, messenger, respond, redrawn)
            if not result.changed:
                tell_answer(
                    respond,
                    already_answered(
                        lang,
                        "alert.quota.already",
                        result.answered_by,
                        result.answered_at,
                        services,
                    ),
                )

    def answer_idle(answer: str, body: dict[str, Any], respond: Respond) -> None:
        user, key = clicked_alert(body)
        lang = services.language(user)
        result = services.paika.answer_idle_alert(key, answer, user)
        if not result.known or result.alert is None:
            tell_answer(respond, error(t(lang, "alert.bad_button"), lang, None))
            return
        if not result.allowed:
            owner = mention(result.alert.detail.get("owner"))
            tell_answer(respond, alert_words(t(lang, "alert.idle.refused", owner=owner)))
            return
        shown_in = message_lang(body, services, lang)
        redrawn = idle_answered(
            result.alert,
            result.answer,
            result.answered_by,
            result.answered_at,
            shown_in,
            services.zone,
        )
        redraw(body, messenger, respond, redrawn)
        if not result.changed:
            tell_answer(
                respond,
                already_answered(
                    lang, "alert.idle.already", result.answered_by, result.answered_at, services
                ),
            )

    def still_using(body: dict[str, Any], respond: Respond) -> None:
        with reported(services, body, respond):
            answer_idle(STILL_USING, body, respond)

    def release(body: dict[str, Any], respond: Respond) -> None:
        with reported(services, body, respond):
            answer_idle(RELEASE, body, respond)

    app.action(ids.QUOTA_ACKNOWLEDGE)(ack=acknowledge, lazy=[once(services, acknowledge_quota)])
    app.action(ids.IDLE_STILL_USING)(ack=acknowledge, lazy=[once(services, still_using)])
    app.action(ids.IDLE_RELEASE)(ack=acknowledge, lazy=[once(services, release)])


def clicked_alert(body: dict[str, Any]) -> tuple[str, str | None]:
    """Who clicked, and the alert key the button carries (None if it is not one)."""
    value = ((body.get("actions") or [{}])[0]).get("value")
    key = value if isinstance(value, str) and _KEY.fullmatch(value) else None
    return str(body["user"]["id"]), key


def message_lang(body: dict[str, Any], services: BotServices, clicker_lang: str) -> str:
    """A DM is in its reader's language (the one clicking it); a channel post in the default."""
    channel = str((body.get("container") or {}).get("channel_id") or "")
    if channel.startswith("D"):
        return clicker_lang
    return services.paika.policy.slack.default_language


def redraw(body: dict[str, Any], messenger: Messenger, respond: Respond, message: Message) -> None:
    """Replace the clicked message with `message` (buttons gone, the answer in their place)."""
    container = body.get("container") or {}
    channel, ts = container.get("channel_id"), container.get("message_ts")
    if channel and ts and messenger.update(str(channel), str(ts), message):
        return
    respond(text=message.text, blocks=message.blocks, replace_original=True)


def tell_answer(respond: Respond, message: Message) -> None:
    """Only the clicker sees it."""
    respond(
        text=message.text,
        blocks=message.blocks,
        response_type="ephemeral",
        replace_original=False,
    )


def alert_words(text: str) -> Message:
    return Message(text, [section(f":no_entry_sign: {text}")])


def already_answered(
    lang: str, key: str, by: str | None, at: datetime | None, services: BotServices
) -> Message:
    text = t(lang, key, user=mention(by), at=when(lang, at, services.zone))
    return Message(text, [section(f":information_source: {text}")])
