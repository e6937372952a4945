"""The approval message for a bump request, before and after an approver decides."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from bot.blocks.common import (
    Block,
    Message,
    actions,
    button,
    code,
    confirm_dialog,
    context,
    fields,
    header,
    labelled,
    mention,
    mrkdwn_escape,
    section,
)
from bot.blocks.ids import BUMP_ACTIONS, BUMP_APPROVE, BUMP_DENY
from bot.blocks.job import data, gpu_hours, labelled_inline, needs, priority, ref
from bot.i18n import t, term, when
from bot.reason_words import reason_words
from scheduler.door import BumpRecord, BumpState, JobView


def bump_request(request: BumpRecord, view: JobView, lang: str) -> Message:
    """Posted to the approvers: who asks to move which job where, and why; Approve / Deny."""
    value = str(request.id)
    deny_confirm = confirm_dialog(
        t(lang, "bump.confirm_title"),
        t(lang, "bump.confirm_text", id=request.id, user=mention(request.requested_by)),
        t(lang, "bump.deny"),
        t(lang, "bump.keep"),
    )
    buttons = actions(
        BUMP_ACTIONS,
        button(t(lang, "bump.approve"), BUMP_APPROVE, value, style="primary"),
        button(t(lang, "bump.deny"), BUMP_DENY, value, style="danger", confirm=deny_confirm),
    )
    typed = t(
        lang,
        "bump.typed",
        approve=code(f"/gpu approve {request.id}"),
        deny=code(f'/gpu deny {request.id} reason="…"'),
    )
    blocks = [*_about(request, view, lang), buttons, context(typed)]
    return Message(_title(request, view, lang), blocks)


def bump_decided(request: BumpRecord, view: JobView, lang: str, zone: ZoneInfo) -> Message:
    """The same message once decided: who decided what and when, and no buttons."""
    at = when(lang, request.decided_at, zone)
    who = mention(request.decided_by)
    if request.state == BumpState.APPROVED:
        outcome = ":white_check_mark: " + t(lang, "bump.approved_by", user=who, at=at)
    elif request.state == BumpState.DENIED:
        outcome = ":x: " + t(lang, "bump.denied_by", user=who, at=at)
    elif request.state == BumpState.WITHDRAWN:
        outcome = ":heavy_minus_sign: " + t(lang, "bump.withdrawn", at=at)
    else:
        outcome = ":hourglass_flowing_sand: " + t(lang, "bump.undecided")
    if request.decision_reason and request.state != BumpState.APPROVED:
        reason = reason_words(lang, request.decision_why, request.decision_reason)
        outcome += "\n" + t(lang, "bump.decision_reason", reason=mrkdwn_escape(reason))
    state = term(lang, "bump_state", request.state)
    text = f"{_title(request, view, lang)} — {state}"
    return Message(text, [*_about(request, view, lang), section(outcome)])


def _title(request: BumpRecord, view: JobView, lang: str) -> str:
    job = view.job
    return mrkdwn_escape(
        t(
            lang,
            "bump.header",
            id=request.id,
            job=job.id,
            name=job.name,
            target=priority(lang, request.to_priority),
        )
    )


def _about(request: BumpRecord, view: JobView, lang: str) -> list[Block]:
    job = view.job
    ask = t(
        lang,
        "bump.asks",
        user=mention(request.requested_by),
        job=ref(job.id, job.name),
        team=mrkdwn_escape(view.team),
        owner=mention(job.owner),
        source=priority(lang, request.from_priority),
        target=priority(lang, request.to_priority),
    )
    items = [
        labelled(t(lang, "label.needs"), needs(lang, job)),
        labelled(t(lang, "label.estimate"), gpu_hours(lang, job.est_gpu_hours)),
        labelled(t(lang, "label.data"), data(lang, job)),
    ]
    if view.wait is not None:
        items.append(labelled(t(lang, "label.place"), str(view.wait.position)))
    title = t(
        lang,
        "bump.header",
        id=request.id,
        job=job.id,
        name=job.name,
        target=priority(lang, request.to_priority),
    )
    return [
        header(title),
        section(ask),
        section(labelled_inline(lang, t(lang, "label.reason"), mrkdwn_escape(request.reason))),
        fields(items),
    ]
