"""Outputs a running job reports of itself, with no person involved: through its report file
(passed up by its host's agent) and through `paika report` to paika up's endpoint, over real
HTTP, with real simulated agents and real job processes. Database times follow a manual
clock; each test runs on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_world import TOKEN, Agent, job, ok, submit, until
from sqlmodel import Session, col, select
from starlette.applications import Starlette

from bot.job_report import job_report
from bot.said import problem
from scheduler.app import Paika
from scheduler.clock import ManualClock
from scheduler.cycle import Cycle
from scheduler.dispatch import AgentDispatcher, DispatchError, StartOrder
from scheduler.errors import Problem, UserError
from scheduler.grammar.errors import Mistake, ParseError
from scheduler.grammar.values import Metric
from scheduler.hosts.poll import Target, poll_all_sync
from scheduler.hosts.report import HostReport
from scheduler.notices.events import EventCode, RecordingObserver
from scheduler.observe.http import ReportDesk, report_route
from scheduler.outputs import Artefact, Report, from_line, from_words
from scheduler.serving import serve_in_thread, stop_server
from storage.models import JobOutput, JobState

PY = sys.executable
PAIKA = str(Path(sys.executable).with_name("paika"))


def report_cycle(paika: Paika, notifier: RecordingObserver, report_url: str | None) -> Cycle:
    """The cycle as `paika up` builds it, telling each run where to report."""

    def poll(targets: Sequence[Target]) -> Mapping[str, HostReport]:
        return poll_all_sync(targets, TOKEN, timeout=2.0)

    return Cycle(
        paika.engine,
        paika.policy,
        paika.clock,
        AgentDispatcher(TOKEN, timeout=2.0),
        notifier,
        poll,  # type: ignore[arg-type]
        report_url=report_url,
    )


@pytest.fixture
def endpoint(world: Paika, clock: ManualClock) -> Iterator[str]:
    """paika up's report route, served on loopback; its URL."""
    desk = ReportDesk(world.engine, clock, partial(problem, "en"))
    server, thread, port = serve_in_thread(Starlette(routes=[report_route(desk)]))
    yield f"http://127.0.0.1:{port}"
    stop_server(server, thread)


def outputs(paika: Paika, job_id: int | None = None) -> list[tuple[Any, ...]]:
    with Session(paika.engine) as session:
        query = select(JobOutput).order_by(col(JobOutput.id))
        if job_id is not None:
            query = query.where(JobOutput.job_id == job_id)
        rows = session.exec(query).all()
    return [(r.job_id, r.attempt, r.source, r.kind, r.name, r.value, r.text) for r in rows]


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(body)
    return f"{PY} {path}"


def test_a_job_reports_metrics_and_a_checkpoint_through_its_report_file(
    world: Paika, clock: ManualClock, tmp_path: Path
) -> None:
    cycle = report_cycle(world, RecordingObserver(), None)
    command = script(
        tmp_path,
        "train",
        "import json, os\n"
        "with open(os.environ['PAIKA_REPORT_FILE'], 'a') as out:\n"
        "    out.write('metric=loss:0.31 metric=top1:76.2\\n')\n"
        "    checkpoint = {'name': 'checkpoint', 'location': 's3://ckpt/bert/final'}\n"
        "    out.write(json.dumps({'outputs': [checkpoint]}))\n",
    )
    submit(world, "train", command)
    cycle.run_once()
    until(cycle, clock, lambda: job(world, "train").state == JobState.SUCCEEDED)
    done = job(world, "train")
    assert done.metrics == {"loss": 0.31, "top1": 76.2}
    assert done.output == "s3://ckpt/bert/final"
    assert outputs(world) == [
        (done.id, 1, "file", "metric", "loss", 0.31, None),
        (done.id, 1, "file", "metric", "top1", 76.2, None),
        (done.id, 1, "file", "artefact", "checkpoint", None, "s3://ckpt/bert/final"),
    ]


def test_report_lines_are_taken_once_while_the_job_runs(
    world: Paika, clock: ManualClock, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    cycle = report_cycle(world, RecordingObserver(), None)
    command = script(
        tmp_path,
        "steps",
        "import os, time\n"
        "path = os.environ['PAIKA_REPORT_FILE']\n"
        "with open(path, 'a') as out:\n"
        "    out.write('metric=loss:0.9\\nnot a report\\n')\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
        "with open(path, 'a') as out:\n"
        "    out.write('metric=loss:0.4 output=s3://ckpt/steps/last')\n",
    )
    submit(world, "steps", command)
    cycle.run_once()
    until(cycle, clock, lambda: len(outputs(world)) == 1)
    for _ in range(3):  # the agent passes the same lines up on every poll
        clock.advance(timedelta(seconds=5))
        cycle.run_once()
    assert [row[4:6] for row in outputs(world)] == [("loss", 0.9)]
    assert job(world, "steps").state == JobState.RUNNING
    go.touch()
    until(cycle, clock, lambda: job(world, "steps").state == JobState.SUCCEEDED)
    assert [row[4:7] for row in outputs(world)] == [
        ("loss", 0.9, None),
        ("loss", 0.4, None),
        ("output", None, "s3://ckpt/steps/last"),
    ]
    assert job(world, "steps").metrics == {"loss": 0.4}


def test_a_job_reports_through_paika_report_to_the_endpoint(
    world: Paika, clock: ManualClock, endpoint: str
) -> None:
    cycle = report_cycle(world, RecordingObserver(), endpoint)
    submit(
        world,
        "cli",
        f"{PAIKA} report metric=loss:0.25 metric=top1:80 output=s3://ckpt/cli status=succeeded",
    )
    cycle.run_once()
    until(cycle, clock, lambda: job(world, "cli").state != JobState.RUNNING, timeout=90)
    done = job(world, "cli")
    assert done.state == JobState.SUCCEEDED, done.state_reason
    assert (done.metrics, done.output) == ({"loss": 0.25, "top1": 80.0}, "s3://ckpt/cli")
    assert outputs(world) == [
        (done.id, 1, "job", "metric", "loss", 0.25, None),
        (done.id, 1, "job", "metric", "top1", 80.0, None),
        (done.id, 1, "job", "artefact", "output", None, "s3://ckpt/cli"),
        (done.id, 1, "job", "status", "status", None, "succeeded"),
    ]


# A report nested thousands deep: a recursive JSON reader raises RecursionError on it.
DEEP_JSON = '{"metrics": ' + "[" * 3000 + "]" * 3000 + "}"


def test_a_report_line_nested_thousands_deep_is_skipped_and_the_job_ends(
    world: Paika, clock: ManualClock, tmp_path: Path
) -> None:
    cycle = report_cycle(world, RecordingObserver(), None)
    command = script(
        tmp_path,
        "deep",
        "import os\n"
        "with open(os.environ['PAIKA_REPORT_FILE'], 'a') as out:\n"
        f"    out.write({DEEP_JSON!r} + '\\n')\n"
        "    out.write('metric=loss:0.2\\n')\n",
    )
    submit(world, "deep", command)
    cycle.run_once()
    until(cycle, clock, lambda: job(world, "deep").state == JobState.SUCCEEDED)
    assert job(world, "deep").metrics == {"loss": 0.2}  # the line after it is taken
    assert [row[4:6] for row in outputs(world)] == [("loss", 0.2)]


@pytest.mark.parametrize("depth", [33, 3000, 100_000])
def test_a_report_nested_too_deep_is_refused_as_bad_json(depth: int) -> None:
    line = '{"note": ' + "[" * depth + "]" * depth + "}"
    with pytest.raises(UserError) as refused:
        from_line(line)
    assert refused.value.problem is Problem.JOB_REPORT_BAD_JSON
    assert refused.value.values["detail"] == "nested deeper than 32 levels"


def test_a_run_that_exits_0_after_reporting_failed_ends_failed(
    world: Paika, clock: ManualClock
) -> None:
    notifier = RecordingObserver()
    cycle = report_cycle(world, notifier, None)
    submit(world, "liar", "echo status=failed note=diverged >> $PAIKA_REPORT_FILE")
    submit(world, "honest", "echo status=succeeded >> $PAIKA_REPORT_FILE; exit 3")
    cycle.run_once()
    until(
        cycle,
        clock,
        lambda: {job(world, n).state for n in ("liar", "honest")} == {JobState.FAILED},
    )
    liar = job(world, "liar")
    assert liar.exit_code == 0
    assert liar.state_reason == "exited with 0, but the job reported status=failed"
    codes = [e.code for e in notifier.events if e.job_id == liar.id]
    assert EventCode.REPORTED_FAILED in codes
    assert job(world, "honest").state_reason == "exited with 3"  # a failed exit stays failed
    assert ("status", None, "failed") in [row[4:7] for row in outputs(world, liar.id)]
    assert ("note", None, "diverged") in [row[4:7] for row in outputs(world, liar.id)]


def _post(url: str, job_id: int | None, token: str | None, body: object) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{url}/v1/jobs/{job_id}/report", content=content, headers=headers)


def _state(paika: Paika) -> tuple[object, ...]:
    """Everything a refused report must leave as it was."""
    jobs = tuple(
        (j.id, j.state, j.metrics, j.output, j.version) for j in (job(paika, "a"), job(paika, "b"))
    )
    return (tuple(outputs(paika)), jobs)


def test_refused_reports_change_nothing(world: Paika, clock: ManualClock, endpoint: str) -> None:
    cycle = report_cycle(world, RecordingObserver(), endpoint)
    submit(world, "a", "sleep 60")
    submit(world, "b", "sleep 60")
    cycle.run_once()
    a, b = job(world, "a"), job(world, "b")
    assert a.state == b.state == JobState.RUNNING
    assert a.report_token and b.report_token and a.report_token != b.report_token
    good = {"metrics": {"loss": 0.5}}
    before = _state(world)
    refusals = [
        (_post(endpoint, a.id, None, good), 401),
        (_post(endpoint, a.id, "forged-" + "x" * 36, good), 401),
        (_post(endpoint, b.id, a.report_token, good), 401),  # A's token for B
        (_post(endpoint, 999_999, a.report_token, good), 401),
        (_post(endpoint, a.id, a.report_token, b"x" * (64 * 1024 + 1)), 413),
        (_post(endpoint, a.id, a.report_token, b'{"metrics": {"loss": NaN}}'), 400),
        (_post(endpoint, a.id, a.report_token, {"metrics": {"loss": "0.5"}}), 400),
        (_post(endpoint, a.id, a.report_token, {"secret": 1}), 400),
        (_post(endpoint, a.id, a.report_token, {"metrics": {"a b": 1}}), 400),
        (_post(endpoint, a.id, a.report_token, {}), 400),
        (_post(endpoint, a.id, a.report_token, DEEP_JSON.encode()), 400),
        # Without the run's token nothing of the body is read: junk, deep or large, is 401.
        (_post(endpoint, a.id, None, b"[" * 100_000), 401),
        (_post(endpoint, a.id, "forged-" + "x" * 36, DEEP_JSON.encode()), 401),
        (_post(endpoint, a.id, None, b"x" * (64 * 1024 + 1)), 401),
    ]
    for response, status in refusals:
        assert response.status_code == status, response.text
        assert response.json()["error"] and response.json()["problem"]
        assert _state(world) == before
    assert "not the current run's token of job" in refusals[1][0].json()["error"]
    # The right token is taken …
    taken = _post(endpoint, a.id, a.report_token, good)
    assert taken.json() == {"job_id": a.id, "attempt": 1, "stored": 1}
    assert job(world, "a").metrics == {"loss": 0.5}
    # … until the run has ended: then it is refused, saying so.
    ok(world, "UALICE", f"cancel {a.id}")
    until(cycle, clock, lambda: job(world, "a").state == JobState.CANCELLED)
    before = _state(world)
    late = _post(endpoint, a.id, a.report_token, {"metrics": {"loss": 0.1}})
    assert late.status_code == 409
    assert "has ended" in late.json()["error"]
    assert _state(world) == before


def test_a_token_of_an_earlier_run_is_refused(
    world: Paika, clock: ManualClock, endpoint: str, agents: dict[str, Agent]
) -> None:
    cycle = report_cycle(world, RecordingObserver(), endpoint)
    submit(world, "again", "sleep 60", extra="type=A100-80GB,T4-16GB")
    cycle.run_once()
    first = job(world, "again")
    host = next(a for a in agents.values() if a.store and a.store.all_jobs())
    host.stop()  # its host goes silent; paika gives up on the run and starts it again
    clock.advance(timedelta(seconds=10))
    cycle.run_once()
    clock.advance(timedelta(hours=25))
    until(cycle, clock, lambda: job(world, "again").attempts == 2)
    second = job(world, "again")
    assert second.state == JobState.RUNNING and second.report_token != first.report_token
    before = outputs(world)
    old = _post(endpoint, first.id, first.report_token, {"metrics": {"loss": 0.2}})
    assert old.status_code == 401
    assert outputs(world) == before
    new = _post(endpoint, second.id, second.report_token, {"metrics": {"loss": 0.2}})
    assert new.json()["attempt"] == 2
    assert outputs(world) == [(second.id, 2, "job", "metric", "loss", 0.2, None)]


def test_gpu_done_writes_its_outputs_through_the_same_place(
    world: Paika, clock: ManualClock
) -> None:
    cycle = report_cycle(world, RecordingObserver(), None)
    submit(world, "byhand", "sleep 60")
    cycle.run_once()
    byhand = job(world, "byhand")
    ok(world, "UALICE", f"done {byhand.id} output=s3://ckpt/hand metric=loss:0.2")
    done = job(world, "byhand")
    assert (done.metrics, done.output) == ({"loss": 0.2}, "s3://ckpt/hand")
    assert outputs(world) == [
        (done.id, 1, "person", "metric", "loss", 0.2, None),
        (done.id, 1, "person", "artefact", "output", None, "s3://ckpt/hand"),
    ]
    until(cycle, clock, lambda: job(world, "byhand").state == JobState.SUCCEEDED)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (
            "metric=loss:0.31 metric=top1:76.2 output=s3://ckpt/x status=succeeded",
            Report(
                (Metric("loss", 0.31), Metric("top1", 76.2)),
                (Artefact("s3://ckpt/x"),),
                "succeeded",
            ),
        ),
        ('note="two words" status=failed', Report(status="failed", note="two words")),
        (
            '{"metrics": {"loss": 1}, "outputs": [{"name": "best", "location": "s3://b"}]}',
            Report((Metric("loss", 1.0),), (Artefact("s3://b", "best"),)),
        ),
    ],
)
def test_a_report_line_reads_as_the_command_does(line: str, said: Report) -> None:
    assert from_line(line) == said


@pytest.mark.parametrize(
    ("words", "mistake"),
    [
        (["metric=loss:abc"], Mistake.BAD_VALUE),
        (["metric=loss:1e999"], Mistake.BAD_VALUE),
        (["status=maybe"], Mistake.BAD_VALUE),
        (["metrc=loss:1"], Mistake.UNKNOWN_KEY),
        (["loss:1"], Mistake.TAKES_NO_WORDS_USE_KEYS),
        (["status=failed", "status=succeeded"], Mistake.GIVEN_TWICE),
        (["metric=" + "x" * 65 + ":1"], Mistake.BAD_VALUE),
    ],
)
def test_words_that_are_not_a_report_name_the_key(words: list[str], mistake: Mistake) -> None:
    with pytest.raises(ParseError) as caught:
        from_words(words)
    assert caught.value.problem == mistake


def test_paika_report_outside_a_job_says_what_is_missing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert job_report(["metric=loss:0.3"], env={}) == 1
    assert "PAIKA_JOB_ID PAIKA_JOB_TOKEN PAIKA_REPORT_URL" in capsys.readouterr().err
    assert job_report([], env={}) == 2
    assert "says nothing" in capsys.readouterr().err


def test_paika_report_appends_to_the_report_file_without_a_url(tmp_path: Path) -> None:
    path = tmp_path / "report"
    path.touch(mode=0o600)
    env = {"PAIKA_REPORT_FILE": str(path), "PAIKA_JOB_ID": "7.1"}
    assert job_report(["metric=loss:0.3", "output=s3://x"], env=env) == 0
    (line,) = path.read_text().splitlines()
    assert from_line(line) == Report((Metric("loss", 0.3),), (Artefact("s3://x"),))
    assert job_report(["metric=loss:0.3"], env={"PAIKA_REPORT_FILE": str(tmp_path / "no")}) == 1


def test_paika_up_takes_reports_beside_metrics_and_health(tmp_path: Path) -> None:
    """The real `paika up` (Slack off) serves the report route on its own address."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PAIKA_", "SLACK_"))}
    env = {
        **clean,
        "PAIKA_DATA_DIR": str(tmp_path / "data"),
        "PAIKA_HTTP_PORT": str(port),
        "PAIKA_AGENT_TOKEN": TOKEN,
    }
    up = subprocess.Popen(
        [PAIKA, "up"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code in (200, 503):
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "paika up did not answer"
            time.sleep(0.1)
        refused = _post(base, 1, "forged-token", {"metrics": {"loss": 0.3}})
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        assert "PAIKA_JOB_TOKEN" in refused.json()["error"]
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(timeout=30)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()


class LosingFirstAnswer(AgentDispatcher):
    """Dispatches for real, but the first start's answer is lost before it reached the host;
    every start order is kept."""

    def __init__(self) -> None:
        super().__init__(TOKEN, timeout=2.0)
        self.orders: list[StartOrder] = []

    def start(self, order: StartOrder) -> None:
        self.orders.append(order)
        if len(self.orders) == 1:
            raise DispatchError(order.host, order.job_id, "timed out", known=False)
        super().start(order)


def test_a_resent_start_carries_the_same_report_token(
    world: Paika, clock: ManualClock, endpoint: str
) -> None:
    cycle = report_cycle(world, RecordingObserver(), endpoint)
    dispatcher = cycle.dispatcher = LosingFirstAnswer()
    submit(world, "resent", "sleep 60")
    result = cycle.run_once()
    assert result.unconfirmed == [job(world, "resent").id]
    until(cycle, clock, lambda: job(world, "resent").confirmed_at is not None)
    first, second = dispatcher.orders[:2]
    assert (first.job_id, first.attempt) == (second.job_id, second.attempt)
    token = job(world, "resent").report_token
    assert first.env["PAIKA_JOB_TOKEN"] == second.env["PAIKA_JOB_TOKEN"] == token
    assert first.env["PAIKA_REPORT_URL"] == endpoint
