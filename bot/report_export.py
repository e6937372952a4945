"""`paika report … --format csv|json`: the whole ledger report (every group, every job, no
pages) as a file's text, for spreadsheets and scripts; also the CSV `/gpu report … file=csv`
posts to Slack.

The CSV is one table with a header row: a `kind` column says what each row is: `group`
(one per row of the report), `job` (one per job that used GPUs in the period, costliest
first) and one `total`. Numbers are plain (full precision, no units or thousands
separators); a missing value is an empty cell; a job's metrics and artefacts are JSON objects.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable
from typing import Any

from scheduler.door import JobOutcome, Paika, ReportResult, UsageRow

FORMATS = ("csv", "json")
# The CSV's columns, in order; each kind of row fills those it has.
COLUMNS = (
    "kind",
    "by",
    "group",
    "gpu_type",
    "job_id",
    "name",
    "team",
    "owner",
    "project",
    "round",
    "state",
    "start",
    "end",
    "runs",
    "gpu_hours",
    "idle_gpu_hours",
    "lost_gpu_hours",
    "cost",
    "finished",
    "cost_per_finished",
    "wasted",
    "metric",
    "best",
    "gain",
    "cost_per_unit",
    "output",
    "metrics",
    "artefacts",
)
# Who a report is run as when --user is not given: the report is open to everyone.
EXPORT_USER = "paika-export"


def export_report(words: list[str], fmt: str, user: str | None, start: Callable[[], Paika]) -> int:
    """Print the whole report the words ask for (as after `/gpu report`) in `fmt` to stdout;
    the exit status: 0 done, 1 a user error (said on stderr), 2 an unknown format. `start`
    gives the core (the entry point wires it: only after the format is known good)."""
    from bot.console import render
    from scheduler.grammar import parse

    if fmt not in FORMATS:
        from bot.i18n import t

        print(t("en", "export.bad_format", format=fmt), file=sys.stderr)
        return 2
    paika = start()
    try:
        command = parse(" ".join(["report", *words]))
    except Exception as exc:  # a ParseError: said as /gpu would say it
        print(render(exc, paika.policy.zone, "en"), file=sys.stderr)
        return 1
    args = {key: value for key, value in command.args.items() if key != "page"}
    reply = paika.perform(command.path, {**args, "file": "csv"}, user or EXPORT_USER)
    if not reply.ok or not isinstance(reply.result, ReportResult):
        print(reply.text, file=sys.stderr)
        return 1
    text = report_csv(reply.result) if fmt == "csv" else report_json(reply.result)
    sys.stdout.write(text)
    return 0


def report_csv(result: ReportResult) -> str:
    """The whole report as CSV (see the module's doc)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in result.rows:
        writer.writerow(_cells(_group(result, row)))
    for job in result.all_jobs or result.jobs:
        writer.writerow(_cells(_job(job)))
    writer.writerow(_cells(_total(result)))
    return out.getvalue()


def report_json(result: ReportResult) -> str:
    """The whole report as one JSON object: the period and what was asked, the totals, the
    groups and the jobs."""
    ask = result.ask
    document = {
        "start": result.start.isoformat(),
        "end": result.end.isoformat(),
        "by": ask.by or "team,type",
        "filters": {
            "team": ask.team,
            "user": ask.user,
            "project": ask.project,
            "round": ask.round,
            "type": ask.gpu_type,
            "metric": ask.metric,
        },
        "total": _total(result),
        "groups": [_group(result, row) for row in result.rows],
        "jobs": [_job(job) for job in result.all_jobs or result.jobs],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _group(result: ReportResult, row: UsageRow) -> dict[str, Any]:
    return {
        "kind": "group",
        "by": result.by or "team,type",
        "group": row.group,
        "gpu_type": row.gpu_type or None,
        "runs": row.jobs,
        "gpu_hours": row.gpu_hours,
        "idle_gpu_hours": row.idle_gpu_hours,
        "lost_gpu_hours": row.lost_gpu_hours,
        "cost": row.cost,
        "finished": row.finished,
        "cost_per_finished": row.cost_per_finished,
        "wasted": row.wasted,
        "metric": row.metric,
        "best": row.best,
        "gain": row.gain,
        "cost_per_unit": row.cost_per_unit,
    }


def _job(job: JobOutcome) -> dict[str, Any]:
    return {
        "kind": "job",
        "job_id": job.job_id,
        "name": job.name,
        "team": job.team,
        "owner": job.owner,
        "project": job.project,
        "round": job.round,
        "state": job.state,
        "gpu_hours": job.gpu_hours,
        "idle_gpu_hours": job.idle_gpu_hours,
        "lost_gpu_hours": job.lost_gpu_hours,
        "cost": job.cost,
        "wasted": job.cost if job.wasted else 0.0,
        "output": job.output,
        "metrics": dict(job.metrics),
        "artefacts": dict(job.artefacts),
    }


def _total(result: ReportResult) -> dict[str, Any]:
    return {
        "kind": "total",
        "start": result.start.isoformat(),
        "end": result.end.isoformat(),
        "runs": result.job_count,
        "gpu_hours": result.total_gpu_hours,
        "idle_gpu_hours": result.total_idle_gpu_hours,
        "lost_gpu_hours": result.total_lost_gpu_hours,
        "cost": result.total_cost,
        "finished": result.finished,
        "cost_per_finished": result.total_cost / result.finished if result.finished else None,
        "wasted": result.total_wasted,
    }


def _cells(record: dict[str, Any]) -> dict[str, str]:
    """A record as CSV cells: numbers as Python writes them (repr: they read back exactly),
    nothing as an empty cell, objects as JSON."""
    cells: dict[str, str] = {}
    for key, value in record.items():
        if value is None:
            cells[key] = ""
        elif isinstance(value, dict):
            cells[key] = json.dumps(value, ensure_ascii=False, sort_keys=True) if value else ""
        else:
            cells[key] = str(value)
    return cells
