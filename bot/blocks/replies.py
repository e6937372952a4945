"""Block Kit replies to `/gpu` commands: one builder per service result.

The content mirrors `bot.console` (the CLI's plain text), said in the user's
language and shaped for Slack's limits. `Message.text` is the short line a notification
shows; the blocks carry the whole reply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import singledispatch
from numbers import Real
from typing import Any
from zoneinfo import ZoneInfo

from bot import array_words, config_words
from bot.blocks.board import board_blocks
from bot.blocks.common import (
    MESSAGE_BLOCKS,
    Block,
    Message,
    code,
    code_block,
    context,
    divider,
    escape_keeping_mentions,
    fields,
    fit,
    header,
    labelled,
    listing,
    mention,
    mrkdwn_escape,
    section,
)
from bot.blocks.help import help_message
from bot.blocks.job import (
    card_use_line,
    data,
    gpu_hours,
    labelled_inline,
    needs,
    preempted_line,
    priority,
    ref,
    running_line,
    state,
    wait_detail,
    waiting_line,
    whole_card_line,
)
from bot.blocks.logs import logs_message
from bot.blocks.matches import (
    costliest_message,
    estimates_message,
    own_estimate_line,
    review_message,
)
from bot.blocks.priority import priority_message
from bot.blocks.quotas import quota_line
from bot.blocks.report import report_message
from bot.blocks.why import why_message
from bot.i18n import counted, t, term, when
from bot.reason_words import reason_words
from bot.result_words import (
    cards_on_hosts,
    spec_line,
    template_history_words,
    template_version_words,
)
from bot.said import language_saved, listed, say
from scheduler.door import (
    BoardResult,
    BumpRecord,
    BumpResult,
    ChangeResult,
    ConfigChanged,
    ConfigDiff,
    ConfigHistory,
    ConfigShown,
    DecisionResult,
    EstimatesReport,
    JobState,
    JobView,
    LanguageChoice,
    LogsResult,
    MatchesReport,
    MatchReview,
    PriorityResult,
    QueueResult,
    QuotaListing,
    ReportResult,
    StatusResult,
    SubmitResult,
    TemplateHistory,
    TemplateVersionView,
    Verdict,
    WhyResult,
)
from scheduler.grammar import Help
from scheduler.results import Listing, Said

# How many jobs a queue reply lists before it summarises the rest (as the CLI does).
QUEUE_SHOWN = 30
RUNNING_SHOWN = 20
HISTORY_SHOWN = 15
# Blocks of a queue reply for running jobs; the waiting ones get the rest.
RUNNING_BLOCKS = 8
# A job's spec holds its whole command; a context element holds 3,000 characters.
SPEC_SHOWN = 2900
# A notification shows one short line.
NOTIFICATION_TEXT = 300

__all__ = ["Message", "error", "reply"]

# The jobs of an array a status lists in Slack (a section holds 3,000 characters).
SHOWN_MEMBERS = 30


@singledispatch
def reply(result: object, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    """The Block Kit reply to a service result (every type has its builder below, as every
    type has its console words: tests/bot/test_said.py holds the two to the same types)."""
    raise TypeError(f"no Block Kit form for {type(result).__name__}")


def error(message: str, lang: str, example: str | None = None) -> Message:
    """A parser or service error: a translated lead, the (English) message, an example."""
    lead = t(lang, "error.lead")
    blocks = [section(f":warning: *{lead}*")]
    lines = escape_keeping_mentions(message).splitlines() or [" "]
    blocks += listing(lines, MESSAGE_BLOCKS - 2, lambda shown: _more_lines(lang, lines, shown))
    if example:
        blocks.append(context(t(lang, "error.example", example=code(example))))
    return Message(_note(f"{lead} {lines[0]}"), blocks)


@reply.register
def _help(result: Help, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    return help_message(result, lang)


@reply.register
def _said(result: Said, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    return _words(say(lang, result), lang)


@reply.register
def _listing(result: Listing, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    return _words("\n".join(listed(lang, result)), lang)


@reply.register
def _template_history(result: TemplateHistory, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    return _words(template_history_words(result, zone, lang), lang)


@reply.register
def _template_version(
    result: TemplateVersionView, lang: str, zone: ZoneInfo, now: datetime
) -> Message:
    return _words(template_version_words(result, zone, lang), lang)


@reply.register
def _language(result: LanguageChoice, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    return _words(language_saved(result), lang)


@reply.register
def _submit(result: SubmitResult, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    view, job = result.view, result.view.job
    title = t(lang, "submit.header", id=job.id, name=job.name)
    items = [
        labelled(t(lang, "label.team"), mrkdwn_escape(view.team)),
        labelled(t(lang, "label.priority"), priority(lang, job.priority)),
        labelled(t(lang, "label.needs"), needs(lang, job)),
        labelled(t(lang, "label.estimate"), gpu_hours(lang, job.est_gpu_hours)),
        labelled(t(lang, "label.data"), data(lang, job)),
    ]
    if view.likely_type:
        items.append(labelled(t(lang, "label.likely_type"), mrkdwn_escape(view.likely_type)))
    blocks = [header(title), fields(items)]
    if view.wait is not None:
        blocks.append(section(wait_detail(lang, view.wait, zone, now)))
    if result.bump is not None:
        bump = result.bump
        blocks.append(
            section(
                ":hourglass_flowing_sand: "
                + t(
                    lang,
                    "submit.bump",
                    asked=priority(lang, bump.to_priority),
                    queued=priority(lang, job.priority),
                    id=bump.id,
                )
            )
        )
    if result.array is not None:
        blocks.append(section(mrkdwn_escape(array_words.submitted(lang, result.array))))
    if result.pipeline:
        blocks.append(section(mrkdwn_escape(array_words.pipeline(lang, result.pipeline))))
    if not job.data_ready:
        blocks.append(context(t(lang, "submit.ready_hint", command=code(f"/gpu ready #{job.id}"))))
    admission = result.admission
    if admission is not None and admission.verdict is not Verdict.ADMIT:
        blocks.append(
            section(
                ":warning: "
                + t(
                    lang,
                    "submit.admission",
                    backlog=admission.backlog_hours,
                    limit=admission.max_backlog_hours,
                )
            )
        )
    return Message(_note(mrkdwn_escape(title)), blocks)


# The service's notes on a change, by their English words, so they can be said in Chinese
# too; a note not listed here is shown as the service wrote it.
@reply.register
def _change(result: ChangeResult, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    job = result.view.job
    note = t(lang, result.note.value)
    if result.cancelled:
        note = array_words.cancelled(lang, job.id or 0, result.cancelled)
    mark = ":white_check_mark:" if result.changed else ":information_source:"
    blocks = [
        section(f"{mark} {ref(job.id, job.name)}: {note}"),
        context(t(lang, "change.state", state=state(lang, job.state))),
    ]
    if result.view.wait is not None:
        blocks.append(section(wait_detail(lang, result.view.wait, zone, now)))
    return Message(_note(f"{ref(job.id, job.name)}: {note}"), blocks)


@reply.register
def _status(result: StatusResult, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    view, job = result.view, result.view.job
    title = t(lang, "status.header", id=job.id, name=job.name, state=state(lang, job.state))
    items = [
        labelled(t(lang, "label.owner"), mention(job.owner)),
        labelled(t(lang, "label.team"), mrkdwn_escape(view.team)),
        labelled(t(lang, "label.priority"), priority(lang, job.priority)),
        labelled(t(lang, "label.needs"), needs(lang, job)),
        labelled(t(lang, "label.estimate"), gpu_hours(lang, job.est_gpu_hours)),
        labelled(t(lang, "label.data"), data(lang, job)),
        labelled(t(lang, "label.submitted"), when(lang, job.submitted_at, zone)),
    ]
    if job.started_at is not None:
        items.append(labelled(t(lang, "label.started"), when(lang, job.started_at, zone)))
    if job.ended_at is not None:
        items.append(labelled(t(lang, "label.ended"), when(lang, job.ended_at, zone)))
    if result.cards:
        key = (
            "label.runs_on" if job.state in (JobState.RUNNING, JobState.UNKNOWN) else "label.ran_on"
        )
        items.append(labelled(t(lang, key), mrkdwn_escape(cards_on_hosts(lang, result.cards))))
    elif result.hosts:
        items.append(labelled(t(lang, "label.hosts"), mrkdwn_escape(", ".join(result.hosts))))
    if view.likely_type:
        items.append(labelled(t(lang, "label.likely_type"), mrkdwn_escape(view.likely_type)))
    if job.template:
        used = job.template
        if job.template_version is not None:
            used = t(lang, "template.ref", name=job.template, version=job.template_version)
        items.append(labelled(t(lang, "label.template"), mrkdwn_escape(used)))
    shown = code_block(job.command) if result.shows_command else t(lang, "status.command_hidden")
    run = f"*{t(lang, 'label.command')}*\n{shown}"
    if job.image:
        run += "\n" + labelled_inline(lang, t(lang, "label.image"), code(job.image))
    blocks = [header(title), fields(items), section(run)]
    if result.estimates is not None:
        blocks.append(context(mrkdwn_escape(own_estimate_line(lang, result.estimates))))
    if result.spec is not None:
        blocks.append(context(fit(mrkdwn_escape(spec_line(lang, result.spec)), SPEC_SHOWN)))
    if view.wait is not None:
        blocks.append(section(wait_detail(lang, view.wait, zone, now)))
    if job.state_reason and job.state in (JobState.CANCELLED, JobState.FAILED, JobState.PREEMPTED):
        reason = mrkdwn_escape(reason_words(lang, job.state_why, job.state_reason))
        blocks.append(section(labelled_inline(lang, t(lang, "label.reason"), reason)))
    facts = [_bump_line(lang, bump) for bump in result.bumps]
    if result.ledger:
        hours = sum(entry.gpu_hours for entry in result.ledger)
        cost = sum(entry.cost for entry in result.ledger)
        facts.append(t(lang, "status.used", hours=hours, cost=cost))
        idle = sum(entry.idle_gpu_hours for entry in result.ledger)
        if idle >= 0.005:
            facts.append(t(lang, "status.idle", hours=idle))
    if result.preempted is not None:
        facts.append(mrkdwn_escape(preempted_line(lang, result.preempted)))
    if result.card_use is not None:
        facts.append(mrkdwn_escape(card_use_line(lang, result.card_use)))
    if result.array is not None:
        facts.append(
            mrkdwn_escape("\n".join(array_words.summary(lang, result.array, shown=SHOWN_MEMBERS)))
        )
    produced = _produced(job.output, job.metrics or {})
    if produced:
        facts.append(t(lang, "status.produced", what=produced))
    if facts:
        blocks += listing(facts, 4, lambda shown: t(lang, "status.more", n=len(facts) - shown))
    blocks += _history(result, lang, zone)
    return Message(_note(mrkdwn_escape(title)), blocks)


def _bump_line(lang: str, bump: BumpRecord) -> str:
    by = t(lang, "status.bump_by", user=mention(bump.decided_by)) if bump.decided_by else ""
    return t(
        lang,
        "status.bump",
        id=bump.id,
        source=priority(lang, bump.from_priority),
        target=priority(lang, bump.to_priority),
        state=term(lang, "bump_state", bump.state),
        by=by,
        reason=mrkdwn_escape(bump.reason),
    )


def _produced(output: str | None, metrics: Mapping[str, Any]) -> str:
    parts = [code(output)] if output else []
    if metrics:
        parts.append(
            ", ".join(
                f"{mrkdwn_escape(str(name))}={value:g}"
                if isinstance(value, Real)
                else f"{mrkdwn_escape(str(name))}={mrkdwn_escape(str(value))}"
                for name, value in metrics.items()
            )
        )
    return " · ".join(parts)


def _history(result: StatusResult, lang: str, zone: ZoneInfo) -> list[Block]:
    events = list(result.history)
    recent = events[-HISTORY_SHOWN:]
    earlier = len(events) - len(recent)
    lines = [
        f"{when(lang, event.at, zone)} · {state(lang, event.to_state)}"
        + (
            f" — {mrkdwn_escape(reason_words(lang, event.why, event.reason))}"
            if event.reason
            else ""
        )
        for event in recent
    ]
    if earlier:
        lines.insert(0, counted(lang, "status.earlier", earlier, n=earlier))
    return [context(fit(f"*{t(lang, 'label.history')}*\n" + "\n".join(lines), 3000))]


@reply.register
def _story(result: WhyResult, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    return why_message(result, lang, zone)


@reply.register
def _logs(result: LogsResult, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    return logs_message(result, lang)


@reply.register
def _priority(result: PriorityResult, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    return priority_message(result, lang, zone)


@reply.register
def _queue(result: QueueResult, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    scope = term(lang, "queue.scope", result.scope)
    title = t(lang, "queue.header", scope=scope)
    if not result.running and not result.waiting:
        return Message(
            _note(mrkdwn_escape(title)),
            [header(title), section(t(lang, "queue.empty", scope=scope))],
        )
    hint = code("/gpu status #<id>" if result.scope == "mine" else "/gpu queue mine")
    running = result.running
    blocks = [header(title)]
    blocks += listing(
        [running_line(lang, view, zone) for view in running[:RUNNING_SHOWN]],
        RUNNING_BLOCKS,
        lambda shown: t(lang, "queue.more_running", n=len(running) - shown, hint=hint),
        total=len(running),
        chars=4000,
        heading=f"*{t(lang, 'queue.running', n=len(running))}*",
    )
    blocks.append(divider())
    waiting = result.waiting
    blocks += listing(
        [waiting_line(lang, view, zone, now) for view in waiting[:QUEUE_SHOWN]],
        MESSAGE_BLOCKS - len(blocks),
        lambda shown: _more_waiting(lang, waiting[shown:], hint),
        total=len(waiting),
        chars=8000,
        heading=f"*{t(lang, 'queue.waiting', n=len(waiting))}*",
    )
    if result.bookings:
        booked = "\n".join(mrkdwn_escape(say(lang, b)) for b in result.bookings)
        blocks.append(context(f":calendar: {booked}"))
    return Message(_note(mrkdwn_escape(title)), blocks)


def _more_waiting(lang: str, rest: Sequence[JobView], hint: str) -> str:
    for_data = sum(1 for view in rest if not view.job.data_ready)
    return t(lang, "queue.more_waiting", n=len(rest), data=for_data, hint=hint)


@reply.register
def _bump(result: BumpResult, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    job = result.view.job
    if result.applied:
        text = t(
            lang, "bump.applied", job=ref(job.id, job.name), priority=priority(lang, job.priority)
        )
        blocks = [section(f":white_check_mark: {text}")]
        if (whole_card := whole_card_line(lang, job)) is not None:
            blocks.append(section(whole_card))
        if result.view.wait is not None:
            blocks.append(section(wait_detail(lang, result.view.wait, zone, now)))
        return Message(_note(text), blocks)
    request = result.request
    if request is None:  # a bump that was neither applied nor asked for: say what is known
        return reply(result.view, lang, zone, now)
    text = t(
        lang,
        "bump.pending",
        id=request.id,
        job=ref(job.id, job.name),
        source=priority(lang, request.from_priority),
        target=priority(lang, request.to_priority),
        team=mrkdwn_escape(result.view.team),
    )
    hint = t(
        lang,
        "bump.pending_hint",
        approve=code(f"/gpu approve {request.id}"),
        deny=code(f"/gpu deny {request.id}"),
    )
    return Message(_note(text), [section(f":hourglass_flowing_sand: {text}"), context(hint)])


@reply.register
def _decision(result: DecisionResult, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    request, job = result.request, result.view.job
    if result.moot:
        text = t(
            lang,
            "decision.moot",
            id=request.id,
            job=ref(job.id, job.name),
            state=term(lang, "state", job.state),
            priority=priority(lang, job.priority),
        )
        return Message(_note(text), [section(f":information_source: {text}")])
    if not result.changed:
        text = t(
            lang,
            "decision.unchanged",
            id=request.id,
            state=term(lang, "bump_state", request.state),
            by=mention(request.decided_by),
            at=when(lang, request.decided_at, zone),
        )
        return Message(_note(text), [section(f":information_source: {text}")])
    text = t(
        lang,
        "decision.changed",
        id=request.id,
        state=term(lang, "bump_state", request.state),
        job=ref(job.id, job.name),
        priority=priority(lang, job.priority),
    )
    blocks = [section(f":white_check_mark: {text}")]
    if (whole_card := whole_card_line(lang, job)) is not None:
        blocks.append(section(whole_card))
    return Message(_note(text), blocks)


@reply.register
def _quotas(result: QuotaListing, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    title = t(lang, "quota.header")
    if not result.quotas:
        none = t(lang, result.empty.value if result.empty else "quota.none")
        return Message(_note(mrkdwn_escape(title)), [header(title), section(none)])
    quotas = result.quotas
    blocks = [header(title)]
    blocks += listing(
        [quota_line(lang, view) for view in quotas],
        MESSAGE_BLOCKS - 1,
        lambda shown: counted(lang, "quota.more", len(quotas) - shown, n=len(quotas) - shown),
    )
    return Message(_note(mrkdwn_escape(title)), blocks)


@reply.register
def _board(result: BoardResult, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    blocks = board_blocks(result, lang, zone, now)
    title = t(lang, "board.header", at=when(lang, result.at, zone))
    return Message(_note(mrkdwn_escape(title)), blocks)


@reply.register
def _match(result: MatchReview, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    return review_message(result, lang, zone)


@reply.register
def _costliest(result: MatchesReport, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    return costliest_message(result, lang, zone)


@reply.register
def _estimates(result: EstimatesReport, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    return estimates_message(result, lang)


@reply.register
def _report(result: ReportResult, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    return report_message(result, lang, zone, now)


@reply.register
def _job_view(result: JobView, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    job = result.job
    text = f"{ref(job.id, job.name)} · {state(lang, job.state)} · {priority(lang, job.priority)}"
    blocks = [section(text)]
    if result.wait is not None:
        blocks.append(section(wait_detail(lang, result.wait, zone, now)))
    return Message(_note(text), blocks)


def _words(text: str, lang: str) -> Message:
    """Plain lines (help, said sentences, listings): sections of them, mentions kept."""
    lines = escape_keeping_mentions(text).splitlines() or [" "]
    blocks = listing(lines, MESSAGE_BLOCKS, lambda shown: _more_lines(lang, lines, shown))
    return Message(_note(lines[0]), blocks)


def _more_lines(lang: str, lines: Sequence[str], shown: int) -> str:
    return counted(lang, "reply.more_lines", len(lines) - shown, n=len(lines) - shown)


def _note(text: str) -> str:
    """The notification line: one escaped line, short."""
    first = text.splitlines()[0] if text else " "
    return fit(first, NOTIFICATION_TEXT)


# --- The policy config under version control (/gpu config …) ------------------------------
# Lines of the stored file a Slack reply shows; `paika cmd "config show"` prints it whole.
CONFIG_LINES_SHOWN = 60


@reply.register
def _config_shown(result: ConfigShown, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    lines = config_words.shown_lines(lang, result, zone)
    blocks = [section(mrkdwn_escape(line)) for line in lines]
    if result.key is None:
        content = result.content.rstrip("\n").splitlines()
        blocks.append(section(code_block("\n".join(content[:CONFIG_LINES_SHOWN]))))
        if len(content) > CONFIG_LINES_SHOWN:
            more = len(content) - CONFIG_LINES_SHOWN
            blocks.append(context(counted(lang, "config.trimmed", more, n=more)))
    return Message(_note(lines[0]), blocks)


@reply.register
def _config_changed(result: ConfigChanged, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    return _words("\n".join(config_words.changed_lines(lang, result, zone)), lang)


@reply.register
def _config_history(result: ConfigHistory, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    return _words("\n".join(config_words.history_lines(lang, result, zone)), lang)


@reply.register
def _config_diff(result: ConfigDiff, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    return _words("\n".join(config_words.diff_lines(lang, result)), lang)
