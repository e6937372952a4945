"""Buttons: Approve / Deny on bump requests; Submit and Refresh on the App Home; Extend /
Stop on the notice of a run past its estimate (first answer wins; the answer redraws the
notice the way the idle-GPU ask's does, in bot.listeners.alerts); Run anyway / Cancel on the
notice of a job held because a job it waits for failed (the clicker's own `/gpu release` or
`/gpu cancel`, answered to the clicker alone)."""

from __future__ import annotations

import re
from concurrent.futures import Executor
from typing import Any

from slack_bolt import App, Respond

from bot.blocks import ids
from bot.blocks.common import Message, mention
from bot.blocks.overrun import overrun_answered
from bot.blocks.replies import error
from bot.failures import reported
from bot.i18n import t
from bot.listeners.alerts import (
    alert_words,
    already_answered,
    clicked_alert,
    message_lang,
    redraw,
    tell_answer,
)
from bot.listeners.commands import acknowledge, modal_opener
from bot.messenger import Messenger
from bot.replays import once
from bot.replying import message_for
from bot.services import BotServices
from scheduler.door import EXTEND, RUN_ENDED, STOP, DecisionResult
from scheduler.grammar.values import JobRef


def register(app: App, services: BotServices, messenger: Messenger, modals: Executor) -> None:
    def decide(approve: bool, body: dict[str, Any], respond: Respond) -> None:
        user = body["user"]["id"]
        lang = services.language(user)
        actions = body.get("actions") or [{}]
        request_id = _request_id(actions[0].get("value"))
        if request_id is None:
            message = error(t(lang, "error.bad_button"), lang, None)
            _to_clicker(respond, message)
            return
        outcome = services.decide(request_id, approve, user, None)
        result = outcome.result
        if not outcome.ok or not isinstance(result, DecisionResult) or not result.changed:
            # A refusal, or a second click / replayed payload: only the clicker hears of it.
            _to_clicker(respond, message_for(outcome, lang, services.zone, services.now()))
            return
        messenger.follow_up(outcome, user)

    def approve(body: dict[str, Any], respond: Respond) -> None:
        with reported(services, body, respond):
            decide(True, body, respond)

    def deny(body: dict[str, Any], respond: Respond) -> None:
        with reported(services, body, respond):
            decide(False, body, respond)

    def refresh(body: dict[str, Any], respond: Respond) -> None:
        with reported(services, body, respond):
            messenger.publish_home(body["user"]["id"])

    def answer_overrun(answer: str, body: dict[str, Any], respond: Respond) -> None:
        user, key = clicked_alert(body)
        lang = services.language(user)
        result = services.paika.answer_overrun_alert(key, answer, user)
        if not result.known or result.notice is None:
            tell_answer(respond, error(t(lang, "alert.bad_button"), lang, None))
            return
        if not result.allowed:
            owner = mention(result.notice.detail.get("owner"))
            tell_answer(respond, alert_words(t(lang, "alert.overrun.refused", owner=owner)))
            return
        redrawn = overrun_answered(
            result.notice,
            result.answer,
            result.answered_by,
            result.answered_at,
            result.estimate_hours,
            message_lang(body, services, lang),
            services.zone,
        )
        redraw(body, messenger, respond, redrawn)
        if not result.changed and result.answer != RUN_ENDED:
            tell_answer(
                respond,
                already_answered(
                    lang, "alert.idle.already", result.answered_by, result.answered_at, services
                ),
            )

    def extend(body: dict[str, Any], respond: Respond) -> None:
        with reported(services, body, respond):
            answer_overrun(EXTEND, body, respond)

    def stop(body: dict[str, Any], respond: Respond) -> None:
        with reported(services, body, respond):
            answer_overrun(STOP, body, respond)

    def held(release: bool, body: dict[str, Any], respond: Respond) -> None:
        user = body["user"]["id"]
        lang = services.language(user)
        actions = body.get("actions") or [{}]
        job_id = _request_id(actions[0].get("value"))
        if job_id is None:
            message = error(t(lang, "error.bad_button"), lang, None)
        else:
            # The clicker's own command: the service checks who may, and says what it did.
            path = ("release",) if release else ("cancel",)
            outcome = services.perform(path, {"job": JobRef(id=job_id)}, user)
            message = message_for(outcome, lang, services.zone, services.now())
        _to_clicker(respond, message)

    def run_anyway(body: dict[str, Any], respond: Respond) -> None:
        with reported(services, body, respond):
            held(True, body, respond)

    def cancel_held(body: dict[str, Any], respond: Respond) -> None:
        with reported(services, body, respond):
            held(False, body, respond)

    app.action(ids.HELD_RELEASE)(ack=acknowledge, lazy=[once(services, run_anyway)])
    app.action(ids.HELD_CANCEL)(ack=acknowledge, lazy=[once(services, cancel_held)])
    app.action(ids.BUMP_APPROVE)(ack=acknowledge, lazy=[once(services, approve)])
    app.action(ids.BUMP_DENY)(ack=acknowledge, lazy=[once(services, deny)])
    app.action(ids.HOME_SUBMIT)(modal_opener(services, modals))
    app.action(ids.HOME_REFRESH)(ack=acknowledge, lazy=[once(services, refresh)])
    app.action(ids.OVERRUN_EXTEND)(ack=acknowledge, lazy=[once(services, extend)])
    app.action(ids.OVERRUN_STOP)(ack=acknowledge, lazy=[once(services, stop)])


def _to_clicker(respond: Respond, message: Message) -> None:
    """Answer the clicker alone, leaving the message clicked as it is."""
    respond(
        text=message.text,
        blocks=message.blocks,
        response_type="ephemeral",
        replace_original=False,
    )


def _request_id(value: object) -> int | None:
    """The request id a button carries; anything else is a forged or stale payload."""
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,12}", value):
        return int(value)
    return None
