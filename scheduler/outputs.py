"""What a job produced, in one place: reports read, checked and stored as `JobOutput` rows.

A report says metrics (`loss:0.31`), artefacts (where a checkpoint or a result is) and, at
most once, the run's own verdict (`succeeded` or `failed`), with an optional note. It comes
from one of three places, each its `OutputSource`:

- a person, with `/gpu done` (scheduler/service/jobs.py);
- the job itself, through `paika report` inside it, POSTed to `paika up` with the run's own
  secret (`PAIKA_JOB_TOKEN`, minted when the run starts: scheduler/cycle.py);
- the job's report file, whose new lines its host's agent passes up with each poll; the
  cycle takes them when it reconciles (scheduler/hosts/reconcile.py).

The three say the same words: `metric=loss:0.31 output=s3://ckpt/x status=succeeded` (read
with the /gpu grammar's own tokens and value kinds), or, for the endpoint and a file line
that starts with `{`, a JSON object of the same (see `ReportBody`).

Storing a report adds its rows and sets the job's latest `metrics` and `output`, as one
conditional update of the job (optimistic locking: a race is run again from the fresh row).
The job reports for its current run only: once that run has ended, a report is refused.
A report file's lines are numbered by the agent; how far each run's lines are stored is kept
on the job's row (`report_lines_taken`, per host) in the same update, so a line read twice is
stored once, and reading it costs one row per job however long the run reports.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError
from sqlalchemy import Engine
from sqlmodel import Session

from scheduler.agent.body import MAX_JSON_DEPTH, json_depth
from scheduler.errors import Problem, UserError
from scheduler.grammar.errors import Mistake, ParseError
from scheduler.grammar.spec import Key
from scheduler.grammar.tokens import Token, tokenize
from scheduler.grammar.values import Metric, ValueKind, convert, shorten
from scheduler.races import retrying
from scheduler.settings import Settings
from storage.db import session_scope
from storage.limits import OUTPUT_NAME
from storage.models import ON_HOST_STATES, Job, JobOutput
from storage.models.jobs import OutputKind, OutputSource
from storage.queries import audit, job_reports
from storage.queries.state import is_token_digest

# The run's own verdict, as the job reports it.
STATUSES = ("succeeded", "failed")
REPORTED_FAILED = "failed"
# How a report is said, for errors and help.
EXAMPLE = "paika report metric=loss:0.31 metric=top1:76.2 output=s3://ckpt/bert-ft/final"
# An artefact reported without a label (`output=…`) is the run's output.
OUTPUT = "output"
NOTE = "note"
LOCATION_LIMIT = 2000
NOTE_LIMIT = 1000
MAX_ITEMS = 100  # metrics, or artefacts, in one report
BODY_LIMIT = 64 * 1024  # bytes of one report sent to the endpoint
TOKEN_BYTES = 32
ACTION_JOB = "job.report"  # the audit record of a report the job sent

METRIC_KEY = Key("metric", ValueKind.METRIC, "loss:0.31", repeatable=True)
OUTPUT_KEY = Key(
    "output", ValueKind.TEXT, "s3://ckpt/bert-ft/final", repeatable=True, max_length=LOCATION_LIMIT
)
# Where the run's latest checkpoint is: a preempted run loses only the work since then.
CHECKPOINT_KEY = Key(
    "checkpoint",
    ValueKind.TEXT,
    "/ckpt/bert-ft/step-9000",
    repeatable=True,
    max_length=LOCATION_LIMIT,
)
STATUS_KEY = Key("status", ValueKind.CHOICE, "succeeded", choices=STATUSES)
NOTE_KEY = Key("note", ValueKind.TEXT, "diverged after step 9000", max_length=NOTE_LIMIT)
REPORT_KEYS = (METRIC_KEY, OUTPUT_KEY, CHECKPOINT_KEY, STATUS_KEY, NOTE_KEY)
CHECKPOINT = "checkpoint"  # the label of a reported checkpoint (an artefact)


@dataclass(frozen=True)
class Artefact:
    """A checkpoint or result the run made: where it is, and its label."""

    location: str
    name: str = OUTPUT


@dataclass(frozen=True)
class Report:
    """One report, however it came."""

    metrics: tuple[Metric, ...] = ()
    artefacts: tuple[Artefact, ...] = ()
    status: str | None = None
    note: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.metrics or self.artefacts or self.status or self.note)


@dataclass(frozen=True)
class Stored:
    """What storing a report did: the job, its run, how many rows were added, and how many
    were not kept (the run had stored its limit of rows: `limit`)."""

    job_id: int
    attempt: int
    rows: int
    dropped: int = 0
    limit: int = 0


# How much one run may report, unless the settings say otherwise (PAIKA_REPORT_*).
REPORTS_PER_MINUTE = 60
ROWS_PER_RUN = 10_000
RATE_WINDOW = timedelta(minutes=1)


@dataclass(frozen=True)
class ReportLimits:
    """How much one run may report: `per_minute` reports through the endpoint in any minute
    (one more is refused, saying when to try again: HTTP 429 with Retry-After; counted per
    run from the audit trail, so every paika up instance and a restart see the same count),
    and `rows_per_run` rows stored of its reports, through the endpoint and its report
    file together (see `store_within` for which are kept)."""

    per_minute: int = REPORTS_PER_MINUTE
    rows_per_run: int = ROWS_PER_RUN

    @classmethod
    def of(cls, settings: Settings) -> ReportLimits:
        """The limits the settings give (PAIKA_REPORT_RATE_PER_MINUTE, _ROWS_PER_RUN)."""
        return cls(settings.report_rate_per_minute, settings.report_rows_per_run)


# ---------------------------------------------------------------- reading reports

Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]


class OutputBody(BaseModel):
    """One artefact: where it is and, optionally, its label."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(default=None, min_length=1, max_length=OUTPUT_NAME)
    location: str = Field(min_length=1, max_length=LOCATION_LIMIT)


class ReportBody(BaseModel):
    """What `POST /v1/jobs/{id}/report` takes, and a report file's JSON lines."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metrics: dict[str, Number] = Field(default_factory=dict, max_length=MAX_ITEMS)
    outputs: list[OutputBody] = Field(default_factory=list, max_length=MAX_ITEMS)
    status: Literal["succeeded", "failed"] | None = None
    note: str | None = Field(default=None, max_length=NOTE_LIMIT)


def from_words(words: Sequence[str]) -> Report:
    """A report from command-line words (`metric=loss:0.31` …; the shell has split and
    unquoted them); ParseError naming the key at fault."""
    tokens = []
    for column, word in enumerate(words, start=1):
        key, equals, value = word.partition("=")
        named = key.lower() if equals else None
        tokens.append(Token(value if equals else word, named, column, word, False))
    return _from_tokens(tokens)


def from_line(line: str) -> Report:
    """A report from one line of a report file: the command's words, or a JSON object."""
    text = line.strip()
    if text.startswith("{"):
        return from_json(_bounded_json(text))
    return _from_tokens(tokenize(text))


def _bounded_json(text: str) -> object:
    """The JSON value of `text`, or UserError: its nesting is measured before it is read,
    since a recursive reader given a few thousand '[' raises RecursionError — which no
    caller expects, and which froze the job whose report file held such a line."""
    if json_depth(text) > MAX_JSON_DEPTH:
        detail = f"nested deeper than {MAX_JSON_DEPTH} levels"
        raise UserError(Problem.JOB_REPORT_BAD_JSON, detail=detail)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UserError(Problem.JOB_REPORT_BAD_JSON, detail=shorten(str(exc))) from exc


def from_json(data: object) -> Report:
    """A report from the endpoint's JSON body; UserError naming the first bad field."""
    try:
        body = ReportBody.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "body"
        raise UserError(Problem.JOB_REPORT_BAD_FIELD, field=where, detail=error["msg"]) from exc
    metrics = tuple(
        _metric(f"{name}:{float(value)!r}") for name, value in sorted(body.metrics.items())
    )
    artefacts = tuple(
        Artefact(str(convert(OUTPUT_KEY, item.location)), item.name or OUTPUT)
        for item in body.outputs
    )
    return _checked(Report(metrics, artefacts, body.status, body.note))


def from_body(raw: bytes) -> Report:
    """A report from the bytes POSTed to the endpoint."""
    if len(raw) > BODY_LIMIT:
        raise UserError(Problem.JOB_REPORT_TOO_LARGE, limit=BODY_LIMIT)
    try:
        text = raw.decode("utf-8-sig") if raw else "{}"
    except UnicodeDecodeError as exc:
        raise UserError(Problem.JOB_REPORT_BAD_JSON, detail=f"not UTF-8 ({exc.reason})") from exc
    return from_json(_bounded_json(text))


def _metric(raw: str) -> Metric:
    value = convert(METRIC_KEY, raw)
    assert isinstance(value, Metric)
    return value


def _from_tokens(tokens: Sequence[Token]) -> Report:
    values: dict[str, list[object]] = {}
    given: dict[str, Token] = {}
    names = tuple(key.name for key in REPORT_KEYS)
    for token in tokens:
        if token.key is None:
            raise ParseError(
                Mistake.TAKES_NO_WORDS_USE_KEYS,
                example=EXAMPLE,
                command="paika report",
                got=shorten(token.raw),
                usage=_usage(),
            )
        key = next((k for k in REPORT_KEYS if k.name == token.key), None)
        if key is None:
            raise ParseError(
                Mistake.UNKNOWN_KEY, got=shorten(token.key), command="paika report", keys=names
            )
        earlier = given.get(key.name)
        if earlier is not None and not key.repeatable:
            raise ParseError(
                Mistake.GIVEN_TWICE,
                name=key.name,
                first=shorten(earlier.raw),
                second=shorten(token.raw),
            )
        given[key.name] = token
        values.setdefault(key.name, []).append(convert(key, token.value))
    metrics = tuple(m for m in values.get("metric", ()) if isinstance(m, Metric))
    artefacts = tuple(Artefact(str(o)) for o in values.get("output", ())) + tuple(
        Artefact(str(c), CHECKPOINT) for c in values.get("checkpoint", ())
    )
    status = values.get("status", [None])[0]
    note = values.get("note", [None])[0]
    return _checked(Report(metrics, artefacts, None if status is None else str(status), _opt(note)))


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


def _usage() -> str:
    return "paika report " + " ".join(key.placeholder for key in REPORT_KEYS)


def _checked(report: Report) -> Report:
    if report.empty:
        raise UserError(Problem.JOB_REPORT_EMPTY, example=EXAMPLE)
    if len(report.metrics) > MAX_ITEMS or len(report.artefacts) > MAX_ITEMS:
        raise UserError(Problem.JOB_REPORT_TOO_MANY, limit=MAX_ITEMS)
    return report


# ---------------------------------------------------------------- storing reports


def mint_token() -> str:
    """A new run's report secret (43 URL-safe characters; the column holds 64)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def store(session: Session, job: Job, report: Report, *, source: OutputSource, at: datetime) -> int:
    """Add `report`'s rows for the job's current run and set its latest metrics and output,
    in the caller's transaction (the job's row is written: its version guards the update).
    Returns how many rows were added."""
    return store_within(session, job, report, source=source, at=at, cap=None)[0]


def store_within(
    session: Session,
    job: Job,
    report: Report,
    *,
    source: OutputSource,
    at: datetime,
    cap: int | None,
) -> tuple[int, int]:
    """`store`, keeping the run's rows within `cap` (None: no cap); (rows added, rows not
    kept). The oldest rows are kept: a run's history from its start stays whole, no row is
    deleted for a new one (which would double the writes of a run that floods), and the
    job's latest metrics and output are set whatever the cap, so the newest values are
    never lost. A verdict (status, note) is always kept: what the run said of itself
    decides how it ends."""
    attempt = job.attempts
    rows: list[JobOutput] = []

    def add(
        kind: OutputKind, name: str, value: float | None = None, text: str | None = None
    ) -> None:
        rows.append(
            JobOutput(
                job_id=job.id or 0,
                attempt=attempt,
                at=at,
                source=source.value,
                kind=kind.value,
                name=name,
                value=value,
                text=text,
            )
        )

    for metric in report.metrics:
        add(OutputKind.METRIC, metric.name, value=metric.value)
    for artefact in report.artefacts:
        add(OutputKind.ARTEFACT, artefact.name, text=artefact.location)
    if report.status is not None:
        add(OutputKind.STATUS, "status", text=report.status)
    if report.note is not None:
        add(OutputKind.STATUS, NOTE, text=report.note)
    if report.metrics:
        job.metrics = {**(job.metrics or {}), **{m.name: m.value for m in report.metrics}}
    if report.artefacts:
        job.output = report.artefacts[-1].location
    session.add(job)
    # The job's row first: on MariaDB the outputs' key checks would otherwise share-lock it,
    # and a racing change of the job would deadlock instead of losing plainly.
    session.flush()
    dropped = 0
    if cap is not None and rows:
        room = cap - job_reports.rows_of_run(session=session, job_id=job.id or 0, attempt=attempt)
        verdicts = [row for row in rows if row.kind == OutputKind.STATUS.value]
        others = [row for row in rows if row.kind != OutputKind.STATUS.value]
        kept = others[: max(0, room - len(verdicts))]
        dropped = len(others) - len(kept)
        rows = kept + verdicts
    for row in rows:
        session.add(row)
    return len(rows), dropped


def reported_failed(session: Session, job: Job) -> bool:
    """Whether the job's current run said it failed (its latest verdict)."""
    verdict = job_reports.latest_status(session=session, job_id=job.id or 0, attempt=job.attempts)
    return verdict == REPORTED_FAILED


def token_matches(job: Job | None, token: str) -> bool:
    """Whether `token` is the current run's report secret of `job` (in constant time). A
    job restored from a snapshot holds its run's token as a SHA-256 digest (the snapshot
    keeps no token): the token given is checked against that."""
    if job is None or not job.report_token or not token:
        return False
    if is_token_digest(job.report_token):
        given = hashlib.sha256(token.encode()).hexdigest()
        return hmac.compare_digest(job.report_token.encode(), given.encode())
    return hmac.compare_digest(job.report_token.encode(), token.encode())


def take_from_job(
    engine: Engine,
    now: datetime,
    job_id: int,
    token: str,
    body: bytes,
    limits: ReportLimits | None = None,
) -> Stored:
    """Store the report a job POSTed (`body`, see from_body) with its run's secret.
    UserError, storing nothing: the secret is not this job's current run's
    (REPORT_TOKEN_REFUSED), the run has ended (REPORT_RUN_ENDED), it reported `per_minute`
    times in the last minute already (REPORT_RATE_LIMITED, with `retry_after` seconds), or
    the body is not a report. The secret is checked first: nobody without it has the body
    read at all. Past the run's `rows_per_run`, rows are not kept (`Stored.dropped`)."""
    limits = limits or ReportLimits()

    def work() -> Stored:
        with session_scope(engine) as session:
            job = session.get(Job, job_id)
            if not token_matches(job, token):
                raise UserError(Problem.JOB_REPORT_TOKEN_REFUSED, id=job_id)
            assert job is not None
            if job.state not in ON_HOST_STATES:
                raise UserError(Problem.JOB_REPORT_RUN_ENDED, id=job_id, state=job.state)
            actor = f"job:{job_id}.{job.attempts}"  # the run, as its agent names it
            recent = audit.recent_times(
                session=session,
                actor=actor,
                action=ACTION_JOB,
                since=now - RATE_WINDOW,
                limit=limits.per_minute,
            )
            if len(recent) >= limits.per_minute:
                first = recent[0] if recent[0].tzinfo else recent[0].replace(tzinfo=UTC)
                wait = (first + RATE_WINDOW - now).total_seconds()
                raise UserError(
                    Problem.JOB_REPORT_RATE_LIMITED,
                    id=job_id,
                    limit=limits.per_minute,
                    retry_after=max(1, math.ceil(wait)),
                )
            report = from_body(body)
            rows, dropped = store_within(
                session, job, report, source=OutputSource.JOB, at=now, cap=limits.rows_per_run
            )
            audit.record(
                session=session,
                at=now,
                actor=actor,
                action=ACTION_JOB,
                target_kind="job",
                target_id=job_id,
                detail={"attempt": job.attempts, "rows": rows, "dropped": dropped},
            )
            return Stored(job_id, job.attempts, rows, dropped, limits.rows_per_run)

    return retrying(work, what=f"job #{job_id}: its report")


@dataclass(frozen=True)
class FileLines:
    """The lines of a run's report file its agent holds: `first` is the number of the
    first (1-based; lines before it were dropped by the agent before they were taken)."""

    host: str
    first: int
    lines: tuple[str, ...]

    @property
    def last(self) -> int:
        return self.first + len(self.lines) - 1


@dataclass(frozen=True)
class LinesTaken:
    """What taking a run's report-file lines did."""

    rows: int = 0
    bad: tuple[tuple[int, str], ...] = ()  # (line number, problem code) of lines not understood
    missed: int = 0  # lines the agent dropped before paika took them


def take_file_lines(
    session: Session,
    job: Job,
    held: FileLines,
    taken: int,
    at: datetime,
    cap: int | None = ROWS_PER_RUN,
) -> LinesTaken:
    """Store the lines numbered after `taken` (the run's lines already stored), in the
    caller's transaction, and record how far they go. A line that is not understood is
    skipped (and counted): the job's own mistake must not stop the others. The run's rows
    stay within `cap` (see `store_within`)."""
    new = [
        (number, text) for number, text in enumerate(held.lines, start=held.first) if number > taken
    ]
    if not new:
        return LinesTaken()
    rows, bad = 0, []
    for number, text in new:
        if not text.strip():
            continue
        try:
            report = from_line(text)
        except UserError as exc:
            bad.append((number, exc.problem.value))
            continue
        added, _ = store_within(session, job, report, source=OutputSource.FILE, at=at, cap=cap)
        rows += added
    skip_file_lines(session, job, held)
    return LinesTaken(rows, tuple(bad), max(0, held.first - 1 - taken))


def skip_file_lines(session: Session, job: Job, held: FileLines) -> None:
    """Record the lines `held` as taken, on the job's own row (a conditional update with the
    rest): the next poll starts after them, and a new run starts from nothing. Alone, it
    skips them (lines whose taking raised, so that they do not raise every cycle)."""
    hosts = dict(_taken_hosts(job.report_lines_taken, job.attempts))
    hosts[held.host] = max(hosts.get(held.host, 0), held.last)
    job.report_lines_taken = {"attempt": job.attempts, "hosts": hosts}
    session.add(job)


def lines_taken(session: Session, job_ids: Sequence[int]) -> Mapping[tuple[int, int, str], int]:
    """(job id, attempt, host) → how many of that run's report-file lines are stored."""
    taken: dict[tuple[int, int, str], int] = {}
    for job_id, attempt, stored in job_reports.lines_taken(session=session, job_ids=job_ids):
        for host, last in _taken_hosts(stored, attempt).items():
            taken[(job_id, attempt, host)] = last
    return taken


def _taken_hosts(stored: object, attempt: int) -> Mapping[str, int]:
    """Host → last line stored, of `stored` (a job's report_lines_taken) for run `attempt`."""
    if not isinstance(stored, dict) or stored.get("attempt") != attempt:
        return {}
    hosts = stored.get("hosts")
    if not isinstance(hosts, dict):
        return {}
    return {str(h): n for h, n in hosts.items() if isinstance(n, int) and not isinstance(n, bool)}


def describe(report: Report) -> dict[str, Any]:
    """A report as plain values (for logs and audit details)."""
    return {
        "metrics": {m.name: m.value for m in report.metrics},
        "outputs": [{"name": a.name, "location": a.location} for a in report.artefacts],
        "status": report.status,
        "note": report.note,
    }
