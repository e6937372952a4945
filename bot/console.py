"""Plain-text replies: the console's face (`paika cmd`, the demo) and Slack's fallback text.

Every word comes from the catalogue (`bot/messages.yml`), through the same keys Block Kit
says the same things with, so the two faces cannot drift apart in their words; only their
shape differs. Numbers, ids, names and `/gpu` examples are values.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import singledispatch
from numbers import Real
from typing import Any
from zoneinfo import ZoneInfo

from bot import array_words, config_words
from bot.blocks.job import card_use_line, preempted_line, priority, state, whole_card_line
from bot.blocks.logs import logs_header, logs_notes
from bot.blocks.matches import costliest_lines, estimates_lines, own_estimate_line, review_lines
from bot.blocks.priority import priority_header, priority_lines
from bot.blocks.quotas import expiry_words
from bot.blocks.report import (
    export_command,
    filters_of,
    group_label,
    grouping_heading,
    part_of,
    produced,
    report_words,
    row_facts,
    total_facts,
)
from bot.blocks.why import story_header, story_lines
from bot.board_words import maintenance_note, none_next_up, shared_card
from bot.i18n import DEFAULT, counted, t, term, wait_words, when
from bot.reason_words import reason_words
from bot.result_words import (
    cards_on_hosts,
    spec_line,
    template_history_words,
    template_version_words,
)
from bot.said import language_saved, listed, problem, say
from bot.usage import help_lines
from scheduler.door import (
    REPORT_JOB_LIMIT,
    BoardResult,
    BumpRecord,
    BumpResult,
    CardState,
    CardView,
    ChangeResult,
    ConfigChanged,
    ConfigDiff,
    ConfigHistory,
    ConfigShown,
    DecisionResult,
    EstimatesReport,
    HostView,
    JobOutcome,
    JobRecord,
    JobState,
    JobView,
    LanguageChoice,
    LogsResult,
    MatchesReport,
    MatchReview,
    PriorityResult,
    QueueResult,
    QuotaListing,
    QuotaView,
    ReportResult,
    StatusResult,
    SubmitResult,
    TemplateHistory,
    TemplateVersionView,
    TypeSummary,
    UsageRow,
    Verdict,
    Wait,
    WhyResult,
)
from scheduler.errors import UserError
from scheduler.grammar import Help
from scheduler.results import Listing, Said

# How many waiting jobs a queue listing shows before it summarises the rest.
QUEUE_LISTING_LIMIT = 30
# Separators between the parts of one line; they are punctuation, not words.
PARTS = " · "
EVENTS = "; "


@singledispatch
def render(result: object, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    """The plain text of a service result, in `lang`."""
    raise TypeError(f"no text form for {type(result).__name__}")


@render.register
def _problem(error: UserError, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    return problem(lang, error)


@render.register
def _help(result: Help, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    return "\n".join(help_lines(lang, result))


@render.register
def _said(result: Said, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    return say(lang, result)


@render.register
def _listing(result: Listing, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    return "\n".join(listed(lang, result))


@render.register
def _submit(result: SubmitResult, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    view, job = result.view, result.view.job
    lines = [
        t(
            lang,
            "console.submit",
            id=job.id,
            name=job.name,
            team=view.team,
            needs=_needs(lang, job),
            estimate=t(lang, "unit.gpu_hours", n=job.est_gpu_hours),
            priority=priority(lang, job.priority),
        ),
        _where(lang, view, zone),
    ]
    if view.likely_type:
        lines.append(t(lang, "console.likely_type", gpu_type=view.likely_type))
    if result.bump is not None:
        lines.append(
            t(
                lang,
                "submit.bump",
                asked=priority(lang, result.bump.to_priority),
                queued=priority(lang, job.priority),
                id=result.bump.id,
            )
        )
    if result.array is not None:
        lines.append(array_words.submitted(lang, result.array))
    if result.pipeline:
        lines.append(array_words.pipeline(lang, result.pipeline))
    if not job.data_ready:
        lines.append(t(lang, "submit.ready_hint", command=f"/gpu ready #{job.id}"))
    admission = result.admission
    if admission is not None and admission.verdict is not Verdict.ADMIT:
        lines.append(
            t(
                lang,
                "submit.admission",
                backlog=admission.backlog_hours,
                limit=admission.max_backlog_hours,
            )
        )
    return "\n".join(lines)


@render.register
def _change(result: ChangeResult, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    job = result.view.job
    note = t(lang, result.note.value)
    if result.cancelled:
        note = array_words.cancelled(lang, job.id or 0, result.cancelled)
    lines = [t(lang, "console.change", id=job.id, name=job.name, note=note)]
    lines.append(_where(lang, result.view, zone))
    return "\n".join(line for line in lines if line)


@render.register
def _status(result: StatusResult, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    job = result.view.job
    command = job.command if result.shows_command else t(lang, "status.command_hidden")
    run = [t(lang, "console.status.command", command=command)]
    if job.image:
        run.append(t(lang, "console.status.image", image=job.image))
    if job.template:
        run.append(template_line(lang, job.template, job.template_version))
    lines = [
        t(lang, "status.header", id=job.id, name=job.name, state=state(lang, job.state)),
        t(
            lang,
            "console.status.people",
            owner=_mention(job.owner),
            team=result.view.team,
            priority=priority(lang, job.priority),
        ),
        t(
            lang,
            "console.status.needs",
            needs=_needs(lang, job),
            estimate=t(lang, "unit.gpu_hours", n=job.est_gpu_hours),
            data=_data(lang, job),
        ),
        PARTS.join(run),
        t(lang, "console.status.submitted", at=when(lang, job.submitted_at, zone)),
    ]
    if result.cards:
        key = (
            "console.status.runs_on"
            if job.state in (JobState.RUNNING, JobState.UNKNOWN)
            else "console.status.ran_on"
        )
        lines.append(t(lang, key, where=cards_on_hosts(lang, result.cards)))
    elif result.hosts:
        lines.append(t(lang, "console.status.hosts", hosts=", ".join(result.hosts)))
    where = _where(lang, result.view, zone)
    if where:
        lines.append(where)
    if job.state_reason and job.state in (JobState.CANCELLED, JobState.FAILED, JobState.PREEMPTED):
        reason = reason_words(lang, job.state_why, job.state_reason)
        lines.append(t(lang, "console.status.reason", reason=reason))
    lines += [_bump_line(lang, bump) for bump in result.bumps]
    lines += _spent(lang, result)
    if result.card_use is not None:
        lines.append(card_use_line(lang, result.card_use))
    if result.array is not None:
        lines += array_words.summary(lang, result.array)
    if result.estimates is not None:
        lines.append(own_estimate_line(lang, result.estimates))
    produced = _produced(job.output, job.metrics or {})
    if produced:
        lines.append(t(lang, "status.produced", what=produced))
    # Each state with why it came, in the reader's language (as Slack's history says it).
    events = EVENTS.join(
        f"{when(lang, e.at, zone)} {state(lang, e.to_state)}"
        + (f" ({reason_words(lang, e.why, e.reason)})" if e.reason else "")
        for e in result.history
    )
    lines.append(t(lang, "console.status.history", events=events))
    if result.spec is not None:
        lines.append(spec_line(lang, result.spec))
    return "\n".join(lines)


def template_line(lang: str, name: str, version: int | None) -> str:
    """Which template (and version of it) a job was submitted from."""
    if version is None:  # submitted before template versions were kept
        return t(lang, "console.status.template_unversioned", name=name)
    return t(lang, "console.status.template", name=name, version=version)


@render.register
def _template_history(result: TemplateHistory, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    return template_history_words(result, zone, lang)


@render.register
def _template_version(result: TemplateVersionView, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    return template_version_words(result, zone, lang)


def _bump_line(lang: str, bump: BumpRecord) -> str:
    by = t(lang, "status.bump_by", user=_mention(bump.decided_by)) if bump.decided_by else ""
    return t(
        lang,
        "status.bump",
        id=bump.id,
        source=priority(lang, bump.from_priority),
        target=priority(lang, bump.to_priority),
        state=term(lang, "bump_state", bump.state),
        by=by,
        reason=bump.reason,
    )


def _spent(lang: str, result: StatusResult) -> list[str]:
    """What the job has cost so far, and how much of it its GPUs sat idle."""
    if not result.ledger:
        return []
    hours = sum(entry.gpu_hours for entry in result.ledger)
    cost = sum(entry.cost for entry in result.ledger)
    lines = [t(lang, "status.used", hours=hours, cost=cost)]
    idle = sum(entry.idle_gpu_hours for entry in result.ledger)
    if idle >= 0.005:
        lines.append(t(lang, "status.idle", hours=idle))
    if result.preempted is not None:
        lines.append(preempted_line(lang, result.preempted))
    return lines


def _produced(output: str | None, metrics: Mapping[str, Any]) -> str:
    shown = ", ".join(_metric(name, value) for name, value in metrics.items())
    return PARTS.join(part for part in (output, shown) if part)


def _metric(name: str, value: object) -> str:
    return f"{name}={value:g}" if isinstance(value, Real) else f"{name}={value}"


@render.register
def _story(result: WhyResult, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    lines = [story_header(lang, result, zone)]
    lines += [f"  {line}" for line in story_lines(lang, result, zone)]
    return "\n".join(lines)


@render.register
def _logs(result: LogsResult, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    # The lines as the job printed them: the console shows them untouched.
    return "\n".join([logs_header(lang, result), *logs_notes(lang, result), *result.lines])


@render.register
def _priority(result: PriorityResult, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    lines = [priority_header(lang, result)]
    lines += [f"  {line}" for line in priority_lines(lang, result, zone)]
    return "\n".join(lines)


@render.register
def _queue(result: QueueResult, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    scope = term(lang, "queue.scope", result.scope)
    if not result.running and not result.waiting:
        return "\n".join(
            [t(lang, "queue.empty", scope=scope)] + [say(lang, b) for b in result.bookings]
        )
    lines = [_heading(lang, t(lang, "queue.running", n=len(result.running)))]
    lines += [_running_line(lang, view, zone) for view in result.running]
    lines.append(_heading(lang, t(lang, "queue.waiting", n=len(result.waiting))))
    shown = result.waiting[:QUEUE_LISTING_LIMIT]
    lines += [_waiting_line(lang, view) for view in shown]
    rest = result.waiting[len(shown) :]
    if rest:
        for_data = sum(1 for view in rest if not view.job.data_ready)
        more = t(lang, "queue.more_waiting", n=len(rest), data=for_data, hint="/gpu status #<id>")
        lines.append(f"  {more}")
    lines += [say(lang, booking) for booking in result.bookings]
    return "\n".join(lines)


def _running_line(lang: str, view: JobView, zone: ZoneInfo) -> str:
    since = t(lang, "queue.since", at=when(lang, view.job.started_at, zone))
    return f"  {_summary(lang, view)}{PARTS}{since}"


def _waiting_line(lang: str, view: JobView) -> str:
    wait, job = view.wait, view.job
    why = _why(lang, wait) if wait else state(lang, job.state)
    hours = t(lang, "console.gpu_h", n=f"{job.est_gpu_hours:g}")
    return f"  {_place(wait)} {_summary(lang, view)}{PARTS}{hours} — {why}"


@render.register
def _bump(result: BumpResult, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    job = result.view.job
    if result.applied:
        applied = t(lang, "bump.applied", job=_ref(job), priority=priority(lang, job.priority))
        lines = (applied, whole_card_line(lang, job), _where(lang, result.view, zone))
        return "\n".join(line for line in lines if line)
    request = result.request
    assert request is not None
    pending = t(
        lang,
        "bump.pending",
        id=request.id,
        job=_ref(job),
        source=priority(lang, request.from_priority),
        target=priority(lang, request.to_priority),
        team=result.view.team,
    )
    hint = t(
        lang,
        "console.bump.hint",
        approve=f"/gpu approve {request.id}",
        deny=f"/gpu deny {request.id}",
    )
    return f"{pending}\n{hint}"


@render.register
def _decision(result: DecisionResult, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    request, job = result.request, result.view.job
    if result.moot:
        return t(
            lang,
            "decision.moot",
            id=request.id,
            job=_ref(job),
            state=term(lang, "state", job.state),
            priority=priority(lang, job.priority),
        )
    state = term(lang, "bump_state", request.state)
    if not result.changed:
        return t(
            lang,
            "decision.unchanged",
            id=request.id,
            state=state,
            by=_mention(request.decided_by),
            at=when(lang, request.decided_at, zone),
        )
    changed = t(
        lang,
        "decision.changed",
        id=request.id,
        state=state,
        job=_ref(job),
        priority=priority(lang, job.priority),
    )
    whole_card = whole_card_line(lang, job)
    return changed if whole_card is None else f"{changed}\n{whole_card}"


@render.register
def _quotas(result: QuotaListing, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    if not result.quotas:
        return t(lang, result.empty.value) if result.empty else ""
    return "\n".join(_quota_line(lang, view) for view in result.quotas)


def _quota_line(lang: str, view: QuotaView) -> str:
    quota, state = view.quota, view.state
    return t(
        lang,
        "quota.line",
        quota=f"#{quota.id}",
        team=view.team,
        gpu_type=quota.gpu_type or t(lang, "quota.any_type"),
        used=state.used_hours,
        total=quota.gpu_hours,
        left=state.left_hours,
        expiry=expiry_words(lang, quota.expires_on, view.days_left),
        owner=_mention(quota.owner),
    )


@render.register
def _board(result: BoardResult, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    lines = [t(lang, "board.header", at=when(lang, result.at, zone))]
    if not result.hosts:
        lines.append(t(lang, "board.no_hosts"))
    lines += [_type_line(lang, summary) for summary in result.types]
    lines += [_host_line(lang, host, zone) for host in result.hosts]
    lines.append(_board_queue(lang, result))
    if result.bookings:
        lines.append(_heading(lang, t(lang, "board.bookings")))
        lines += [f"  {say(lang, booking)}" for booking in result.bookings]
    if result.next_up:
        lines.append(_heading(lang, t(lang, "board.next_up")))
        lines += [_next_up(lang, n, view, zone) for n, view in enumerate(result.next_up, 1)]
    elif waiting := sum(result.waiting_by_class.values()):
        lines.append(none_next_up(lang, waiting, result.waiting_for_data))
    if any(host.cards for host in result.hosts):
        marks = PARTS.join(f"{mark} {_card(lang, state)}" for state, mark in MARKS.items())
        lines.append(t(lang, "console.board.key", marks=marks))
    version = config_words.in_force(lang, result.config_version)
    if version:
        lines.append(version)
    return "\n".join(lines)


# How each card looks on the console's board; its name is the catalogue's `card.*`.
MARKS: dict[CardState, str] = {
    CardState.FREE: "□",
    CardState.BUSY: "▣",
    CardState.IDLE_HELD: "◌",
    CardState.FOREIGN: "◆",
    CardState.DRAINING: "▭",
    CardState.DOWN: "✕",
    CardState.UNLISTED: "?",
}


def _type_line(lang: str, summary: TypeSummary) -> str:
    counts = [t(lang, "console.board.free", n=summary.free)]
    if summary.busy:
        counts.append(t(lang, "console.board.busy", n=summary.busy))
    if summary.idle_held:
        counts.append(t(lang, "console.board.idle_held", n=summary.idle_held))
    if summary.down:
        counts.append(t(lang, "console.board.unavailable", n=summary.down))
    if summary.shared:
        counts.append(t(lang, "console.board.shared", n=summary.shared))
    head = counted(
        lang, "console.board.type", summary.total, gpu_type=summary.gpu_type, total=summary.total
    )
    line = PARTS.join([head, *counts])
    if not summary.listed:
        line += "\n  " + t(lang, "board.unlisted_type", gpu_type=summary.gpu_type)
    return line


def _board_queue(lang: str, result: BoardResult) -> str:
    waiting = sum(result.waiting_by_class.values())
    classes = ", ".join(
        t(lang, "console.board.class_count", n=n, priority=priority(lang, name))
        for name, n in result.waiting_by_class.items()
        if n
    )
    key = "console.board.queue_by_class" if classes else "console.board.queue"
    text = t(lang, key, running=result.running, waiting=waiting, classes=classes)
    if result.waiting_for_data:
        text = t(lang, "console.board.for_data", text=text, n=result.waiting_for_data)
    return text


def _host_line(lang: str, host: HostView, zone: ZoneInfo) -> str:
    notes = [term(lang, "host.health", host.state)] if host.state != "up" else []
    if host.draining:
        notes.append(t(lang, "board.draining"))
    if (window := maintenance_note(lang, host, zone)) is not None:
        notes.append(window)
    if host.insecure:
        notes.append(t(lang, "board.insecure"))
    name = host.name + (f" ({', '.join(notes)})" if notes else "")
    if not host.cards:
        return t(lang, "console.board.no_gpus", host=name)
    # Neighbouring cards in the same state and held by the same job share one entry.
    runs: list[list[CardView]] = []
    for card in host.cards:
        last = runs[-1][-1] if runs else None
        if (
            last is not None
            and card.index == last.index + 1
            and (card.state, card.job_id) == (last.state, last.job_id)
            and not (card.shared or last.shared)  # a shared card is said on its own
        ):
            runs[-1].append(card)
        else:
            runs.append([card])
    return f"{name}: " + PARTS.join(_run(lang, run) for run in runs)


def _run(lang: str, cards: list[CardView]) -> str:
    first, last = cards[0], cards[-1]
    where = f"gpu{first.index}" + (f"-{last.index}" if last is not first else "")
    mark, word = MARKS[first.state], _card(lang, first.state)
    if first.job_id is None:
        return f"{where} {mark} {word}"
    if first.shared:
        jobs = shared_card(
            lang, first, lambda on: f"#{on.job_id} {on.job_name}", lambda u: f"({_mention(u)})"
        )
        return f"{where} {mark} {jobs}" + (
            f" {word}" if first.state in (CardState.IDLE_HELD, CardState.DOWN) else ""
        )
    held = f"{where} {mark} #{first.job_id} {first.job_name} ({_mention(first.owner)})"
    return held + (f" {word}" if first.state in (CardState.IDLE_HELD, CardState.DOWN) else "")


def _next_up(lang: str, place: int, view: JobView, zone: ZoneInfo) -> str:
    """One job of "next up", numbered by when it should start (not its queue place)."""
    wait = view.wait
    line = f"  {place}. {_summary(lang, view)}"
    if wait is None:
        return line
    line += f" — {_why(lang, wait)}"
    if wait.eta is not None:
        at = when(lang, datetime.fromtimestamp(wait.eta, UTC), zone)
        line = t(lang, "console.board.estimated_start", text=line, at=at)
    return line


@render.register
def _report(result: ReportResult, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    who = t(lang, "console.report.team", team=result.team) if result.team else None
    header = t(
        lang,
        "console.report.header",
        who=who or t(lang, "report.all_teams"),
        start=when(lang, result.start, zone),
        end=when(lang, result.end, zone),
    )
    lines = [header]
    filters = filters_of(result.ask)
    if filters:
        lines.append(t(lang, "report.only", filters=filters))
    if not result.rows:
        return "\n".join([*lines, t(lang, "report.empty"), *_file_hint(lang, result)])
    by = result.by
    labels = [group_label(lang, by, row) for row in result.rows]
    label_width = max(len(label) for label in labels)
    type_width = max(len(row.gpu_type) for row in result.rows) if by is None else 0
    lines.append(_heading(lang, grouping_heading(lang, by)))
    lines += [
        _usage_line(lang, row, label.ljust(label_width), type_width)
        for row, label in zip(result.rows, labels, strict=True)
    ]
    lines.append(
        t(
            lang,
            "console.report.total",
            hours=result.total_gpu_hours,
            cost=result.total_cost,
            jobs=_jobs(lang, result.job_count),
        )
    )
    lines.append("  " + PARTS.join(total_facts(lang, result)))
    heading = t(lang, "report.jobs")
    if result.pages > 1:
        heading = PARTS.join(
            [heading, t(lang, "report.page", page=result.page, pages=result.pages)]
        )
    lines.append(_heading(lang, heading))
    lines += [_outcome_line(lang, job) for job in result.jobs]
    after = result.job_count - (result.page - 1) * REPORT_JOB_LIMIT - len(result.jobs)
    if after > 0:
        lines.append("  " + t(lang, "status.more", n=after))
    if result.page < result.pages:
        words = report_words(result.ask, page=result.page + 1)
        lines.append("  " + t(lang, "console.report.next", command=f"/gpu {words}"))
    lines += _file_hint(lang, result)
    return "\n".join(lines)


def _file_hint(lang: str, result: ReportResult) -> list[str]:
    if not result.ask.file:
        return []
    command = export_command(result.ask, result.ask.file)
    return [t(lang, "console.report.file", command=command)]


@render.register
def _match(result: MatchReview, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    return "\n".join(review_lines(lang, result, zone))


@render.register
def _costliest(result: MatchesReport, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    return "\n".join(costliest_lines(lang, result, zone))


@render.register
def _estimates(result: EstimatesReport, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    return "\n".join(estimates_lines(lang, result))


def _usage_line(lang: str, row: UsageRow, label: str, type_width: int) -> str:
    spent = t(
        lang, "console.report.row", hours=row.gpu_hours, cost=row.cost, jobs=_jobs(lang, row.jobs)
    )
    where = f"{label}  {row.gpu_type.ljust(type_width)}" if type_width else label
    return f"  {where}  {spent}  {PARTS.join(row_facts(lang, row))}"


def _outcome_line(lang: str, job: JobOutcome) -> str:
    parts = [f"#{job.job_id} {job.name}", job.team]
    part = part_of(job)
    if part is not None:
        parts.append(part)
    parts += [
        _mention(job.owner),
        state(lang, job.state),
        t(lang, "console.report.spent", hours=job.gpu_hours, cost=job.cost),
    ]
    return f"  {PARTS.join(parts)} → {produced(lang, job)}"


def _jobs(lang: str, n: int) -> str:
    return counted(lang, "console.report.jobs", n, n=n)


@render.register
def _language(result: LanguageChoice, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    return language_saved(result)


def _heading(lang: str, text: str) -> str:
    return t(lang, "console.heading", text=text)


def _ref(job: JobRecord) -> str:
    return f"#{job.id} {job.name}"


def _mention(user: str | None) -> str:
    return f"<@{user}>"


def _card(lang: str, state: CardState) -> str:
    return term(lang, "card", state.value)


def _place(wait: Wait | None) -> str:
    return f"{wait.position}." if wait else "-."


def _summary(lang: str, view: JobView) -> str:
    """A job in a listing: id and name, team, class, needs."""
    job = view.job
    parts = [_ref(job), view.team, priority(lang, job.priority), _needs(lang, job)]
    return PARTS.join(parts)


def _needs(lang: str, job: JobRecord) -> str:
    parts = [t(lang, "needs.gpus", n=job.gpus)]
    if job.gpu_types:
        parts.append("/".join(job.gpu_types))
    if job.shares_card:  # its memory is what it uses, beside another job's
        parts.append(t(lang, "needs.shared", gib=job.min_memory_gib or 0))
    elif job.min_memory_gib:
        parts.append(t(lang, "needs.memory", gib=job.min_memory_gib))
    if job.min_speed:
        parts.append(t(lang, "needs.speed", speed=job.min_speed))
    return " ".join(parts)


def _data(lang: str, job: JobRecord) -> str:
    words = t(lang, "data.ready" if job.data_ready else "data.not_ready")
    if job.data_location:
        return t(lang, "data.with_location", state=words, location=job.data_location)
    return words


def _why(lang: str, wait: Wait) -> str:
    """Why a job waits, as of when the policy worked it out."""
    return wait_words(lang, wait, wait.as_of)


def _where(lang: str, view: JobView, zone: ZoneInfo) -> str:
    wait = view.wait
    if wait is None:
        return ""
    if wait.eta is None:
        return t(lang, "console.where", position=wait.position, why=_why(lang, wait))
    at = when(lang, datetime.fromtimestamp(wait.eta, UTC), zone)
    return t(lang, "console.where_eta", position=wait.position, why=_why(lang, wait), at=at)


# --- The policy config under version control (/gpu config …) ------------------------------
@render.register
def _config_shown(result: ConfigShown, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    lines = config_words.shown_lines(lang, result, zone)
    if result.key is None:
        lines.append(result.content.rstrip("\n"))
    return "\n".join(lines)


@render.register
def _config_changed(result: ConfigChanged, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    return "\n".join(config_words.changed_lines(lang, result, zone))


@render.register
def _config_history(result: ConfigHistory, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    return "\n".join(config_words.history_lines(lang, result, zone))


@render.register
def _config_diff(result: ConfigDiff, zone: ZoneInfo, lang: str = DEFAULT) -> str:
    return "\n".join(config_words.diff_lines(lang, result))
