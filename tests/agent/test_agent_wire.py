"""The wire format: models read from JSON as strictly as they are built in Python, and a bad
value is BadRequest naming its field, never pydantic's own error."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from scheduler.agent.errors import BadRequest
from scheduler.agent.protocol import (
    GpuInfo,
    GpuProcess,
    Health,
    JobInfo,
    JobState,
    StartRequest,
    Status,
    StopRequest,
)

STARTED = datetime(2026, 1, 5, 9, 30, 0, 250000, tzinfo=UTC)


def _job(**fields: object) -> dict[str, object]:
    return {
        "job_id": "7.1",
        "state": "running",
        "gpus": [0],
        "pid": 4242,
        "command": ["/bin/sh", "-c", "true"],
        "image": None,
        "cwd": None,
        "started_at": STARTED.isoformat(),
        "ended_at": None,
        "exit_code": None,
        "signal": None,
        "stop_requested": False,
        "log_path": "/var/log/7.1.log",
        **fields,
    }


def _status(**fields: object) -> bytes:
    health = {"status": "ok", "agent_version": "1", "api_version": 1, "host": "h"}
    gpu = {"index": 0, "uuid": "GPU-0", "name": "T4", "processes": [{"pid": 1}]}
    answer = {"health": health, "host": "h", "gpus": [gpu], "jobs": [_job()], **fields}
    return json.dumps(answer).encode()


def test_a_status_answer_reads_into_models() -> None:
    status = Status.from_json(_status())
    assert status.health == Health(status="ok", agent_version="1", api_version=1, host="h")
    assert status.gpus == [
        GpuInfo(index=0, uuid="GPU-0", name="T4", processes=(GpuProcess(pid=1),))
    ]
    (job,) = status.jobs
    assert (job.state, job.started_at, job.running) == (JobState.RUNNING, STARTED, True)


def test_what_an_agent_writes_its_client_reads_back() -> None:
    job = JobInfo.from_json(json.dumps(_job(state="exited", ended_at=STARTED.isoformat())))
    assert JobInfo.from_json(job.to_json()) == job
    written = json.loads(job.to_json())
    assert datetime.fromisoformat(written["started_at"]) == STARTED  # with its offset
    assert (written["state"], written["gpus"], written["ended_at"] is not None) == (
        "exited",
        [0],
        True,
    )
    assert StopRequest().to_json() == b"{}" and json.loads(StopRequest(grace_s=3).to_json()) == {
        "grace_s": 3.0
    }


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (_status(jobs=[_job(state="zombie")]), "jobs.0.state: expected one of"),
        (_status(jobs=[_job(started_at=1_700_000_000)]), "jobs.0.started_at: expected an ISO"),
        (_status(jobs=[_job(started_at="yesterday")]), "jobs.0.started_at: expected an ISO"),
        (_status(jobs=[_job(gpus=[True])]), "jobs.0.gpus.0: expected an integer, got a boolean"),
        (_status(jobs=[_job(pid=1.0)]), "jobs.0.pid: expected an integer, got a number"),
        (_status(jobs=[_job(command="true")]), "jobs.0.command: expected a list, got a string"),
        (_status(jobs=[{"job_id": "x"}]), "jobs.0.state: missing"),
        (_status(gpus=[{"index": "0", "uuid": "u", "name": "n"}]), "gpus.0.index: expected an"),
        (_status(health=None), "health: expected a JSON object, got null"),
        (b"[1, 2]", "status: expected a JSON object, got a list"),
        (b"{nope", "status: not JSON"),
    ],
)
def test_bad_answers_are_refused_naming_the_field(answer: bytes, message: str) -> None:
    with pytest.raises(BadRequest) as caught:
        Status.from_json(answer)
    assert caught.value.message.startswith(message), caught.value.message


def test_an_answer_may_carry_fields_this_client_does_not_know() -> None:
    job = JobInfo.from_json(json.dumps(_job(new_field=1, log_path=None)))
    assert job.log_path == ""  # null, as before: no log path


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"gpus": [0], "argv": ["true"], "job_id": ".."}, "job_id: '..' is not 1-64"),
        ({"job_id": "a", "gpus": [0, 0], "argv": ["true"]}, "gpus: [0, 0] names a GPU twice"),
        ({"job_id": "a", "gpus": [-1], "argv": ["true"]}, "gpus: -1 is not a GPU index"),
        ({"job_id": "a", "gpus": [0], "argv": "true"}, "argv: expected a list, got a string"),
        ({"job_id": "a", "gpus": [0], "argv": [""]}, "argv: the program (argv[0]) is empty"),
        ({"job_id": "a", "gpus": [0], "argv": ["a\0"]}, "argv: 'a\\x00' is not a string"),
        ({"job_id": "a", "gpus": [0], "shell": "true", "argv": ["x"]}, "argv, shell: give"),
        ({"job_id": "a", "gpus": [0], "shell": "x", "env": {"A-B": "1"}}, "env: 'A-B' is not"),
        ({"job_id": "a", "gpus": [0], "shell": "x", "env": {"A": "\0"}}, "env: the value of A"),
        ({"job_id": "a", "gpus": [0], "shell": "x", "cwd": ""}, "cwd: '' is not an absolute"),
        ({"job_id": "a", "gpus": [0], "shell": "x", "image": "-v"}, "image: '-v' is not a"),
        ({"job_id": "a", "gpus": [0], "shell": "x", "user": "root"}, "user: unknown field"),
    ],
)
def test_bad_requests_are_refused_the_same_on_both_sides(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(BadRequest) as built:
        StartRequest(**fields)  # type: ignore[arg-type]
    with pytest.raises(BadRequest) as read:
        StartRequest.from_json(json.dumps(fields))
    assert built.value.message == read.value.message
    assert built.value.message.startswith(message), built.value.message


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"grace_s": -1}', "grace_s: -1.0 is not between 0 and 86400"),
        ('{"grace_s": true}', "grace_s: expected a number, got a boolean"),
        ('{"grace_s": "5"}', "grace_s: expected a number, got a string"),
        ('{"grace": 5}', "grace: unknown field (known: grace_s)"),
        ("[]", "body: expected a JSON object, got a list"),
    ],
)
def test_bad_stops_are_refused(body: str, message: str) -> None:
    with pytest.raises(BadRequest) as caught:
        StopRequest.from_json(body)
    assert caught.value.message == message


def test_requests_take_lists_and_dicts_and_keep_tuples_and_a_copy() -> None:
    env = {"A": "1"}
    request = StartRequest(job_id="a", gpus=[1, 0], argv=["python", "x.py"], env=env)
    env["B"] = "2"
    assert (request.gpus, request.argv, request.env) == ((1, 0), ("python", "x.py"), {"A": "1"})
    assert (
        StartRequest.from_json(json.dumps({**json.loads(request.to_json()), "env": None})).env == {}
    )
