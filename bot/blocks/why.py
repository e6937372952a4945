"""`/gpu why`: a job's story, one line a step, said the same on the console and in Slack
(the console passes plain text through; Block Kit escapes what people typed)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.blocks.common import MESSAGE_BLOCKS, Message, header, listing, mention, mrkdwn_escape
from bot.blocks.job import priority, state
from bot.i18n import counted, t, wait_words, when
from bot.notice_words import preempt_reason
from bot.reason_words import reason_words
from scheduler.door import PreemptCode, Step, StoryStep, WaitCode, WhyResult

Escape = Callable[[str], str]
# Steps a Slack reply shows (the latest); the console shows them all.
STORY_SHOWN = 40
# Codes whose story names the job first in line ahead of it.
_BEHIND = (WaitCode.BEHIND_HIGHER_PRIORITY, WaitCode.BEHIND_EARLIER)


def story_header(lang: str, result: WhyResult, zone: ZoneInfo) -> str:
    job = result.job
    return t(
        lang,
        "why.header",
        id=job.id,
        name=job.name,
        state=state(lang, job.state),
        priority=priority(lang, job.priority),
        team=result.team,
        until=when(lang, result.until, zone),
    )


def story_lines(
    lang: str,
    result: WhyResult,
    zone: ZoneInfo,
    escape: Escape = str,
    person: Callable[[str | None], str] = lambda user: f"<@{user}>",
) -> list[str]:
    """One line per step, oldest first; what people or hosts wrote goes through `escape`."""
    return [
        t(
            lang,
            "why.line",
            at=_moment(lang, step.at, zone),
            what=_what(lang, step, zone, escape, person),
        )
        for step in result.steps
    ] or [t(lang, "why.empty")]


def why_message(result: WhyResult, lang: str, zone: ZoneInfo) -> Message:
    """The story as Block Kit: a header, then the steps (the latest kept when it is long)."""
    title = story_header(lang, result, zone)
    lines = story_lines(lang, result, zone, mrkdwn_escape, mention)
    if len(lines) > STORY_SHOWN:  # a long story: its latest steps matter most
        n = len(lines) - STORY_SHOWN
        earlier = counted(lang, "status.earlier", n, n=n)
        lines = [earlier, *lines[-STORY_SHOWN:]]
    blocks = [header(title)]
    blocks += listing(
        lines, MESSAGE_BLOCKS - 2, lambda shown: t(lang, "status.more", n=len(lines) - shown)
    )
    return Message(mrkdwn_escape(title), blocks)


def _what(
    lang: str,
    step: StoryStep,
    zone: ZoneInfo,
    escape: Escape,
    person: Callable[[str | None], str],
) -> str:
    kind = step.step
    if kind is Step.SUBMITTED:
        return t(
            lang,
            "why.step.submitted",
            actor=person(step.actor),
            state=state(lang, step.to_state or ""),
        )
    if kind is Step.WAITED and step.wait is not None:
        wait = step.wait
        reason = wait_words(lang, wait, wait.as_of)
        if wait.code in _BEHIND and wait.behind is not None:
            if step.behind_priority:
                reason = t(
                    lang,
                    "why.step.behind",
                    reason=reason,
                    job=wait.behind,
                    priority=priority(lang, step.behind_priority),
                )
            else:
                reason = t(lang, "why.step.behind_unknown_class", reason=reason, job=wait.behind)
        return t(lang, "why.step.waited", reason=reason)
    if kind is Step.RESERVED:
        return t(
            lang,
            "why.step.reserved",
            gpus=step.gpus,
            gpu_type=escape(step.gpu_type or ""),
            at=when(lang, step.until, zone),
        )
    if kind is Step.STARTED:
        started = t(
            lang,
            "why.step.started",
            hosts=escape(", ".join(step.hosts)),
            gpus=step.gpus,
            gpu_type=escape(step.gpu_type or ""),
            attempt=step.attempt,
            reason=escape(reason_words(lang, step.why, step.reason)),
        )
        if not step.alternatives:
            return started
        weighed = ", ".join(
            t(
                lang,
                "why.step.alternative",
                gpu_type=escape(a.gpu_type),
                verdict=escape(reason_words(lang, a.verdict_why, a.verdict)),
            )
            for a in step.alternatives
        )
        return f"{started}; {t(lang, 'why.step.weighed', alternatives=weighed)}"
    if kind is Step.PREEMPT_ASKED:
        if step.code in (PreemptCode.FOR_CORE, PreemptCode.FOR_SHORTER):
            return t(
                lang,
                "why.step.preempt_asked_resumes",
                at=when(lang, step.until, zone),
                reason=preempt_reason(lang, step.code, step.for_job),
            )
        return t(
            lang,
            "why.step.preempt_asked",
            at=when(lang, step.until, zone),
            for_job=step.for_job,
        )
    said = state(lang, step.to_state or "")
    what = (
        t(lang, "why.step.changed_by", state=said, actor=person(step.actor))
        if step.actor
        else t(lang, "why.step.changed", state=said)
    )
    if step.reason:
        reason = reason_words(lang, step.why, step.reason)
        what = t(lang, "why.step.because", what=what, reason=escape(reason))
    return what


def _moment(lang: str, moment: datetime, zone: ZoneInfo) -> str:
    """A step's moment to the second: a cycle's steps are seconds apart."""
    return t(lang, "why.moment", moment=moment.astimezone(zone))
