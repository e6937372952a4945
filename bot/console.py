"""Plain-text replies: the console's face (`paika cmd`, the demo) and Slack's fallback text."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import singledispatch
from zoneinfo import ZoneInfo

from bot.i18n import t
from bot.said import language_saved, listed, say
from scheduler.results import Listing, Notice, QuotaListing, Said
from scheduler.service.board import BoardResult, CardState, CardView, HostView
from scheduler.service.bumps import BumpResult, DecisionResult
from scheduler.service.jobs import ChangeResult, JobView, QueueResult, StatusResult, SubmitResult
from scheduler.service.prefs import LanguageChoice
from scheduler.service.records import JobRecord, JobState
from scheduler.service.report import ReportResult

# How many waiting jobs a queue listing shows before it summarises the rest.
QUEUE_LISTING_LIMIT = 30


def when(moment: datetime | None, zone: ZoneInfo) -> str:
    """A timestamp in the install's time zone, to the minute."""
    if moment is None:
        return "-"
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")


@singledispatch
def render(result: object, zone: ZoneInfo) -> str:
    """The plain text of a service result."""
    raise TypeError(f"no text form for {type(result).__name__}")


@render.register
def _notice(result: Notice, zone: ZoneInfo) -> str:
    return result.text


@render.register
def _said(result: Said, zone: ZoneInfo) -> str:
    return say("en", result)


@render.register
def _listing(result: Listing, zone: ZoneInfo) -> str:
    return "\n".join(listed("en", result))


@render.register
def _submit(result: SubmitResult, zone: ZoneInfo) -> str:
    job = result.view.job
    lines = [
        f"Queued job #{job.id} {job.name} for team {result.view.team}: {_needs(job)}, {job.est_gpu_hours:g} GPU-hours, {job.priority}."
    ]
    lines.append(_where(result.view, zone))
    if result.view.likely_type:
        lines.append(f"Likely card type: {result.view.likely_type}.")
    if result.bump is not None:
        lines.append(
            f"{result.bump.to_priority} needs an approver: it is queued as {job.priority}, and bump request "
            f"#{result.bump.id} to {result.bump.to_priority} is waiting for a decision."
        )
    if not job.data_ready:
        lines.append(f"When its data is in place: /gpu ready #{job.id}")
    if result.admission is not None and result.admission.words():
        lines.append(f"Heads up: {result.admission.words()}; expect a long wait.")
    return "\n".join(lines)


@render.register
def _change(result: ChangeResult, zone: ZoneInfo) -> str:
    job = result.view.job
    lines = [f"Job #{job.id} {job.name}: {t('en', result.note.value)}", _where(result.view, zone)]
    return "\n".join(line for line in lines if line)


@render.register
def _status(result: StatusResult, zone: ZoneInfo) -> str:
    job = result.view.job
    data = "ready" if job.data_ready else "not ready"
    if job.data_location:
        data += f" ({job.data_location})"
    lines = [
        f"Job #{job.id} {job.name} — {job.state.replace('_', ' ')}",
        f"owner <@{job.owner}> · team {result.view.team} · priority {job.priority}",
        f"needs {_needs(job)} · {job.est_gpu_hours:g} GPU-hours estimated · data {data}",
        f"command: {job.command}" + (f" · image {job.image}" if job.image else ""),
        f"submitted {when(job.submitted_at, zone)}",
    ]
    where = _where(result.view, zone)
    if where:
        lines.append(where)
    if job.state_reason and job.state in (JobState.CANCELLED, JobState.FAILED, JobState.PREEMPTED):
        lines.append(f"reason: {job.state_reason}")
    for bump in result.bumps:
        decided = f" by <@{bump.decided_by}>" if bump.decided_by else ""
        lines.append(
            f"bump #{bump.id} {bump.from_priority} → {bump.to_priority}: {bump.state}{decided} ({bump.reason})"
        )
    if result.ledger:
        hours = sum(entry.gpu_hours for entry in result.ledger)
        idle = sum(entry.idle_gpu_hours for entry in result.ledger)
        cost = sum(entry.cost for entry in result.ledger)
        lines.append(
            f"used {hours:.2f} GPU-hours"
            + (f" ({idle:.2f} of them idle)" if idle >= 0.005 else "")
            + f", cost {cost:.2f}"
        )
    if job.output or job.metrics:
        metrics = ", ".join(f"{k}={v:g}" for k, v in (job.metrics or {}).items())
        lines.append("produced: " + " · ".join(part for part in (job.output, metrics) if part))
    lines.append(
        "history: " + "; ".join(f"{when(e.at, zone)} {e.to_state}" for e in result.history)
    )
    return "\n".join(lines)


@render.register
def _queue(result: QueueResult, zone: ZoneInfo) -> str:
    scope = {"mine": "your jobs", "team": "your team's jobs", "all": "all jobs"}[result.scope]
    if not result.running and not result.waiting:
        return f"Nothing is waiting or running ({scope})."
    lines = [f"Running ({len(result.running)}):"]
    lines += [
        f"  #{v.job.id} {v.job.name} · {v.team} · {v.job.priority} · {_needs(v.job)} · since {when(v.job.started_at, zone)}"
        for v in result.running
    ]
    lines.append(f"Waiting ({len(result.waiting)}), in queue order:")
    shown = result.waiting[:QUEUE_LISTING_LIMIT]
    for view in shown:
        place = view.wait
        why = place.words if place else view.job.state
        lines.append(
            f"  {place.position if place else '-'}. #{view.job.id} {view.job.name} · {view.team} · {view.job.priority} · {_needs(view.job)} · {view.job.est_gpu_hours:g} GPU-h — {why}"
        )
    if len(result.waiting) > len(shown):
        rest = result.waiting[len(shown) :]
        lines.append(
            f"  … and {len(rest)} more ({sum(1 for v in rest if not v.job.data_ready)} waiting for data). See one with /gpu status #<id>"
        )
    return "\n".join(lines)


@render.register
def _bump(result: BumpResult, zone: ZoneInfo) -> str:
    job = result.view.job
    if result.applied:
        return f"Job #{job.id} {job.name} is now {job.priority}.\n{_where(result.view, zone)}"
    request = result.request
    assert request is not None
    return (
        f"Bump request #{request.id} for job #{job.id} {job.name} ({request.from_priority} → {request.to_priority}) "
        f"is waiting for an approver of team {result.view.team}.\nApprovers decide with /gpu approve {request.id} or /gpu deny {request.id}"
    )


@render.register
def _decision(result: DecisionResult, zone: ZoneInfo) -> str:
    request = result.request
    if not result.changed:
        return f"Bump request #{request.id} was already {request.state} by <@{request.decided_by}> at {when(request.decided_at, zone)}; nothing changed."
    job = result.view.job
    return (
        f"Bump request #{request.id} {request.state}. Job #{job.id} {job.name} is {job.priority}."
    )


@render.register
def _quotas(result: QuotaListing, zone: ZoneInfo) -> str:
    if not result.quotas:
        return t("en", result.empty.value) if result.empty else ""
    lines = []
    for view in result.quotas:
        q, state = view.quota, view.state
        expiry = (
            f"expired {-view.days_left} days ago"
            if view.days_left < 0
            else f"expires {q.expires_on} (in {view.days_left} days)"
        )
        lines.append(
            f"#{q.id} {view.team} · {q.gpu_type or 'any type'} · {state.used_hours:.1f} of {q.gpu_hours:g} GPU-hours used, "
            f"{state.left_hours:.1f} left · {expiry} · owner <@{q.owner}>"
        )
    return "\n".join(lines)


@render.register
def _board(result: BoardResult, zone: ZoneInfo) -> str:
    lines = [f"GPU board, {when(result.at, zone)}"]
    if not result.hosts:
        lines.append(
            "No GPU hosts yet. An admin adds one with /gpu admin host add <name> url=http://host:8470"
        )
    for summary in result.types:
        counts = [
            f"{summary.free} free",
            f"{summary.busy} busy" if summary.busy else "",
            f"{summary.idle_held} idle but held" if summary.idle_held else "",
            f"{summary.down} unavailable" if summary.down else "",
        ]
        lines.append(
            f"{summary.gpu_type}: {summary.total} GPUs · " + " · ".join(c for c in counts if c)
        )
    lines += [_host_line(host) for host in result.hosts]
    waiting = sum(result.waiting_by_class.values())
    classes = ", ".join(f"{n} {name}" for name, n in result.waiting_by_class.items() if n)
    queue = f"Queue: {result.running} running · {waiting} waiting"
    if classes:
        queue += f" ({classes})"
    if result.waiting_for_data:
        queue += f", {result.waiting_for_data} of them waiting for data"
    lines.append(queue)
    if result.next_up:
        lines.append("Next up:")
        lines += [_next_up(view, zone) for view in result.next_up]
    if any(host.cards for host in result.hosts):
        lines.append("Key: " + " · ".join(f"{mark} {word}" for mark, word in _MARKS.values()))
    return "\n".join(lines)


_MARKS: dict[CardState, tuple[str, str]] = {
    CardState.FREE: ("□", "free"),
    CardState.BUSY: ("▣", "busy"),
    CardState.IDLE_HELD: ("◌", "held but idle"),
    CardState.FOREIGN: ("◆", "used outside paika"),
    CardState.DRAINING: ("▭", "draining"),
    CardState.DOWN: ("✕", "down"),
}


def _host_line(host: HostView) -> str:
    notes = [host.state] if host.state != "up" else []
    if host.draining:
        notes.append("draining")
    if host.insecure:
        notes.append(t("en", "board.insecure"))
    name = host.name + (f" ({', '.join(notes)})" if notes else "")
    if not host.cards:
        return f"{name}: no GPUs reported yet"
    # Neighbouring cards in the same state and held by the same job share one entry.
    runs: list[list[CardView]] = []
    for card in host.cards:
        last = runs[-1][-1] if runs else None
        if (
            last is not None
            and card.index == last.index + 1
            and (card.state, card.job_id) == (last.state, last.job_id)
        ):
            runs[-1].append(card)
        else:
            runs.append([card])
    return f"{name}: " + " · ".join(_run(run) for run in runs)


def _run(cards: list[CardView]) -> str:
    first, last = cards[0], cards[-1]
    where = f"gpu{first.index}" + (f"-{last.index}" if last is not first else "")
    mark, word = _MARKS[first.state]
    if first.job_id is None:
        return f"{where} {mark} {word}"
    held = f"{where} {mark} #{first.job_id} {first.job_name} (<@{first.owner}>)"
    return held + (f" {word}" if first.state in (CardState.IDLE_HELD, CardState.DOWN) else "")


def _next_up(view: JobView, zone: ZoneInfo) -> str:
    job, wait = view.job, view.wait
    line = f"  {wait.position if wait else '-'}. #{job.id} {job.name} · {view.team} · {job.priority} · {_needs(job)}"
    if wait is None:
        return line
    line += f" — {wait.words}"
    if wait.eta is not None:
        line += f"; estimated start {when(datetime.fromtimestamp(wait.eta, UTC), zone)}"
    return line


@render.register
def _report(result: ReportResult, zone: ZoneInfo) -> str:
    who = f"team {result.team}" if result.team else "all teams"
    lines = [f"GPU usage of {who}, {when(result.start, zone)} to {when(result.end, zone)}"]
    if not result.rows:
        lines.append("No GPU time was used in this period.")
        return "\n".join(lines)
    team_width = max(len(row.team) for row in result.rows)
    type_width = max(len(row.gpu_type) for row in result.rows)
    for row in result.rows:
        jobs = "1 job" if row.jobs == 1 else f"{row.jobs} jobs"
        lines.append(
            f"  {row.team.ljust(team_width)}  {row.gpu_type.ljust(type_width)}  "
            f"{row.gpu_hours:9.2f} GPU-h  cost {row.cost:10.2f}  {jobs}"
        )
    lines.append(
        f"Total: {result.total_gpu_hours:.2f} GPU-hours, cost {result.total_cost:.2f}, "
        f"{result.job_count} {'job' if result.job_count == 1 else 'jobs'}"
    )
    lines.append("Jobs, costliest first:")
    for job in result.jobs:
        produced = [job.output or ""] + [f"{k}={v:g}" for k, v in job.metrics.items()]
        line = (
            f"  #{job.job_id} {job.name} · {job.team} · <@{job.owner}> · {job.state.replace('_', ' ')}"
            f" · {job.gpu_hours:.2f} GPU-h · cost {job.cost:.2f}"
        )
        shown = " · ".join(part for part in produced if part)
        lines.append(line + (f" → {shown}" if shown else " → nothing recorded yet"))
    if result.job_count > len(result.jobs):
        lines.append(f"  … and {result.job_count - len(result.jobs)} more")
    return "\n".join(lines)


@render.register
def _language(result: LanguageChoice, zone: ZoneInfo) -> str:
    return language_saved(result)


def _needs(job: JobRecord) -> str:
    parts = [f"{job.gpus}×GPU"]
    if job.gpu_types:
        parts.append("/".join(job.gpu_types))
    if job.min_memory_gib:
        parts.append(f"≥{job.min_memory_gib:g} GiB")
    if job.min_speed:
        parts.append(f"speed ≥{job.min_speed:g}")
    return " ".join(parts)


def _where(view: JobView, zone: ZoneInfo) -> str:
    wait = view.wait
    if wait is None:
        return ""
    text = f"Place in queue: {wait.position}. Waiting: {wait.words}."
    if wait.eta is not None:
        text += f" Estimated start: {when(datetime.fromtimestamp(wait.eta, UTC), zone)}."
    return text
