"""Match review and estimates, in words: `/gpu match`, `/gpu report matches`, `/gpu report
estimates`, and the line on a person's own estimates (status, App Home).

The line builders return plain text (the console prints it); the message builders put the
same lines into Block Kit, escaped, so the two faces say the same thing.
"""

from __future__ import annotations

from collections.abc import Sequence
from zoneinfo import ZoneInfo

from bot.blocks.common import Message, escape_keeping_mentions, header, listing, mention
from bot.blocks.job import card_use_line
from bot.i18n import counted, t, term, when
from bot.reason_words import reason_words
from scheduler.door import EstimateRecord, EstimatesReport, MatchesReport, MatchReview, Weighed

# Sections a reply may fill before it says how many lines were left out.
_BLOCKS = 40


# ---------------------------------------------------------------- /gpu match


def review_lines(lang: str, result: MatchReview, zone: ZoneInfo) -> list[str]:
    """The match of one job and what the run would have cost elsewhere."""
    lines = [
        review_title(lang, result),
        t(
            lang,
            "match.job",
            state=term(lang, "state", result.state),
            team=result.team,
            owner=mention(result.owner),
        ),
    ]
    if result.card_use is not None:  # what a shared card would be weighed by
        lines.append(card_use_line(lang, result.card_use))
    if result.chosen is None:
        command = f"/gpu why #{result.job_id}"
        return [*lines, t(lang, "match.none", id=result.job_id, command=command)]
    chosen = t(
        lang,
        "match.chosen",
        gpu_type=result.chosen,
        at=when(lang, result.matched_at, zone),
        reason=reason_words(lang, result.reason_why, result.reason) or "-",
    )
    lines.append(chosen)
    if result.attempts > 1:
        lines.append(t(lang, "match.attempts", n=result.attempts))
    if result.weighed:
        lines.append(t(lang, "match.weighed"))
        lines += ["  " + _weighed(lang, w) for w in result.weighed]
    if not result.ran:
        return [*lines, t(lang, "match.not_run")]
    lines += [
        t(lang, "match.ran", gpu_type=part.gpu_type, hours=part.gpu_hours, cost=part.cost)
        for part in result.ran
    ]
    if result.cheapest is None or result.fastest is None:
        return [*lines, t(lang, "match.no_adequate")]
    for key, costed in (("match.cheapest", result.cheapest), ("match.fastest", result.fastest)):
        lines.append(
            t(lang, key, gpu_type=costed.gpu_type, hours=costed.gpu_hours, cost=costed.cost)
        )
    lines.append(_verdict(lang, result.extra_cost, result.wait_saved_minutes))
    lines.append(t(lang, "match.assumes"))
    return lines


def review_title(lang: str, result: MatchReview) -> str:
    return t(lang, "match.header", id=result.job_id, name=result.name)


def _weighed(lang: str, weighed: Weighed) -> str:
    values = {
        "gpu_type": weighed.gpu_type,
        "price": weighed.price_per_gpu_hour,
        "verdict": reason_words(lang, weighed.verdict_why, weighed.verdict),
    }
    if weighed.wait_minutes is None:
        return t(lang, "match.alternative", **values)
    return t(lang, "match.alternative_wait", minutes=weighed.wait_minutes, **values)


def _verdict(lang: str, extra: float, saved: float | None) -> str:
    if extra <= 0:
        return t(lang, "match.cheapest_chosen")
    if saved is None:
        return t(lang, "match.extra", extra=extra)
    return t(lang, "match.extra_wait", extra=extra, minutes=saved)


def review_message(result: MatchReview, lang: str, zone: ZoneInfo) -> Message:
    lines = review_lines(lang, result, zone)
    return _message(lang, lines[0], lines[1:])


# ---------------------------------------------------------------- /gpu report matches


def costliest_lines(lang: str, result: MatchesReport, zone: ZoneInfo) -> list[str]:
    """The period's runs on costlier types than they needed, most extra cost first."""
    lines = [
        t(
            lang,
            "report.matches.header",
            who=result.team or t(lang, "report.all_teams"),
            start=when(lang, result.start, zone),
            end=when(lang, result.end, zone),
        )
    ]
    if not result.runs:
        return [*lines, t(lang, "report.matches.empty")]
    lines.append(
        counted(
            lang, "report.matches.total", result.count, n=result.count, extra=result.total_extra
        )
    )
    for run in result.runs:
        row = t(
            lang,
            "report.matches.row",
            id=run.job_id,
            name=run.name,
            team=run.team,
            owner=mention(run.owner),
            hours=run.gpu_hours,
            ran_on=run.ran_on,
            cost=run.cost,
            cheapest=run.cheapest.gpu_type,
            cheap_cost=run.cheapest.cost,
            extra=run.extra_cost,
        )
        if run.wait_saved_minutes is not None:
            row += t(lang, "report.matches.saved", minutes=run.wait_saved_minutes)
        lines.append("  " + row)
    if result.count > len(result.runs):
        lines.append("  " + t(lang, "status.more", n=result.count - len(result.runs)))
    lines.append(t(lang, "report.matches.follow", command="/gpu match <job>"))
    return lines


def costliest_message(result: MatchesReport, lang: str, zone: ZoneInfo) -> Message:
    lines = costliest_lines(lang, result, zone)
    return _message(lang, lines[0], lines[1:])


# ---------------------------------------------------------------- estimates


def own_estimate_line(lang: str, record: EstimateRecord) -> str:
    """The asker's own record in one line ("your last 20 runs took 1.8× your estimates")."""
    if abs(record.ratio - record.median) < 0.005:
        return counted(lang, "estimates.own", record.runs, n=record.runs, ratio=record.median)
    return counted(
        lang,
        "estimates.own_bounded",
        record.runs,
        n=record.runs,
        ratio=record.median,
        planned=record.ratio,
    )


def estimates_lines(lang: str, result: EstimatesReport) -> list[str]:
    """Per person: runs counted, median actual ÷ estimate, the share that overran."""
    lines = [
        t(
            lang,
            "report.estimates.header",
            who=result.team or t(lang, "report.all_teams"),
            n=result.history,
        )
    ]
    if not result.rows:
        return [*lines, t(lang, "report.estimates.empty")]
    for row in result.rows:
        record = row.record
        lines.append(
            "  "
            + counted(
                lang,
                "report.estimates.row",
                record.runs,
                user=mention(row.user),
                n=record.runs,
                ratio=record.median,
                planned=record.ratio,
                share=row.overran_share,
            )
        )
    return lines


def estimates_message(result: EstimatesReport, lang: str) -> Message:
    lines = estimates_lines(lang, result)
    return _message(lang, lines[0], lines[1:])


def _message(lang: str, title: str, lines: Sequence[str]) -> Message:
    escaped = [escape_keeping_mentions(line) for line in lines] or [" "]
    blocks = [
        header(title),
        *listing(
            escaped,
            _BLOCKS,
            lambda shown: t(lang, "status.more", n=len(escaped) - shown),
        ),
    ]
    return Message(escape_keeping_mentions(title), blocks)
