"""The ledger report in Slack (`/gpu report`), and the parts the console shares: the words
that ask for the same report again (page buttons, export hints) and each row's facts."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from bot.blocks.common import (
    MESSAGE_BLOCKS,
    Block,
    Message,
    actions,
    button,
    context,
    divider,
    escape_keeping_mentions,
    header,
    listing,
    mention,
    mrkdwn_escape,
    section,
)
from bot.blocks.ids import REPORT_NEXT, REPORT_PAGES, REPORT_PREVIOUS
from bot.blocks.job import ref, state
from bot.i18n import counted, t, when
from scheduler.door import JobOutcome, ReportAsk, ReportResult, UsageRow

# Row lines shown in Slack before "… and N more rows" (the export has them all).
ROWS_SHOWN = 15


def report_words(ask: ReportAsk, *, page: int | None = None, whole: bool = False) -> str:
    """The keys that ask for this report again, as typed after `/gpu` (or `paika`):
    `page` for another page; `whole` leaves out the page (an export). Never file=: turning
    a page posts no second file."""
    pairs: list[tuple[str, object]] = [
        ("by", ask.by),
        ("team", ask.team),
        ("user", ask.user),
        ("project", ask.project),
        ("round", ask.round),
        ("type", ask.gpu_type),
        ("metric", ask.metric),
        ("days", ask.days),
        ("since", ask.since),
        ("until", ask.until),
    ]
    if not whole:
        shown = page if page is not None else ask.page
        pairs.append(("page", shown if shown != 1 else None))
    return " ".join(["report", *(f"{key}={value}" for key, value in pairs if value is not None)])


def export_command(ask: ReportAsk, fmt: str = "csv") -> str:
    """The `paika report` command line that prints this whole report as a file."""
    return f"paika {report_words(ask, whole=True)} --format {fmt}"


def filters_of(ask: ReportAsk) -> str:
    """The filters asked for, as their keys (empty when none)."""
    pairs = [
        ("user", mention(ask.user) if ask.user else None),
        ("project", ask.project),
        ("round", ask.round),
        ("type", ask.gpu_type),
    ]
    return " ".join(f"{key}={value}" for key, value in pairs if value is not None)


# What each row of the report is, by `by=` (None: the default, team × GPU type).
_GROUPING_HEADINGS = {
    None: "report.by.team_type",
    "team": "report.by.team",
    "user": "report.by.user",
    "project": "report.by.project",
    "round": "report.by.round",
    "type": "report.by.type",
    "array": "report.by.array",
}


def grouping_heading(lang: str, by: str | None) -> str:
    """What each row is."""
    return t(lang, _GROUPING_HEADINGS.get(by, "report.by.team_type"))


def group_label(lang: str, by: str | None, row: UsageRow) -> str:
    """A row's group as people read it: a user as a mention, a missing project or round as
    a dash word."""
    none = t(lang, "report.none")
    if by == "user":
        return mention(row.group)
    if by == "round":
        return "/".join(part or none for part in row.group.split("/"))
    return row.group or none


def row_facts(lang: str, row: UsageRow) -> list[str]:
    """What a row's money bought: idle time, finished runs, waste, and the outputs."""
    facts = [
        t(lang, "report.idle", hours=row.idle_gpu_hours),
        counted(lang, "report.finished", row.finished, n=row.finished),
    ]
    if row.cost_per_finished is not None:
        facts.append(t(lang, "report.per_finished", cost=row.cost_per_finished))
    if row.wasted > 0:
        facts.append(t(lang, "report.wasted", cost=row.wasted))
    if row.metric is not None and row.best is not None:
        facts.append(t(lang, "report.best", metric=row.metric, value=row.best))
    if row.gain is not None:
        facts.append(t(lang, "report.gain", gain=row.gain))
        if row.cost_per_unit is not None:
            facts.append(t(lang, "report.per_point", cost=row.cost_per_unit))
    elif row.cost_per_unit is not None and row.metric is not None:
        facts.append(t(lang, "report.per_unit", cost=row.cost_per_unit, metric=row.metric))
    return facts


def total_facts(lang: str, result: ReportResult) -> list[str]:
    """Idle time, finished runs and waste over the whole report."""
    facts = [
        t(lang, "report.idle", hours=result.total_idle_gpu_hours),
        counted(lang, "report.finished", result.finished, n=result.finished),
    ]
    if result.finished:
        facts.append(t(lang, "report.per_finished", cost=result.total_cost / result.finished))
    facts.append(t(lang, "report.wasted", cost=result.total_wasted))
    return facts


def produced(lang: str, outcome: JobOutcome) -> str:
    """What a job produced: its output, its artefacts and its metrics."""
    metrics = ", ".join(f"{name}={value:g}" for name, value in outcome.metrics.items())
    # The latest artefact is the job's output already: said once.
    artefacts = ", ".join(
        f"{name}={where}" for name, where in outcome.artefacts if where != outcome.output
    )
    parts = [part for part in (outcome.output, artefacts, metrics) if part]
    return " · ".join(parts) or t(lang, "report.nothing_recorded")


def part_of(outcome: JobOutcome) -> str | None:
    """The project and round a job is part of, as project/round."""
    if outcome.project is None and outcome.round is None:
        return None
    return "/".join(part for part in (outcome.project, outcome.round) if part)


def report_message(result: ReportResult, lang: str, zone: ZoneInfo, now: datetime) -> Message:
    """The report as a Slack message, with Previous/Next buttons when the jobs take pages."""
    del now
    title = t(
        lang,
        "report.header",
        start=when(lang, result.start, zone),
        end=when(lang, result.end, zone),
    )
    who = mrkdwn_escape(result.team) if result.team else t(lang, "report.all_teams")
    total = t(lang, "report.total", who=who, hours=result.total_gpu_hours, cost=result.total_cost)
    blocks: list[Block] = [
        header(title),
        section(total + "\n" + " · ".join(total_facts(lang, result))),
    ]
    filters = filters_of(result.ask)
    if filters:
        blocks.append(context(t(lang, "report.only", filters=escape_keeping_mentions(filters))))
    rows = result.rows
    blocks += listing(
        [_row_line(lang, result.by, row) for row in rows],
        ROWS_SHOWN,
        lambda shown: counted(lang, "report.more_rows", len(rows) - shown, n=len(rows) - shown),
        chars=4000,
        heading=f"*{grouping_heading(lang, result.by)}*",
    )
    jobs = result.jobs
    if jobs:
        blocks.append(divider())
        heading = t(lang, "report.jobs")
        if result.pages > 1:
            heading += " · " + t(lang, "report.page", page=result.page, pages=result.pages)
        blocks += listing(
            [_outcome_line(lang, outcome) for outcome in jobs],
            MESSAGE_BLOCKS - len(blocks) - 2,
            lambda shown: counted(
                lang,
                "report.more_jobs",
                len(jobs) - shown,
                n=len(jobs) - shown,
                hours=sum(job.gpu_hours for job in jobs[shown:]),
                cost=sum(job.cost for job in jobs[shown:]),
            ),
            total=len(jobs),
            chars=6000,
            heading=f"*{heading}*",
        )
    if result.pages > 1:
        blocks.append(_page_buttons(lang, result))
    if not rows and not jobs:
        blocks.append(section(t(lang, "report.empty")))
    if result.ask.file:
        blocks.append(context(t(lang, "report.file_posted", format=result.ask.file)))
    return Message(mrkdwn_escape(title), blocks)


def _row_line(lang: str, by: str | None, row: UsageRow) -> str:
    label = escape_keeping_mentions(group_label(lang, by, row))
    if by is None:
        label += " · " + mrkdwn_escape(row.gpu_type)
    spent = counted(
        lang, "report.spent", row.jobs, hours=row.gpu_hours, cost=row.cost, jobs=row.jobs
    )
    return " · ".join([f"*{label}*", spent, *row_facts(lang, row)])


def _outcome_line(lang: str, outcome: JobOutcome) -> str:
    team = mrkdwn_escape(outcome.team)
    part = part_of(outcome)
    if part is not None:
        team += " · " + mrkdwn_escape(part)
    return t(
        lang,
        "report.job",
        job=ref(outcome.job_id, outcome.name),
        team=team,
        owner=mention(outcome.owner),
        state=state(lang, outcome.state),
        hours=outcome.gpu_hours,
        cost=outcome.cost,
        produced=mrkdwn_escape(produced(lang, outcome)),
    )


def _page_buttons(lang: str, result: ReportResult) -> Block:
    buttons = []
    if result.page > 1:
        buttons.append(
            button(
                t(lang, "report.previous"),
                REPORT_PREVIOUS,
                report_words(result.ask, page=result.page - 1),
            )
        )
    if result.page < result.pages:
        buttons.append(
            button(
                t(lang, "report.next"),
                REPORT_NEXT,
                report_words(result.ask, page=result.page + 1),
                style="primary",
            )
        )
    return actions(REPORT_PAGES, *buttons)
