"""`paika report …`: a running job reports its metrics, outputs and status, no person involved.

    paika report metric=loss:0.31 metric=top1:76.2 output=s3://ckpt/x status=succeeded

It reads what paika put in the job's environment when its run started: PAIKA_JOB_ID, and
PAIKA_JOB_TOKEN (the run's own secret) with PAIKA_REPORT_URL (where `paika up` takes
reports: POST <url>/v1/jobs/<id>/report); without a URL but with PAIKA_REPORT_FILE (the
run's report file, which its host's agent passes up) it appends the report there as one
JSON line. The words are the ones `/gpu done` takes, read by the same grammar.

A report refused is said in words and ends with status 1 (not this run's token, the run has
ended, too many reports in the last minute: paika's answer is final and nothing is written
elsewhere); words that are not a report end with status 2. When paika cannot be reached after
3 tries (refused, timed out: it is down or restarting) the report is appended to the report
file instead, when the run has one, and said so; without one it is lost, and said so (1).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping

from bot.i18n import counted, t
from bot.said import problem
from scheduler.door import Report, describe, from_words
from scheduler.errors import Problem, UserError

JOB_ID_ENV = "PAIKA_JOB_ID"
TOKEN_ENV = "PAIKA_JOB_TOKEN"
URL_ENV = "PAIKA_REPORT_URL"
FILE_ENV = "PAIKA_REPORT_FILE"
TIMEOUT_S = 10.0
TRIES = 3  # on connection errors only: a refusal is final
BACKOFF_S = 0.5


def job_report(words: list[str], env: Mapping[str, str] | None = None, lang: str = "en") -> int:
    """Report `words` for the run this process belongs to; the exit status (0: recorded)."""
    env = os.environ if env is None else env
    try:
        report = from_words(words)
    except UserError as exc:
        print(problem(lang, exc), file=sys.stderr)
        return 2
    try:
        said = _send(report, env, lang)
    except UserError as exc:
        print(problem(lang, exc), file=sys.stderr)
        return 1
    print(said)
    return 0


def _send(report: Report, env: Mapping[str, str], lang: str) -> str:
    url, path = env.get(URL_ENV, "").strip(), env.get(FILE_ENV, "").strip()
    if not url and path:
        _append(path, report)
        return t(lang, "job_report.written", path=path)
    job_id = _job_id(env.get(JOB_ID_ENV, ""))
    token = env.get(TOKEN_ENV, "").strip()
    missing = [
        name
        for name, value in ((JOB_ID_ENV, job_id), (TOKEN_ENV, token), (URL_ENV, url))
        if not value
    ]
    if missing:
        raise UserError(Problem.JOB_REPORT_NOT_IN_JOB, missing=" ".join(missing))
    try:
        answer = _post(f"{url.rstrip('/')}/v1/jobs/{job_id}/report", token, report)
    except Unreachable as exc:
        if not path:  # no report file to fall back on: the report is lost, and said so
            raise UserError(
                Problem.JOB_REPORT_UNREACHABLE, url=url, tries=TRIES, detail=exc.detail
            ) from exc
        # paika is away (down, restarting, a network cut), not refusing: the report goes in
        # the run's report file, which the host's agent passes up with its next poll.
        _append(path, report)
        return t(lang, "job_report.written_instead", url=url, path=path, detail=exc.detail)
    stored = answer.get("stored")
    count = stored if isinstance(stored, int) else 0
    attempt = answer.get("attempt")
    said = counted(lang, "job_report.recorded", count, n=count, id=job_id, attempt=attempt)
    dropped = answer.get("dropped")
    if isinstance(dropped, int) and dropped > 0:
        limit = answer.get("limit")
        said += counted(lang, "job_report.dropped", dropped, n=dropped, limit=limit)
    return said


class Unreachable(Exception):
    """paika did not answer (refused, timed out, reset) after every try: `detail` says how."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)


def _job_id(raw: str) -> str:
    """The job's number: the agent names a run `<job>.<attempt>`."""
    number = raw.strip().split(".", 1)[0]
    return number if number.isdigit() else ""


def _body(report: Report) -> bytes:
    """The report as the endpoint (and a report file's JSON line) takes it."""
    said = describe(report)
    body = {key: value for key, value in said.items() if value not in (None, {}, [])}
    return json.dumps(body, separators=(",", ":")).encode()


def _post(url: str, token: str, report: Report) -> dict[str, object]:
    request = urllib.request.Request(
        url,
        data=_body(report),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    last = ""
    for attempt in range(TRIES):
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                raw = response.read()
            break
        except urllib.error.HTTPError as exc:  # paika answered: its word is final
            raise UserError(
                Problem.JOB_REPORT_REFUSED, status=exc.code, detail=_refusal(exc)
            ) from exc
        except OSError as exc:  # URLError too: not reached (or no answer); try again
            last = str(getattr(exc, "reason", exc))
            if attempt + 1 < TRIES:
                time.sleep(BACKOFF_S * (attempt + 1))
    else:
        raise Unreachable(last)
    try:
        answer = json.loads(raw or b"{}")
    except ValueError:
        answer = {}
    return answer if isinstance(answer, dict) else {}


def _refusal(exc: urllib.error.HTTPError) -> str:
    """What paika said when it refused: its sentence, else the HTTP reason."""
    try:
        said = json.loads(exc.read() or b"{}")
    except ValueError:
        said = {}
    error = said.get("error") if isinstance(said, dict) else None
    return str(error) if error else str(exc.reason)


def _append(path: str, report: Report) -> None:
    """One JSON line at the end of the run's report file (its agent reads whole lines)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
        with os.fdopen(fd, "ab") as out:
            out.write(_body(report) + b"\n")
    except OSError as exc:
        raise UserError(
            Problem.JOB_REPORT_FILE_UNWRITABLE, path=path, detail=exc.strerror or str(exc)
        ) from exc
