"""Replies a new team found false, as they typed the commands (issue 29): each says what is so."""

from __future__ import annotations

import json
from collections.abc import Sequence
from zoneinfo import ZoneInfo

import pytest
from sqlmodel import Session, select

from bot.blocks.replies import reply
from scheduler.app import Paika, Reply
from storage.models import Allocation, BumpRequest, BumpState, Gpu, Host, Job, JobState

SUBMIT = 'submit name={name} gpus={gpus} hours=2 priority=normal data=ready cmd="python t.py"'


def gpu(paika: Paika, user: str, text: str) -> Reply:
    reply = paika.run(text, user)
    assert reply.ok, reply.text
    return reply


@pytest.fixture
def team(paika: Paika) -> Paika:
    for user in ("UALICE", "UBOB"):
        gpu(paika, "UADMIN", f"admin member add <@{user}> team=vision")
    gpu(paika, "UADMIN", "admin member add <@UVERA> team=vision role=approver")
    return paika


def _start(paika: Paika, name: str, host: str, indices: Sequence[int]) -> None:
    """The job as the cycle leaves it once its start is confirmed: running on those cards."""
    now = paika.clock.now()
    with Session(paika.engine) as session:
        job = session.exec(select(Job).where(Job.name == name)).one()
        host_id = session.exec(select(Host.id).where(Host.name == host)).one()
        cards = session.exec(select(Gpu).where(Gpu.host_id == host_id)).all()
        job.state, job.started_at = JobState.RUNNING, now
        session.add(job)
        session.add_all(
            Allocation(job_id=job.id or 0, gpu_id=c.id or 0, active_gpu_id=c.id, started_at=now)
            for c in cards
            if c.index in indices
        )
        session.commit()


def _host(paika: Paika, name: str, cards: Sequence[tuple[str, float]], **fields: object) -> None:
    with Session(paika.engine) as session:
        host = Host(name=name, url=f"https://{name}:8470", added_at=paika.clock.now(), **fields)  # type: ignore[arg-type]
        session.add(host)
        session.flush()
        session.add_all(
            Gpu(host_id=host.id or 0, index=i, gpu_type=kind, memory_gib=mem)
            for i, (kind, mem) in enumerate(cards)
        )
        session.commit()


T4 = ("T4-16GB", 16.0)
A100 = ("A100-80GB", 80.0)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"state": "down"}, "gpu-a (down)"),
        ({"state": "up", "draining": True}, "gpu-a (draining)"),
    ],
)
def test_a_job_whose_only_host_is_down_or_draining_waits_for_it(
    team: Paika, fields: dict[str, object], said: str
) -> None:
    _host(team, "gpu-t", [T4, T4], state="up")
    _host(team, "gpu-a", [A100, A100], **fields)
    gpu(team, "UALICE", SUBMIT.format(name="big", gpus=1) + " type=A100-80GB")
    text = gpu(team, "UALICE", "status big").text
    assert "no host can ever fit" not in text.lower()
    assert said in text and "waits for them" in text


def test_a_job_for_a_host_not_yet_seen_waits_for_it(team: Paika) -> None:
    _host(team, "gpu-t", [T4], state="up")
    gpu(team, "UADMIN", "admin host add gpu-new url=https://gpu-new:8470")
    gpu(team, "UALICE", SUBMIT.format(name="big", gpus=1) + " type=A100-80GB")
    text = gpu(team, "UALICE", "status big").text
    assert "no host can ever fit" not in text.lower()
    assert "gpu-new (not yet seen" in text


def test_never_fits_is_said_when_no_registered_host_could_fit(team: Paika) -> None:
    _host(team, "gpu-t", [T4, T4], state="up")
    _host(team, "gpu-a", [A100, A100], state="down")
    gpu(team, "UALICE", SUBMIT.format(name="huge", gpus=4) + " type=A100-80GB")
    text = gpu(team, "UALICE", "status huge").text
    assert "no host can ever fit this job" in text.lower()


def test_approving_a_bump_for_a_job_that_started_says_it_is_moot(team: Paika) -> None:
    _host(team, "gpu-a", [A100, A100, A100, A100], state="up")
    reply = gpu(team, "UALICE", SUBMIT.format(name="urgent", gpus=1).replace("normal", "core"))
    assert "bump request #" in reply.text
    _start(team, "urgent", "gpu-a", [0])
    with Session(team.engine) as session:
        request = session.exec(select(BumpRequest)).one()
    text = gpu(team, "UVERA", f"approve {request.id}").text
    assert "approved" not in text.lower(), text
    assert "already running" in text and "as normal" in text and "moot" in text
    with Session(team.engine) as session:
        closed = session.exec(select(BumpRequest)).one()
        job = session.exec(select(Job).where(Job.name == "urgent")).one()
    assert closed.state == BumpState.WITHDRAWN and job.priority == "normal"
    again = gpu(team, "UVERA", f"approve {request.id}").text
    assert "already withdrawn" in again and "nothing changed" in again


def test_a_running_job_s_status_names_the_host_and_cards_it_runs_on(team: Paika) -> None:
    _host(team, "gpu-t", [T4, T4], state="up")
    _host(team, "gpu-a", [A100, A100, A100, A100], state="up")
    gpu(team, "UALICE", SUBMIT.format(name="run", gpus=2))  # a T4 would do: cheapest fit
    _start(team, "run", "gpu-a", [1, 2])
    answer = gpu(team, "UALICE", "status run")
    assert "runs on: gpu-a (2× A100-80GB)" in answer.text, answer.text
    slack = json.dumps(
        ensure_ascii=False, obj=reply(answer.result, "en", ZoneInfo("UTC"), team.clock.now()).blocks
    )
    assert "Likely card type" not in slack and "T4-16GB" not in slack
    assert "Runs on" in slack and "gpu-a (2× A100-80GB)" in slack
