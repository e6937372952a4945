"""Messages paika sends on its own: job events to their owners, host events to channels,
and the answer to a bump request to the person who asked."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from bot.blocks.common import Message, code, context, fit, mention, mrkdwn_escape, section
from bot.blocks.job import priority, ref, whole_card_line
from bot.i18n import t, term, when
from bot.notice_words import sentence
from bot.reason_words import reason_words
from scheduler.door import Announcement, BumpState, DecisionResult, EventKind, event_of

_EMOJI = {
    EventKind.JOB_STARTED: ":rocket:",
    EventKind.JOB_FINISHED: ":white_check_mark:",
    EventKind.JOB_FAILED: ":x:",
    EventKind.JOB_LOST: ":warning:",
    EventKind.JOB_UNKNOWN: ":grey_question:",
    EventKind.JOB_RESUMED: ":arrow_forward:",
    EventKind.JOB_PREEMPTED: ":pause_button:",
    EventKind.JOB_REQUEUED: ":repeat:",
    EventKind.JOB_UNSETTLED: ":rotating_light:",
    EventKind.JOB_HELD: ":no_entry:",
    EventKind.JOB_KEPT_APART: ":snail:",
    EventKind.HOST_DOWN: ":red_circle:",
    EventKind.HOST_UP: ":large_green_circle:",
}

# What the owner can do next, by event; the command names the job.
_NEXT = {
    EventKind.JOB_STARTED: ("event.next.started", "/gpu status #{id}"),
    EventKind.JOB_FINISHED: ("event.next.finished", '/gpu done #{id} output="…" metric=loss:0.31'),
    EventKind.JOB_FAILED: ("event.next.failed", "/gpu status #{id}"),
    EventKind.JOB_LOST: ("event.next.failed", "/gpu status #{id}"),
    EventKind.JOB_UNKNOWN: ("event.next.unknown", "/gpu status #{id}"),
    EventKind.JOB_RESUMED: ("event.next.started", "/gpu status #{id}"),
    EventKind.JOB_PREEMPTED: ("event.next.preempted", "/gpu status #{id}"),
    EventKind.JOB_REQUEUED: ("event.next.requeued", "/gpu status #{id}"),
    EventKind.JOB_HELD: ("event.next.failed", "/gpu status #{id}"),
    EventKind.JOB_KEPT_APART: ("event.next.kept_apart", "/gpu status #{id}"),
}


def job_event(notice: Announcement, lang: str, zone: ZoneInfo) -> Message:
    """A job's owner (or a host's channel) hears what happened, when, and what to do next."""
    event = event_of(notice)
    title = t(
        lang,
        f"event.{event.kind.value}",
        id=event.job_id if event.job_id is not None else "?",
        host=mrkdwn_escape(event.host or "?"),
    )
    emoji = _EMOJI.get(event.kind, ":information_source:")
    # The whole sentence carries the details (host, card type, exit code).
    detail = mrkdwn_escape(sentence(lang, notice))
    blocks = [
        section(f"{emoji} *{title}*\n{detail}"),
    ]
    notes = [when(lang, event.at, zone)]
    step = _NEXT.get(event.kind)
    if step is not None and event.job_id is not None:
        key, command = step
        notes.append(t(lang, key, command=code(command.format(id=event.job_id))))
    blocks.append(context(*notes))
    return Message(fit(f"{title}: {detail}", 300), blocks)


def bump_decision_dm(result: DecisionResult, lang: str) -> Message:
    """The person who asked for a bump hears the approver's answer."""
    request, job = result.request, result.view.job
    params = {
        "id": request.id,
        "job": ref(job.id, job.name),
        "source": priority(lang, request.from_priority),
        "target": priority(lang, request.to_priority),
        "user": mention(request.decided_by),
    }
    if request.state == BumpState.APPROVED:
        text = ":white_check_mark: " + t(lang, "dm.bump_approved", **params)
        text += "\n" + t(lang, "dm.bump_now", priority=priority(lang, job.priority))
        if (whole_card := whole_card_line(lang, job)) is not None:
            text += "\n" + whole_card
    elif request.state == BumpState.DENIED:
        text = ":x: " + t(lang, "dm.bump_denied", **params)
    else:
        text = ":information_source: " + t(
            lang, "dm.bump_other", state=term(lang, "bump_state", request.state), **params
        )
    if request.decision_reason:
        reason = reason_words(lang, request.decision_why, request.decision_reason)
        text += "\n" + t(lang, "bump.decision_reason", reason=mrkdwn_escape(reason))
    blocks = [section(text)]
    return Message(fit(text.splitlines()[0], 300), blocks)
